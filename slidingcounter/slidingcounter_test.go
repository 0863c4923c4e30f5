package slidingcounter_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/slidingcounter"
	"github.com/ratekit/ratelimit/strategy"
)

// TestLargeAllowedReply takes the script's path for an allowed decision
// whose reset after ms * (limit + 1) + remaining is 2^53 or more: it must
// come back as the table, on miniredis and a real Redis alike.
func TestLargeAllowedReply(t *testing.T) {
	const w = 1 << 22 // limit * window = 2^52, the most the constructor allows
	lim := strategy.Limit{Limit: 1 << 30, Window: w * time.Millisecond}
	// at a window's first ms the reset after is 2 windows: 2^23 * (2^30 + 1) > 2^53
	start := time.UnixMilli((conformance.Epoch.UnixMilli()/w + 1) * w)
	want := strategy.Result{Allowed: true, Limit: 1 << 30, Remaining: 1<<30 - 3, ResetAfter: 2 * w * time.Millisecond}
	for _, backend := range conformance.BackendNames() {
		t.Run(backend, func(t *testing.T) {
			clock := conformance.NewClock(start)
			st := conformance.Backend(t, backend, lim, clock, slidingcounter.New, slidingcounter.NewLocal)
			if got, err := st.AllowN(t.Context(), "big", 3); err != nil || got != want {
				t.Fatalf("AllowN(3) = %+v, %v; want %+v", got, err, want)
			}
		})
	}
}

// compare drives r and l with ops random (time step, subject, n) steps and
// fails on the first Result that differs. step returns the next time.
func compare(t *testing.T, r, l strategy.Strategy, clock *conformance.Clock, ops int, seed uint64, step func(rng *rand.Rand, now int64) int64, cost func(rng *rand.Rand) int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := 0; i < ops; i++ {
		now := step(rng, clock.Now().UnixMilli())
		clock.Set(time.UnixMilli(now))
		key := []string{"a", "b"}[rng.IntN(2)]
		n := cost(rng)
		rr, rerr := r.AllowN(t.Context(), key, n)
		lr, lerr := l.AllowN(t.Context(), key, n)
		if rerr != nil || lerr != nil || rr != lr {
			t.Fatalf("seed %d, op %d at %d ms: AllowN(%q, %d):\n redis %+v %v\n local %+v %v",
				seed, i, now, key, n, rr, rerr, lr, lerr)
		}
	}
}

// TestDifferentialClockJumps lets the client clock jump backwards too,
// though never to before the start of the latest window it reached:
// further back, Redis may still hold counts that the twin has dropped (a
// TTL runs in the server's time, the twin's expiry in the clock's).
func TestDifferentialClockJumps(t *testing.T) {
	const w = 200
	lim := strategy.Limit{Limit: 6, Window: w * time.Millisecond}
	clock := conformance.NewClock(conformance.Epoch)
	_, rdb := conformance.Miniredis(t)
	r, _ := slidingcounter.New(rdb, lim, strategy.WithClock(clock))
	l, _ := slidingcounter.NewLocal(lim, strategy.WithClock(clock))
	latest := clock.Now().UnixMilli()
	compare(t, r, l, clock, 600, uint64(time.Now().UnixNano()), func(rng *rand.Rand, now int64) int64 {
		now = max(now+int64(rng.IntN(2*w)-w), latest/w*w)
		latest = max(latest, now)
		return now
	}, func(rng *rand.Rand) int64 { return int64(rng.IntN(4)) })
}

// TestDifferentialLargeProduct holds the script to the twin where Limit x
// Window is MaxProduct, on miniredis (Go's float64) and on a real Redis
// (C doubles): the integer arithmetic must stay exact in both.
func TestDifferentialLargeProduct(t *testing.T) {
	lim := strategy.Limit{Limit: 1 << 30, Window: (1 << 22) * time.Millisecond}
	const w = 1 << 22
	seed := uint64(time.Now().UnixNano())
	for _, name := range []string{"miniredis", "redis"} {
		t.Run(name, func(t *testing.T) {
			clock := conformance.NewClock(conformance.Epoch)
			var rdb redis.Scripter
			opts := []strategy.Option{strategy.WithClock(clock)}
			if name == "miniredis" {
				_, rdb = conformance.Miniredis(t)
			} else {
				rdb = conformance.RealRedis(t)
				opts = append(opts, strategy.WithPrefix(testredis.Prefix(t)))
			}
			r, err := slidingcounter.New(rdb, lim, opts...)
			if err != nil {
				t.Fatal(err)
			}
			l, _ := slidingcounter.NewLocal(lim, strategy.WithClock(clock))
			compare(t, r, l, clock, 300, seed, func(rng *rand.Rand, now int64) int64 {
				return now + rng.Int64N(w/4)
			}, func(rng *rand.Rand) int64 { return rng.Int64N(lim.Limit/3) + int64(rng.IntN(2))*(lim.Limit-7) })
		})
	}
}

