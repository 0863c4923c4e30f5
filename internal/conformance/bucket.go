package conformance

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// exactBucket is the token bucket in rational numbers, whose decisions the
// token bucket and GCRA must make: the reference the integer
// implementations must match exactly.
type exactBucket struct {
	lim    strategy.Limit
	tokens *big.Rat // nil: full
	last   int64
}

func (e *exactBucket) allowN(now, n int64) strategy.Result {
	c := big.NewRat(e.lim.Capacity(), 1)
	rate := big.NewRat(e.lim.Limit, e.lim.Window.Milliseconds()) // tokens per ms
	if e.tokens == nil {
		e.tokens, e.last = new(big.Rat).Set(c), now
	}
	if now > e.last {
		e.tokens.Add(e.tokens, new(big.Rat).Mul(rate, big.NewRat(now-e.last, 1)))
		e.last = now
	}
	if e.tokens.Cmp(c) > 0 {
		e.tokens.Set(c)
	}
	ms := func(tokens *big.Rat) time.Duration { // ceil(tokens / rate) ms
		q := new(big.Rat).Quo(tokens, rate)
		d := new(big.Int).Add(q.Num(), new(big.Int).Sub(q.Denom(), big.NewInt(1)))
		return time.Duration(d.Div(d, q.Denom()).Int64()) * time.Millisecond
	}
	floor := func(x *big.Rat) int64 { return new(big.Int).Div(x.Num(), x.Denom()).Int64() }
	want := max(n, 1)
	res := strategy.Result{Limit: e.lim.Capacity(), Remaining: floor(e.tokens), ResetAfter: ms(new(big.Rat).Sub(c, e.tokens))}
	need := big.NewRat(want, 1)
	switch {
	case want > e.lim.Capacity():
		res.RetryAfter = strategy.Never
	case need.Cmp(e.tokens) > 0:
		res.RetryAfter = ms(new(big.Rat).Sub(need, e.tokens))
	case n == 0:
		res.Allowed = true
	default:
		e.tokens.Sub(e.tokens, need)
		res.Allowed, res.Remaining, res.ResetAfter = true, floor(e.tokens), ms(new(big.Rat).Sub(c, e.tokens))
	}
	return res
}

// ExactAgainstRationals: 10,000 calls with tiny irregular time steps give
// exactly the Results of the rational-number token bucket, on the local
// twin, on miniredis and on a real Redis: no unit is ever gained or lost to
// rounding. The token bucket and GCRA must both pass it.
func ExactAgainstRationals[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	t.Helper()
	limits := []strategy.Limit{
		{Limit: 7, Window: 333 * time.Millisecond, Burst: 5},
		{Limit: 3, Window: time.Second},
		{Limit: 11, Window: 7 * time.Millisecond, Burst: 4},
		{Limit: 1 << 20, Window: time.Second, Burst: 5000},
		{Limit: 999_999_937, Window: 997 * time.Millisecond, Burst: 1 << 20},
	}
	run := func(t *testing.T, st strategy.Strategy, clock *Clock, lim strategy.Limit, calls int) {
		seed := uint64(time.Now().UnixNano())
		rng := rand.New(rand.NewPCG(seed, 11))
		ref := &exactBucket{lim: lim}
		var allowed int64
		for i := 0; i < calls; i++ {
			if rng.IntN(50) == 0 {
				clock.Advance(time.Duration(rng.Int64N(lim.Window.Milliseconds()+1)) * time.Millisecond)
			} else {
				clock.Advance(time.Duration(rng.IntN(4)) * time.Millisecond)
			}
			n := rng.Int64N(lim.Capacity()/2+2) / int64(1+rng.IntN(4))
			now := clock.Now().UnixMilli()
			got := allowN(t, st, "k", n)
			if want := ref.allowN(now, n); got != want {
				t.Fatalf("seed %d, call %d, AllowN(%d) at +%dms:\n got  %+v\n want %+v (exact)", seed, i, n, now-Epoch.UnixMilli(), got, want)
			}
			if got.Allowed {
				allowed += n
			}
		}
		if allowed == 0 {
			t.Fatalf("seed %d: nothing allowed", seed)
		}
	}
	for i, lim := range limits {
		t.Run(lim.String(), func(t *testing.T) {
			t.Run("local", func(t *testing.T) {
				calls := 10_000
				if i%2 == 1 { // the reference is slow under -race: fewer calls for some limits
					calls = 2000
				}
				clock := NewClock(Epoch)
				run(t, Backend(t, "local", lim, clock, newRedis, newLocal), clock, lim, calls)
			})
			t.Run("miniredis", func(t *testing.T) {
				clock := NewClock(Epoch)
				run(t, Backend(t, "miniredis", lim, clock, newRedis, newLocal), clock, lim, 300)
			})
		})
	}
	t.Run("redis", func(t *testing.T) { // the script on a real Redis, 10,000 calls
		// a long window, so that no key expires on the server's own clock
		// while the manual clock waits
		lim := strategy.Limit{Limit: 7, Window: 33300 * time.Millisecond, Burst: 5}
		clock := NewClock(Epoch)
		run(t, Backend(t, "redis", lim, clock, newRedis, newLocal), clock, lim, 10_000)
	})
}

