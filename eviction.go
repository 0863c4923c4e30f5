package ratelimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Redis whose maxmemory-policy evicts keys resets the subjects whose keys
// it evicts: they start afresh and are allowed again. Every key of a limiter
// has a TTL, so volatile-* policies evict them as readily as allkeys-*
// ones; only noeviction (or no maxmemory) keeps them. The server says which
// it runs only to CONFIG GET, which managed services and ACLs may refuse.
//
// A Limiter on Redis with an Observer asks once, off the decision path: the
// first decision it reports starts CONFIG GET maxmemory* on a goroutine of
// its own (every master of a cluster, every shard of a ring), bounded by
// evictionCheckTimeout, and a later decision carries what it found in
// Decision.EvictionPolicy. A Set asks once for all its policies. New does
// not ask: it has no context, and it must not need Redis up to build a
// Limiter. A decision never waits for the check nor fails with it, and
// sends no command for it.

// evictionUnknown is Decision.EvictionPolicy when the server did not say.
const evictionUnknown = "unknown"

const (
	evictionCheckTimeout = 2 * time.Second // the longest one attempt waits
	evictionCheckTries   = 3               // attempts when Redis is not reached, before "unknown"
	evictionCheckRetry   = 5 * time.Second // between them
)

// The states of an evictionCheck.
const (
	checkIdle int32 = iota
	checkRunning
	checkDone
)

// evictionCheck learns, once, whether the server may evict a limiter's
// keys. Safe for concurrent use.
type evictionCheck struct {
	rdb   redis.Scripter
	state atomic.Int32
	next  atomic.Int64           // Unix ns before which no new attempt starts
	found atomic.Pointer[string] // what to report, until a decision takes it
	tries int                    // failed attempts; touched by the running attempt alone
}

// newEvictionCheck returns the check of rdb, nil when there is none to
// make (no client).
func newEvictionCheck(rdb redis.Scripter) *evictionCheck {
	if rdb == nil {
		return nil
	}
	return &evictionCheck{rdb: rdb}
}

// poll returns, once, what the check found that a decision at now must
// report, and starts the check if it is due. It costs a decision an atomic
// load or two.
func (e *evictionCheck) poll(ctx context.Context, now time.Time) string {
	switch e.state.Load() {
	case checkDone:
		if e.found.Load() != nil {
			if p := e.found.Swap(nil); p != nil {
				return *p
			}
		}
	case checkIdle:
		if now.UnixNano() >= e.next.Load() && e.state.CompareAndSwap(checkIdle, checkRunning) {
			go e.run(context.WithoutCancel(ctx))
		}
	}
	return ""
}

// run makes one attempt and settles the state.
func (e *evictionCheck) run(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, evictionCheckTimeout)
	defer cancel()
	policy, err := evictionPolicy(ctx, e.rdb)
	if err != nil {
		var refused redis.Error // the server answered: it will not say
		if !errors.As(err, &refused) && e.tries+1 < evictionCheckTries {
			e.tries++
			e.next.Store(time.Now().Add(evictionCheckRetry).UnixNano())
			e.state.Store(checkIdle)
			return
		}
		policy = evictionUnknown
	}
	if policy != "" {
		e.found.Store(&policy)
	}
	e.state.Store(checkDone)
}

// configGetter is a client that can ask CONFIG GET.
type configGetter interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
}

// evictionPolicy returns the maxmemory-policy of rdb's servers when one may
// evict keys ("" when none may): of every master of a cluster and every
// shard of a ring, the first that evicts. An error is any server's that
// evicts nothing, or rdb's when it cannot ask.
func evictionPolicy(ctx context.Context, rdb redis.Scripter) (string, error) {
	if u, ok := rdb.(interface{ Unwrap() redis.Scripter }); ok { // batch.Client
		rdb = u.Unwrap()
	}
	var (
		mu     sync.Mutex
		policy string
		errs   []error
	)
	one := func(ctx context.Context, c configGetter) error {
		p, err := nodePolicy(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		} else if policy == "" {
			policy = p
		}
		return nil
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		_ = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return one(ctx, n) })
	case *redis.Ring:
		_ = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return one(ctx, n) })
	case configGetter:
		_ = one(ctx, c)
	default:
		return "", errors.New("ratelimit: the client cannot send CONFIG GET")
	}
	if policy != "" {
		return policy, nil
	}
	return "", errors.Join(errs...)
}

// nodePolicy returns one server's maxmemory-policy when it may evict keys,
// "" when it may not: noeviction, or no maxmemory.
func nodePolicy(ctx context.Context, c configGetter) (string, error) {
	m, err := c.ConfigGet(ctx, "maxmemory*").Result() // one command on every version
	if err != nil {
		return "", err
	}
	policy, ok := m["maxmemory-policy"]
	if !ok {
		return "", errors.New("ratelimit: CONFIG GET maxmemory* did not return maxmemory-policy")
	}
	if strings.EqualFold(policy, "noeviction") || m["maxmemory"] == "0" {
		return "", nil
	}
	return policy, nil
}