// TestLimitLowered: counts recorded under a higher limit weigh as a full
// window under the new one, and RetryAfter stays exact.
func TestLimitLowered(t *testing.T) {
	for _, name := range []string{"miniredis", "redis"} {
		t.Run(name, func(t *testing.T) {
			clock := conformance.NewClock(conformance.Epoch)
			opts := []strategy.Option{strategy.WithClock(clock)}
			var rdb redis.Scripter
			if name == "miniredis" {
				_, rdb = conformance.Miniredis(t)
			} else {
				rdb = conformance.RealRedis(t)
				opts = append(opts, strategy.WithPrefix(testredis.Prefix(t)))
			}
			high, _ := slidingcounter.New(rdb, strategy.PerSecond(10), opts...)
			low, _ := slidingcounter.New(rdb, strategy.PerSecond(3), opts...)
			conformance.Allow(t, high, "k", 10)
			// as if 3 were recorded: in the next window 3 x (1000-e)/1000 + 1 <= 3 from e = 334ms
			r := conformance.Allow(t, low, "k", 1)
			if r.Allowed || r.Remaining != 0 || r.RetryAfter != 1334*time.Millisecond || r.ResetAfter != 2*time.Second {
				t.Fatalf("AllowN(1) under the lowered limit = %+v, want denied, Remaining 0, RetryAfter 1334ms, ResetAfter 2s", r)
			}
			clock.Advance(1333 * time.Millisecond)
			if r := conformance.Allow(t, low, "k", 1); r.Allowed {
				t.Fatalf("AllowN(1) 1ms before RetryAfter = %+v, want denied", r)
			}
			clock.Advance(time.Millisecond)
			if r := conformance.Allow(t, low, "k", 1); !r.Allowed || r.Remaining != 0 {
				t.Fatalf("AllowN(1) at RetryAfter = %+v, want allowed with Remaining 0", r)
			}
		})
	}
}

// backends runs f over the Redis strategy on every backend and over the
// local twin, all on a manual clock starting at start.
func backends(t *testing.T, lim strategy.Limit, start time.Time, f func(t *testing.T, st strategy.Strategy, clock *conformance.Clock)) {
	t.Helper()
	conformance.OnBackendsAt(t, lim, start, slidingcounter.New, slidingcounter.NewLocal, func(t *testing.T, _ string, st strategy.Strategy, clock *conformance.Clock) {
		f(t, st, clock)
	})
}

// TestEstimate checks the interpolation to the unit and the millisecond.
func TestEstimate(t *testing.T) {
	// Epoch is a whole minute: a window of 1s starts there.
	backends(t, strategy.PerSecond(10), conformance.Epoch, func(t *testing.T, st strategy.Strategy, clock *conformance.Clock) {
		conformance.Allow(t, st, "k", 10) // the previous window, full
		clock.Advance(1250 * time.Millisecond)
		// 250ms into the next window: 10 x 750/1000 = 7.5 still weigh, 8 in units
		if p := conformance.Peek(t, st, "k"); !p.Allowed || p.Remaining != 2 || p.ResetAfter != 750*time.Millisecond {
			t.Fatalf("Peek 250ms into the next window = %+v, want allowed, Remaining 2, ResetAfter 750ms", p)
		}
		if r := conformance.Allow(t, st, "k", 2); !r.Allowed || r.Remaining != 0 || r.ResetAfter != 1750*time.Millisecond {
			t.Fatalf("AllowN(2) = %+v, want allowed, Remaining 0, ResetAfter 1750ms", r)
		}
		// 2 + ceil(10 x (1000-e)/1000) + 1 <= 10 from e = 300ms on
		r := conformance.Allow(t, st, "k", 1)
		if r.Allowed || r.RetryAfter != 50*time.Millisecond || r.ResetAfter != 1750*time.Millisecond {
			t.Fatalf("AllowN(1) when full = %+v, want denied, RetryAfter 50ms, ResetAfter 1750ms", r)
		}
		clock.Advance(49 * time.Millisecond)
		if r := conformance.Allow(t, st, "k", 1); r.Allowed || r.RetryAfter != time.Millisecond {
			t.Fatalf("AllowN(1) 1ms before RetryAfter = %+v, want denied with RetryAfter 1ms", r)
		}
		clock.Advance(time.Millisecond)
		if r := conformance.Allow(t, st, "k", 1); !r.Allowed || r.Remaining != 0 {
			t.Fatalf("AllowN(1) at RetryAfter = %+v, want allowed, Remaining 0", r)
		}
	})
}