// ConcurrentExactlyCapacity: 64 goroutines over 4 clients of a real Redis,
// then on the local twin, hit one subject at one instant; exactly the
// capacity (Burst) is allowed.
func ConcurrentExactlyCapacity[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	t.Helper()
	const capacity, goroutines, perG = 300, 64, 10
	lim := strategy.Limit{Limit: 10, Window: time.Minute, Burst: capacity}
	frozen := strategy.ClockFunc(func() time.Time { return Epoch })
	run := func(t *testing.T, sts ...strategy.Strategy) {
		if got := Hammer(t, sts, "hot", goroutines, perG); got != capacity {
			t.Errorf("allowed %d of %d, want exactly %d", got, goroutines*perG, capacity)
		}
	}
	t.Run("redis", func(t *testing.T) {
		srv := testredis.Shared(t)
		prefix := testredis.Prefix(t)
		sts := make([]strategy.Strategy, 4)
		for i := range sts {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: goroutines / 4})
			t.Cleanup(func() { c.Close() })
			st, err := newRedis(c, lim, strategy.WithClock(frozen), strategy.WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			sts[i] = st
		}
		run(t, sts...)
	})
	t.Run("redis-batched", func(t *testing.T) { // 16 callers per client share its pipelines
		srv := testredis.Shared(t)
		prefix := testredis.Prefix(t)
		sts := make([]strategy.Strategy, 4)
		for i := range sts {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: goroutines / 4, ContextTimeoutEnabled: i%2 == 0})
			t.Cleanup(func() { c.Close() })
			st, err := newRedis(Batched(t, c, batch.WithMaxInFlight(2)), lim, strategy.WithClock(frozen), strategy.WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			sts[i] = st
		}
		run(t, sts...)
	})
	t.Run("local", func(t *testing.T) {
		st, err := newLocal(lim, strategy.WithClock(frozen))
		if err != nil {
			t.Fatal(err)
		}
		run(t, st)
	})
}

// OnBackends runs f, a subtest per backend of BackendNames, over the strategy
// that newRedis or newLocal makes for lim, on a manual clock at Epoch.
func OnBackends[R, L strategy.Strategy](t *testing.T, lim strategy.Limit, newRedis NewRedis[R], newLocal NewLocal[L], f func(t *testing.T, st strategy.Strategy, clock *Clock)) {
	t.Helper()
	for _, name := range BackendNames() {
		t.Run(name, func(t *testing.T) {
			clock := NewClock(Epoch)
			f(t, Backend(t, name, lim, clock, newRedis, newLocal), clock)
		})
	}
}

// BurstIgnoredAtLimitZero: a Limit of 0 denies everything, whatever
// Burst says, and never touches Redis.
func BurstIgnoredAtLimitZero[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	t.Helper()
	OnBackends(t, strategy.Limit{Limit: 0, Window: time.Second, Burst: 5}, newRedis, newLocal, func(t *testing.T, st strategy.Strategy, clock *Clock) {
		for _, n := range []int64{0, 1, 5} {
			r := allowN(t, st, "k", n)
			if r != (strategy.Result{RetryAfter: strategy.Never}) {
				t.Errorf("AllowN(%d) at Limit 0 = %+v, want denied with Limit 0, RetryAfter Never", n, r)
			}
		}
	})
}

