package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// Miniredis starts a miniredis for t and returns it with a client on it;
// both are closed when t ends.
func Miniredis(t testing.TB) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	return mr, c
}

// RealRedis returns a client, closed when t ends, on the real redis-server
// that the test binary shares (see testredis.Shared). Keys must carry
// testredis.Prefix(t).
func RealRedis(t testing.TB) *redis.Client {
	t.Helper()
	return testredis.Shared(t).Client(t)
}

// NewRedis is a Redis strategy's constructor, e.g. slidinglog.New.
type NewRedis[S strategy.Strategy] func(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (S, error)

// NewLocal is a local twin's constructor, e.g. slidinglog.NewLocal.
type NewLocal[S strategy.Strategy] func(lim strategy.Limit, opts ...strategy.Option) (S, error)

// BackendNames are the backends a strategy runs on: its Redis constructor
// on miniredis and on a real Redis, its local twin, and the Redis
// constructor again on both through a batch.Client (see Batched).
func BackendNames() []string {
	return []string{"miniredis", "redis", "local", "miniredis-batched", "redis-batched"}
}

// Batched returns rdb wrapped in a batch.Client, closed when t ends, whose
// every call goes through its queue and flushers (the path concurrent calls
// take), not only the one a lone caller takes.
func Batched(t testing.TB, rdb redis.Scripter, opts ...batch.Option) redis.Scripter {
	t.Helper()
	c, err := batch.New(rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return queued{c}
}

// queued gives every call a context that can end, so that a batch.Client
// over a client without ContextTimeoutEnabled queues it rather than send it
// on the caller's goroutine.
type queued struct{ *batch.Client }

func (q queued) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return q.Client.EvalSha(ctx, sha, keys, args...)
}

func (q queued) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return q.Client.Eval(ctx, script, keys, args...)
}

// newOn builds, on backend name, the strategy that newRedis or newLocal
// makes for lim, reading clock.
func newOn[R, L strategy.Strategy](t *testing.T, name string, lim strategy.Limit, clock strategy.Clock, newRedis NewRedis[R], newLocal NewLocal[L]) (strategy.Strategy, error) {
	t.Helper()
	switch name {
	case "miniredis":
		_, rdb := Miniredis(t)
		return newRedis(rdb, lim, strategy.WithClock(clock))
	case "redis":
		return newRedis(RealRedis(t), lim, strategy.WithClock(clock), strategy.WithPrefix(testredis.Prefix(t)))
	case "local":
		return newLocal(lim, strategy.WithClock(clock))
	case "miniredis-batched":
		_, rdb := Miniredis(t)
		return newRedis(Batched(t, rdb), lim, strategy.WithClock(clock))
	case "redis-batched":
		return newRedis(Batched(t, RealRedis(t)), lim, strategy.WithClock(clock), strategy.WithPrefix(testredis.Prefix(t)))
	}
	t.Fatalf("unknown backend %q", name)
	return nil, nil
}

// Backend builds, on backend name (one of BackendNames), the strategy that
// newRedis or newLocal makes for lim, reading clock. It fails t when the
// constructor fails.
func Backend[R, L strategy.Strategy](t *testing.T, name string, lim strategy.Limit, clock strategy.Clock, newRedis NewRedis[R], newLocal NewLocal[L]) strategy.Strategy {
	t.Helper()
	st, err := newOn(t, name, lim, clock, newRedis, newLocal)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// RunBackends runs the suite over every backend of BackendNames, each a
// subtest; s.New is set to build the strategy on that backend.
func RunBackends[R, L strategy.Strategy](t *testing.T, s Subject, newRedis NewRedis[R], newLocal NewLocal[L]) {
	t.Helper()
	for _, name := range BackendNames() {
		t.Run(name, func(t *testing.T) {
			s := s
			s.New = func(t *testing.T, lim strategy.Limit, c *Clock) (strategy.Strategy, error) {
				return newOn(t, name, lim, c, newRedis, newLocal)
			}
			Run(t, s)
		})
	}
}

// DifferentialOf runs Differential over the strategy that newRedis makes on
// miniredis and the twin that newLocal makes, with the extra limits.
func DifferentialOf[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L], extra ...strategy.Limit) {
	t.Helper()
	Differential(t, func(t *testing.T, lim strategy.Limit, c *Clock) (strategy.Strategy, strategy.Strategy) {
		_, rdb := Miniredis(t)
		r, err := newRedis(rdb, lim, strategy.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		l, err := newLocal(lim, strategy.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		return r, l
	}, extra...)
}

// Equivalent runs Differential over two algorithms that promise the same
// decisions for the same inputs (the compact log and the sliding log): a's
// and b's Redis strategies side by side on one miniredis, then on the real
// Redis, then their local twins, with the extra limits. On the real Redis,
// whose TTLs run in real time, windows under 5 minutes and the clock are
// stretched alike (see Scaled). In its messages "redis" is a and "local"
// is b.
func Equivalent[RA, LA, RB, LB strategy.Strategy](t *testing.T, newA NewRedis[RA], localA NewLocal[LA], newB NewRedis[RB], localB NewLocal[LB], extra ...strategy.Limit) {
	t.Helper()
	for _, name := range BackendNames() {
		t.Run(name, func(t *testing.T) {
			Differential(t, func(t *testing.T, lim strategy.Limit, c *Clock) (strategy.Strategy, strategy.Strategy) {
				var rdb redis.Scripter
				var opts []strategy.Option
				switch name {
				case "miniredis":
					_, rdb = Miniredis(t)
				case "redis":
					rdb, opts = RealRedis(t), []strategy.Option{strategy.WithPrefix(testredis.Prefix(t))}
				}
				var clock strategy.Clock = c
				if k := int64((5*time.Minute + lim.Window - 1) / lim.Window); name == "redis" && k > 1 {
					lim.Window *= time.Duration(k)
					clock = Scaled(c, k)
				}
				opts = append(opts, strategy.WithClock(clock))
				var a, b strategy.Strategy
				var errA, errB error
				if rdb == nil {
					a, errA = localA(lim, opts...)
					b, errB = localB(lim, opts...)
				} else {
					a, errA = newA(rdb, lim, opts...)
					b, errB = newB(rdb, lim, opts...)
				}
				if errA != nil || errB != nil {
					t.Fatalf("%v: %v, %v", lim, errA, errB)
				}
				return a, b
			}, extra...)
		})
	}
}
