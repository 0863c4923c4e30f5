// Package denycache remembers, per subject, the last denial a backend
// returned, so that a Limiter can deny the same or a larger request
// in-process until its RetryAfter has passed.
package denycache

import (
	"sync/atomic"
	"time"

	"github.com/ratekit/ratelimit/internal/localstore"
	"github.com/ratekit/ratelimit/strategy"
)

// Cache remembers, per subject, the last denial Redis returned, so that
// requests of at least that cost are denied in-process until its RetryAfter
// has passed. It is sound: RetryAfter is the earliest time at which the same
// request can pass if nothing else is recorded, units recorded meanwhile only
// delay that, and a larger cost needs more room; so Redis would deny every
// request the cache denies, unless the subject is reset elsewhere (Reset on
// this Limiter invalidates the entry). Times are taken before the request is
// sent, and a millisecond is taken off to cover Redis's whole-millisecond
// arithmetic.
//
// It is a localstore.Store on nanoseconds: at most maxSubjects subjects; a
// new denial in a full stripe evicts the least recently used (looked up or
// stored) subject in O(1), which only costs that subject a round trip; and
// expired denials are freed by the store's sweeps, within about a window
// even with no traffic.
type Cache struct {
	now   func() int64  // ns, monotonic unless a client clock is set
	gen   atomic.Uint64 // bumped by every Reset; puts begun before one are dropped
	store *localstore.Store[denial]
}

type denial struct {
	cost      int64 // the denied request's cost
	until     int64 // ns: deny requests of at least cost while now < until
	retryAt   int64 // ns: when Redis said the request could pass
	resetAt   int64 // ns: when Redis said the subject is back to full capacity
	limit     int64
	remaining int64
}

// New returns a cache of at most maxSubjects subjects, on clock
// (the monotonic clock when nil), swept every window (at least
// localstore.MinSweep), that calls onEvict (when not nil) per eviction.
func New(maxSubjects int, clock strategy.Clock, window time.Duration, onEvict func()) *Cache {
	c := &Cache{}
	if clock != nil {
		c.now = func() int64 { return clock.Now().UnixNano() }
	} else {
		base := time.Now()
		c.now = func() int64 { return int64(time.Since(base)) }
	}
	c.store = localstore.NewStore[denial](localstore.Config{
		MaxSubjects: maxSubjects,
		Unit:        time.Nanosecond,
		Sweep:       max(window, localstore.MinSweep),
		Now:         c.now,
		OnEvict:     onEvict,
	})
	return c
}

func denyKey(key string) localstore.Key {
	return localstore.Key{Subject: key, Shard: strategy.NoShard}
}

// Lookup returns the cached denial of a request of cost n (> 0) for key.
func (c *Cache) Lookup(key string, n int64) (strategy.Result, bool) {
	now := c.now()
	e, ok := c.store.Get(denyKey(key), now)
	if !ok || n < e.cost {
		return strategy.Result{}, false
	}
	if n > e.limit { // beyond the capacity: Redis would say never
		return strategy.Result{Limit: e.limit, Remaining: e.remaining, RetryAfter: strategy.Never}, true
	}
	retry := ceilMs(time.Duration(e.retryAt - now))
	return strategy.Result{
		Allowed:    false,
		Limit:      e.limit,
		Remaining:  e.remaining,
		RetryAfter: retry,
		ResetAfter: max(ceilMs(time.Duration(e.resetAt-now)), retry),
	}, true
}

// Begin returns what Put needs: the generation and the time before the
// request is sent.
func (c *Cache) Begin() (gen uint64, start int64) {
	gen = c.gen.Load()
	return gen, c.now()
}

// Put records Redis's denial r of a request of cost n for key, sent at start.
func (c *Cache) Put(key string, n int64, r strategy.Result, gen uint64, start int64) {
	if r.Allowed || r.RetryAfter <= time.Millisecond { // also Never: config, not state
		return
	}
	e := denial{
		cost:      n,
		until:     start + int64(r.RetryAfter-time.Millisecond),
		retryAt:   start + int64(r.RetryAfter),
		resetAt:   start + int64(r.ResetAfter),
		limit:     r.Limit,
		remaining: r.Remaining,
	}
	c.store.Do(denyKey(key), c.now(), func(d *denial) int64 {
		if c.gen.Load() != gen { // a Reset ran meanwhile: the denial may predate it
			return d.until // unchanged (0, not stored, for a new subject)
		}
		*d = e
		return e.until
	})
}

// Invalidate forgets key's denial and any denial in flight.
func (c *Cache) Invalidate(key string) {
	c.gen.Add(1)
	c.store.Delete(denyKey(key))
}

// Len returns the number of subjects held.
func (c *Cache) Len() int { return c.store.Len() }

// ceilMs rounds d up to a whole number of milliseconds, as Redis results are.
func ceilMs(d time.Duration) time.Duration {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}