// TestRetryAfterInTheNextWindow: when the current window's own count blocks
// the request, it passes in the next window once that count's weight has
// fallen far enough, or, for the full limit, when the next window ends.
func TestRetryAfterInTheNextWindow(t *testing.T) {
	backends(t, strategy.PerSecond(3), conformance.Epoch, func(t *testing.T, st strategy.Strategy, clock *conformance.Clock) {
		conformance.Allow(t, st, "k", 3)
		// next window: ceil(3 x (1000-e)/1000) + 1 <= 3 from e = 334ms
		for n, want := range map[int64]time.Duration{1: 1334 * time.Millisecond, 2: 1667 * time.Millisecond, 3: 2 * time.Second} {
			if r := conformance.Allow(t, st, "k", n); r.Allowed || r.RetryAfter != want || r.ResetAfter != 2*time.Second {
				t.Fatalf("AllowN(%d) = %+v, want denied, RetryAfter %v, ResetAfter 2s", n, r, want)
			}
		}
		clock.Advance(1999 * time.Millisecond)
		if r := conformance.Allow(t, st, "k", 3); r.Allowed || r.RetryAfter != time.Millisecond {
			t.Fatalf("AllowN(3) at 1999ms = %+v, want denied with RetryAfter 1ms", r)
		}
		clock.Advance(time.Millisecond)
		if r := conformance.Allow(t, st, "k", 3); !r.Allowed {
			t.Fatalf("AllowN(3) at 2s = %+v, want allowed", r)
		}
	})
}

// bound is the documented worst case: Limit + floor(Limit x (W - 2) / W).
func bound(limit, w int64) int64 { return limit + limit*(w-2)/w }

// TestErrorBoundReached drives the worst case the package doc describes:
// the previous window's whole count in its last millisecond, then the
// current window spent as fast as the estimate frees it (whenever Peek
// shows units, take them all; else wait Peek's RetryAfter). The most units
// in one sliding window must be exactly the documented bound.
func TestErrorBoundReached(t *testing.T) {
	const limit, w = 50, 200
	edge := (conformance.Epoch.UnixMilli()/w + 1) * w
	backends(t, strategy.Limit{Limit: limit, Window: w * time.Millisecond}, time.UnixMilli(edge-1), func(t *testing.T, st strategy.Strategy, clock *conformance.Clock) {
		var events []conformance.Event
		if r := conformance.Allow(t, st, "k", limit); !r.Allowed {
			t.Fatalf("burst of %d from idle = %+v, want allowed", limit, r)
		}
		events = append(events, conformance.Event{T: edge - 1, N: limit})
		clock.Advance(time.Millisecond)
		for now := edge; now < edge+2*w; now = clock.Now().UnixMilli() {
			p := conformance.Peek(t, st, "k")
			if p.Remaining == 0 {
				if p.RetryAfter <= 0 {
					t.Fatalf("at %dms: Peek = %+v, want RetryAfter > 0 with nothing remaining", now-edge, p)
				}
				clock.Advance(p.RetryAfter)
				continue
			}
			if r := conformance.Allow(t, st, "k", p.Remaining); !r.Allowed {
				t.Fatalf("at %dms: AllowN(Remaining %d) = %+v, want allowed", now-edge, p.Remaining, r)
			}
			events = append(events, conformance.Event{T: now, N: p.Remaining})
		}
		got, want := conformance.MaxInWindow(events, w), bound(limit, w)
		t.Logf("worst case: %d units in one sliding window, %.2f x the limit", got, float64(got)/limit)
		if got != want {
			t.Fatalf("most units in one sliding window = %d, want the bound %d exactly", got, want)
		}
	})
}