// SteadyClientNeverDenied: a client that never runs ahead of the rate
// (by t ms after it started it has sent floor(t × Limit/Window) units) is
// never denied, over many windows, however awkward the emission interval.
// Requests fall on whole milliseconds, so unless the interval is a whole
// number of milliseconds the client sometimes sends up to 1 ms × rate + 1
// units in less than their time: the capacity is the smallest that allows
// that, 1 + ceil(rate × 1 ms). An approximate (rounded or floating-point)
// interval would drift and end up denying such a client.
func SteadyClientNeverDenied[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	t.Helper()
	for _, lim := range []strategy.Limit{
		{Limit: 10, Window: time.Second, Burst: 1}, // 100 ms exactly: capacity 1 suffices
		{Limit: 7, Window: 333 * time.Millisecond, Burst: 2},
		{Limit: 3, Window: time.Second, Burst: 2},
		{Limit: 100, Window: time.Minute, Burst: 2},
		{Limit: 11, Window: 7 * time.Millisecond, Burst: 3},
		{Limit: 1 << 20, Window: time.Second, Burst: 1050},
	} {
		t.Run(lim.String(), func(t *testing.T) {
			OnBackends(t, lim, newRedis, newLocal, func(t *testing.T, st strategy.Strategy, clock *Clock) {
				target := 150 // a round trip each: keep the Redis runs short
				if _, ok := st.(L); ok {
					target = 3000
				}
				w := lim.Window.Milliseconds()
				var sent int64
				for requests := 0; requests < target; requests++ {
					ms := (sent*w + w + lim.Limit - 1) / lim.Limit // the first ms at which unit sent+1 is due
					n := ms*lim.Limit/w - sent
					clock.Set(Epoch.Add(time.Duration(ms) * time.Millisecond))
					if r := allowN(t, st, "steady", n); !r.Allowed {
						t.Fatalf("at %dms, %d units (total %d, what the rate allows by then): %+v", ms, n, sent+n, r)
					}
					sent += n
				}
			})
		})
	}
}

// NeverAboveRate: whatever the requests, the units allowed in any closed
// interval [a, b] never exceed capacity + Limit × (b - a) / Window.
func NeverAboveRate[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	t.Helper()
	// Long intervals: a real Redis expires keys on its own clock, which runs
	// on while the manual clock waits, so a key must outlive any stall of the
	// test (an interval of 4.7s at least here).
	for _, lim := range []strategy.Limit{
		{Limit: 7, Window: 33300 * time.Millisecond, Burst: 3},
		{Limit: 10, Window: 100 * time.Second, Burst: 15},
		{Limit: 25, Window: 2 * time.Minute},
	} {
		t.Run(lim.String(), func(t *testing.T) {
			OnBackends(t, lim, newRedis, newLocal, func(t *testing.T, st strategy.Strategy, clock *Clock) {
				seed := uint64(time.Now().UnixNano())
				rng := rand.New(rand.NewPCG(seed, 3))
				type grant struct{ at, n int64 }
				var grants []grant
				w := lim.Window.Milliseconds()
				ops := 300
				if _, ok := st.(L); ok {
					ops = 3000
				}
				for i := 0; i < ops; i++ {
					if rng.IntN(3) == 0 {
						clock.Advance(time.Duration(rng.Int64N(w/3+1)) * time.Millisecond)
					}
					n := 1 + rng.Int64N(lim.Capacity())
					if r := allowN(t, st, "k", n); r.Allowed {
						grants = append(grants, grant{clock.Now().UnixMilli(), n})
					}
				}
				if len(grants) < 10 {
					t.Fatalf("seed %d: only %d grants", seed, len(grants))
				}
				for i := range grants {
					var sum int64
					for j := i; j < len(grants); j++ {
						sum += grants[j].n
						span := grants[j].at - grants[i].at
						if sum*w > lim.Capacity()*w+lim.Limit*span {
							t.Fatalf("seed %d: %d units allowed in [%d, %d] ms, more than %d + %d × %d/%d",
								seed, sum, grants[i].at, grants[j].at, lim.Capacity(), lim.Limit, span, w)
						}
					}
				}
			})
		})
	}
}
