package ratelimit

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// denyCache remembers, per subject, the last denial Redis returned, so that
// requests of at least that cost are denied in-process until its RetryAfter
// has passed. It is sound: RetryAfter is the earliest time at which the same
// request can pass if nothing else is recorded, units recorded meanwhile only
// delay that, and a larger cost needs more room; so Redis would deny every
// request the cache denies, unless the subject is reset elsewhere (Reset on
// this Limiter invalidates the entry). Times are taken before the request is
// sent, and a millisecond is taken off to cover Redis's whole-millisecond
// arithmetic.
//
// At most max subjects are held. A full stripe first drops expired entries,
// then an arbitrary one: forgetting a denial only costs a round trip.
type denyCache struct {
	now     func() int64 // ns, monotonic unless a client clock is set
	seed    maphash.Seed
	gen     atomic.Uint64 // bumped by every Reset; puts begun before one are dropped
	stripes []denyStripe
}

type denyStripe struct {
	mu  sync.Mutex
	m   map[string]denial
	max int      // entries this stripe may hold; the stripes' sum is the cache's
	_   [32]byte // keep stripes on separate cache lines
}

type denial struct {
	cost      int64 // the denied request's cost
	until     int64 // ns: deny requests of at least cost while now < until
	retryAt   int64 // ns: when Redis said the request could pass
	resetAt   int64 // ns: when Redis said the subject is back to full capacity
	limit     int64
	remaining int64
}

const denyStripes = 64

func newDenyCache(max int, clock strategy.Clock) *denyCache {
	n := denyStripes
	for n > 1 && n > max {
		n /= 2
	}
	c := &denyCache{seed: maphash.MakeSeed(), stripes: make([]denyStripe, n)}
	for i := range c.stripes {
		c.stripes[i].m = make(map[string]denial)
		c.stripes[i].max = max / n
		if i < max%n {
			c.stripes[i].max++
		}
	}
	if clock != nil {
		c.now = func() int64 { return clock.Now().UnixNano() }
	} else {
		base := time.Now()
		c.now = func() int64 { return int64(time.Since(base)) }
	}
	return c
}

func (c *denyCache) stripe(key string) *denyStripe {
	return &c.stripes[maphash.String(c.seed, key)%uint64(len(c.stripes))]
}

// lookup returns the cached denial of a request of cost n (> 0) for key.
func (c *denyCache) lookup(key string, n int64) (Result, bool) {
	s := c.stripe(key)
	s.mu.Lock()
	e, ok := s.m[key]
	if !ok {
		s.mu.Unlock()
		return Result{}, false
	}
	now := c.now()
	if now >= e.until {
		delete(s.m, key)
		s.mu.Unlock()
		return Result{}, false
	}
	s.mu.Unlock()
	if n < e.cost {
		return Result{}, false
	}
	if n > e.limit { // beyond the capacity: Redis would say never
		return Result{Limit: e.limit, Remaining: e.remaining, RetryAfter: strategy.Never}, true
	}
	retry := ceilMs(time.Duration(e.retryAt - now))
	return Result{
		Allowed:    false,
		Limit:      e.limit,
		Remaining:  e.remaining,
		RetryAfter: retry,
		ResetAfter: max(ceilMs(time.Duration(e.resetAt-now)), retry),
	}, true
}

// begin returns what put needs: the generation and the time before the
// request is sent.
func (c *denyCache) begin() (gen uint64, start int64) {
	gen = c.gen.Load()
	return gen, c.now()
}

// put records Redis's denial r of a request of cost n for key, sent at start.
func (c *denyCache) put(key string, n int64, r Result, gen uint64, start int64) {
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
	s := c.stripe(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.gen.Load() != gen { // a Reset ran meanwhile: the denial may predate it
		return
	}
	if _, ok := s.m[key]; !ok && len(s.m) >= s.max {
		now := c.now()
		for k, old := range s.m {
			if old.until <= now {
				delete(s.m, k)
			}
		}
		if len(s.m) >= s.max {
			for k := range s.m {
				delete(s.m, k)
				break
			}
		}
	}
	s.m[key] = e
}

// invalidate forgets key's denial and any denial in flight.
func (c *denyCache) invalidate(key string) {
	c.gen.Add(1)
	s := c.stripe(key)
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
}

// len returns the number of subjects held.
func (c *denyCache) len() int {
	n := 0
	for i := range c.stripes {
		s := &c.stripes[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}