// TestBoundaryBurst: Limit in the last millisecond of a window and another
// burst right after the edge; the second gets nothing, where a fixed window
// would allow it all. d ms after the edge it gets floor(Limit x d / W).
func TestBoundaryBurst(t *testing.T) {
	const limit, w = 50, 1000
	edge := (conformance.Epoch.UnixMilli()/w + 1) * w
	backends(t, strategy.Limit{Limit: limit, Window: w * time.Millisecond}, time.UnixMilli(edge-1), func(t *testing.T, st strategy.Strategy, clock *conformance.Clock) {
		events := []conformance.Event{}
		burst := func(now int64) int64 {
			clock.Set(time.UnixMilli(now))
			var got int64
			for i := 0; i < limit; i++ {
				if r := conformance.Allow(t, st, "k", 1); r.Allowed {
					got++
				}
			}
			if got > 0 {
				events = append(events, conformance.Event{T: now, N: got})
			}
			return got
		}
		if got := burst(edge - 1); got != limit {
			t.Fatalf("first burst: %d allowed, want %d", got, limit)
		}
		if got := burst(edge); got != 0 {
			t.Fatalf("burst right after the edge: %d allowed, want 0", got)
		}
		if got := burst(edge + 100); got != limit*100/w {
			t.Fatalf("burst 100ms after the edge: %d allowed, want %d", got, limit*100/w)
		}
		got := conformance.MaxInWindow(events, w)
		t.Logf("boundary burst: %d units in one sliding window, %.2f x the limit", got, float64(got)/limit)
		if got != limit+limit*100/w {
			t.Fatalf("most units in one sliding window = %d, want %d", got, limit+limit*100/w)
		}
	})
}

// TestErrorBoundRandom drives random traffic and checks that no sliding
// window ever holds more than the bound, nor an aligned window more than
// Limit.
func TestErrorBoundRandom(t *testing.T) {
	const limit, w = 9, 300
	conformance.RandomTraffic(t, slidingcounter.New, slidingcounter.NewLocal, conformance.WindowTraffic{
		Lim: strategy.Limit{Limit: limit, Window: w * time.Millisecond}, Stream: 4,
		// bursts at random phases, then quiet or steady stretches
		Step: func(rng *rand.Rand) time.Duration { return time.Duration(rng.IntN(20)*rng.IntN(3)) * time.Millisecond },
		Cost: func(rng *rand.Rand) int64 { return int64(rng.IntN(4) + 1) },
		Lo:   limit, Hi: bound(limit, w),
	})
}

// TestForeignValue: a value the script did not write (an older format, a
// hand-set key) counts as no state, not as an error. ("12" is a valid
// integer form, of window tag 0, which is not this window's or the last.)
func TestForeignValue(t *testing.T) {
	mr, rdb := conformance.Miniredis(t)
	st, _ := slidingcounter.New(rdb, strategy.PerMinute(2), strategy.WithClock(conformance.NewClock(conformance.Epoch)))
	for _, v := range []string{"garbage", "12", "1:2", "1:2:3:4", "-1:5:5", ""} {
		mr.Set(st.Key("k"), v)
		if p := conformance.Peek(t, st, "k"); p.Remaining != 2 {
			t.Errorf("Peek with value %q = %+v, want Remaining 2", v, p)
		}
	}
}

// TestFormatsCarryOver: a subject's counts survive a change of limit across
// 2^20, where the stored form switches between integer and string.
func TestFormatsCarryOver(t *testing.T) {
	const big = 1 << 21
	for _, c := range []struct {
		name     string
		from, to int64
	}{{"integer to string", 100, big}, {"string to integer", big, 100}} {
		t.Run(c.name, func(t *testing.T) {
			mr, rdb := conformance.Miniredis(t)
			clock := conformance.NewClock(conformance.Epoch.Add(250 * time.Millisecond))
			from, _ := slidingcounter.New(rdb, strategy.Limit{Limit: c.from, Window: time.Second}, strategy.WithClock(clock))
			to, _ := slidingcounter.New(rdb, strategy.Limit{Limit: c.to, Window: time.Second}, strategy.WithClock(clock))
			conformance.Allow(t, from, "k", 40)
			clock.Advance(time.Second) // 250ms into the next window: 40 x 750/1000 = 30 weigh
			conformance.Allow(t, from, "k", 5)
			before, _ := mr.Get(from.Key("k"))
			if p := conformance.Peek(t, to, "k"); p.Remaining != c.to-35 {
				t.Fatalf("Peek under limit %d after 40 and 5 under limit %d = %+v, want Remaining %d", c.to, c.from, p, c.to-35)
			}
			conformance.Allow(t, to, "k", 1)
			after, _ := mr.Get(from.Key("k"))
			if p := conformance.Peek(t, from, "k"); p.Remaining != c.from-36 {
				t.Fatalf("Peek under limit %d after one more under limit %d = %+v, want Remaining %d (stored %q, then %q)", c.from, c.to, p, c.from-36, before, after)
			}
		})
	}
}

// TestSpec runs the checks every algorithm shares with the sliding
// counter's numbers. By the server's TIME, miniredis keys do not expire
// (their TTLs move only with FastForward): the window index in the value
// tells which count is which. The key lives until the next window ends,
// and later writes of the window (INCRBY, the cheap path) keep that TTL.
// Memory, with the previous window's count kept too: 24 (dict entry) + 32
// (the 15-byte key) + 16 (integer object) below a limit of 2^20, the same
// with a string of up to 12 bytes (32) above.
func TestSpec(t *testing.T) {
	tooLarge := strategy.Limit{Limit: 1 << 30, Window: (1<<22 + 1) * time.Millisecond}
	conformance.RunSpec(t, conformance.Spec[*slidingcounter.Limiter, *slidingcounter.Local]{
		New: slidingcounter.New, NewLocal: slidingcounter.NewLocal, Tag: "sc",
		Subject: conformance.Subject{ExactRetry: true},
		Checks:  conformance.WindowChecks(slidingcounter.New, slidingcounter.NewLocal, 2), // the previous window weighs ceil(4 x 1/2)
		Allocs:  strategy.Limit{Limit: 1 << 30, Window: time.Hour},
		ServerTime: conformance.ServerTime{
			Lim: strategy.PerSecond(2),
			Steps: []conformance.TimeStep{
				{At: 900 * time.Millisecond, N: 2, Allowed: true},
				{At: 1499 * time.Millisecond, N: 1, RetryAfter: time.Millisecond},
				{At: 1500 * time.Millisecond, N: 1, Allowed: true},
				{At: 3 * time.Second, N: 0, Allowed: true, Full: true},
			},
		},
		TTL:   conformance.TTL{Lim: strategy.PerSecond(5), Start: 250 * time.Millisecond, N: 1, Want: 1750 * time.Millisecond, KeepOnLaterWrite: true},
		Still: time.Minute + time.Second, // the previous window's count still weighs
		Idle:  2 * time.Second,           // the end of the window after theirs
		Memory: []conformance.Memory{
			{Lim: strategy.PerMinute(100), Start: 30 * time.Second, Requests: 100, Cost: 1, Step: 600 * time.Millisecond, Encodings: []string{"int"}, MaxBytes: 72},
			{Lim: strategy.PerMinute(1 << 20), Start: 30 * time.Second, Requests: 100, Cost: 1, Step: 600 * time.Millisecond, Encodings: []string{"embstr"}, MaxBytes: 88},
		},
		Invalid:  []conformance.ConfigCase{{Name: "limit x window too large", Lim: tooLarge, Field: "Limit x Window"}},
		Accepted: []strategy.Limit{{Limit: 1 << 30, Window: (1 << 22) * time.Millisecond}},
	})
	_, rdb := conformance.Miniredis(t)
	if _, err := slidingcounter.New(rdb, tooLarge); !errors.Is(err, strategy.ErrInvalidLimit) {
		t.Errorf("Limit x Window too large: err = %v, want ErrInvalidLimit", err)
	}
}

func BenchmarkLocal(b *testing.B) { conformance.BenchmarkLocal(b, slidingcounter.NewLocal) }

// BenchmarkRedis: run with -bench and compare the ns/op of floor and slidingcounter.
func BenchmarkRedis(b *testing.B) {
	conformance.BenchmarkRedis(b, "slidingcounter", slidingcounter.New)
}
func BenchmarkRefund(b *testing.B) { conformance.BenchRefund(b, slidingcounter.New) }
func BenchmarkOverride(b *testing.B) {
	conformance.BenchOverride(b, slidingcounter.New, slidingcounter.NewLocal, 1<<30)
}
