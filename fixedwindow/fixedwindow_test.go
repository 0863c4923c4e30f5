package fixedwindow_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

// TestDifferentialClockJumps drives the script and the twin with a client
// clock that also jumps backwards, though never to before the start of
// the latest window it reached: there, Redis may still hold a count that the
// twin has dropped (a TTL runs in the server's time, the twin's expiry in
// the clock's), and their decisions may differ.
func TestDifferentialClockJumps(t *testing.T) {
	const w = 200
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 2))
	lim := strategy.Limit{Limit: 4, Window: w * time.Millisecond}
	clock := conformance.NewClock(conformance.Epoch)
	_, rdb := conformance.Miniredis(t)
	r, _ := fixedwindow.New(rdb, lim, strategy.WithClock(clock))
	l, _ := fixedwindow.NewLocal(lim, strategy.WithClock(clock))
	latest := conformance.Epoch.UnixMilli()
	for i := 0; i < 500; i++ {
		now := clock.Now().UnixMilli() + int64(rng.IntN(2*w)-w)
		now = max(now, latest/w*w)
		latest = max(latest, now)
		clock.Set(time.UnixMilli(now))
		key := []string{"a", "b"}[rng.IntN(2)]
		n := int64(rng.IntN(4))
		rr, rerr := r.AllowN(t.Context(), key, n)
		lr, lerr := l.AllowN(t.Context(), key, n)
		if rerr != nil || lerr != nil || rr != lr {
			t.Fatalf("seed %d, op %d at %d ms: AllowN(%q, %d):\n redis %+v %v\n local %+v %v",
				seed, i, now, key, n, rr, rerr, lr, lerr)
		}
	}
}

// backends runs f over the Redis strategy on every backend and over the
// local twin, all on a manual clock starting at start.
func backends(t *testing.T, lim strategy.Limit, start time.Time, f func(t *testing.T, name string, st strategy.Strategy, clock *conformance.Clock)) {
	t.Helper()
	conformance.OnBackendsAt(t, lim, start, fixedwindow.New, fixedwindow.NewLocal, f)
}

// TestWindowsAlignedToEpoch uses a window of 1.5s, which does not divide a
// minute, and starts the clock mid-window: the edges are multiples of the
// window since the Unix epoch, whatever the first request's time.
func TestWindowsAlignedToEpoch(t *testing.T) {
	const w = 1500
	edge := (conformance.Epoch.UnixMilli()/w + 1) * w // the first edge after Epoch
	start := time.UnixMilli(edge - 700)
	backends(t, strategy.Limit{Limit: 2, Window: w * time.Millisecond}, start, func(t *testing.T, _ string, st strategy.Strategy, clock *conformance.Clock) {
		for i := 0; i < 2; i++ {
			if r := conformance.Allow(t, st, "k", 1); !r.Allowed || r.ResetAfter != 700*time.Millisecond {
				t.Fatalf("request %d, 700ms before an edge: %+v, want allowed with ResetAfter 700ms", i, r)
			}
		}
		r := conformance.Allow(t, st, "k", 1)
		if r.Allowed || r.RetryAfter != 700*time.Millisecond || r.ResetAfter != 700*time.Millisecond || r.Remaining != 0 {
			t.Fatalf("3rd request of 2 = %+v, want denied with RetryAfter and ResetAfter 700ms (the edge), Remaining 0", r)
		}
		clock.Set(time.UnixMilli(edge - 1))
		r = conformance.Allow(t, st, "k", 1)
		if r.Allowed || r.RetryAfter != time.Millisecond {
			t.Fatalf("1ms before the edge: %+v, want denied with RetryAfter 1ms", r)
		}
		clock.Set(time.UnixMilli(edge))
		if r := conformance.Allow(t, st, "k", 2); !r.Allowed || r.Remaining != 0 || r.ResetAfter != w*time.Millisecond {
			t.Fatalf("at the edge: AllowN(2) = %+v, want allowed, Remaining 0, ResetAfter 1.5s", r)
		}
		clock.Set(time.UnixMilli(edge + w - 1))
		if r := conformance.Allow(t, st, "k", 1); r.Allowed || r.RetryAfter != time.Millisecond {
			t.Fatalf("at the last ms of the window: %+v, want denied with RetryAfter 1ms", r)
		}
	})
}

// TestBoundaryBurstAllowsTwiceTheLimit shows the fixed window's known flaw,
// which the package doc states: Limit units in the last millisecond of a
// window and Limit more in the first of the next, 2 x Limit within 2 ms.
//
// On a real Redis the first burst comes 500ms before the edge instead: the
// key's TTL runs in real time while the test's clock stands still, and a
// 1ms TTL would end between two requests.
func TestBoundaryBurstAllowsTwiceTheLimit(t *testing.T) {
	const limit, w = 10, 1000
	edge := (conformance.Epoch.UnixMilli()/w + 1) * w
	backends(t, strategy.Limit{Limit: limit, Window: w * time.Millisecond}, time.UnixMilli(edge-1), func(t *testing.T, name string, st strategy.Strategy, clock *conformance.Clock) {
		if name == "redis" || name == "redis-batched" {
			clock.Set(time.UnixMilli(edge - 500))
		}
		var events []conformance.Event
		burst := func() {
			for i := 0; i < limit+5; i++ {
				if r := conformance.Allow(t, st, "k", 1); r.Allowed {
					events = append(events, conformance.Event{T: clock.Now().UnixMilli(), N: 1})
				}
			}
		}
		burst()
		clock.Set(time.UnixMilli(edge))
		burst()
		if got := int64(len(events)); got != 2*limit {
			t.Fatalf("allowed %d units around the edge, want exactly 2 x %d", got, limit)
		}
		if got := conformance.MaxInWindow(events, w); got != 2*limit {
			t.Fatalf("most units in one sliding window = %d, want 2 x %d", got, limit)
		}
	})
}

// TestNeverMoreThanTwiceTheLimit drives random traffic and checks the
// documented bound: at most 2 x Limit units in any sliding window, and at
// most Limit in any aligned window.
func TestNeverMoreThanTwiceTheLimit(t *testing.T) {
	const limit = 7
	conformance.RandomTraffic(t, fixedwindow.New, fixedwindow.NewLocal, conformance.WindowTraffic{
		Lim: strategy.Limit{Limit: limit, Window: 300 * time.Millisecond}, Stream: 1,
		Step: func(rng *rand.Rand) time.Duration { return time.Duration(rng.IntN(25)) * time.Millisecond },
		Cost: func(rng *rand.Rand) int64 { return int64(rng.IntN(3) + 1) },
		Lo:   limit + 1, Hi: 2 * limit,
	})
}

// TestLargeCounts checks that counts near MaxUnits survive the trip
// through Lua's numbers and Redis exactly.
func TestLargeCounts(t *testing.T) {
	const big = strategy.MaxUnits
	backends(t, strategy.Limit{Limit: big, Window: strategy.MaxWindow}, conformance.Epoch, func(t *testing.T, _ string, st strategy.Strategy, clock *conformance.Clock) {
		if r := conformance.Allow(t, st, "k", big-1); !r.Allowed || r.Remaining != 1 {
			t.Fatalf("AllowN(MaxUnits-1) = %+v, want allowed with Remaining 1", r)
		}
		if r := conformance.Allow(t, st, "k", 2); r.Allowed || r.Remaining != 1 {
			t.Fatalf("AllowN(2) = %+v, want denied with Remaining 1", r)
		}
		if r := conformance.Allow(t, st, "k", 1); !r.Allowed || r.Remaining != 0 {
			t.Fatalf("AllowN(1) = %+v, want allowed with Remaining 0", r)
		}
	})
}

// TestSpec runs the checks every algorithm shares with the fixed window's
// numbers. By the server's TIME, miniredis keys do not expire (their TTLs
// move only with FastForward): the window index in the value tells a count
// is stale. The key lives until its window ends, and later writes of the
// window (INCRBY, the cheap path) keep that TTL. Memory: 16 (integer
// object) + 24 (dict entry) + 32 (a 15-byte key's allocation), the least
// any key of that length costs; a 14-byte key fits a 16-byte allocation.
func TestSpec(t *testing.T) {
	conformance.RunSpec(t, conformance.Spec[*fixedwindow.Limiter, *fixedwindow.Local]{
		New: fixedwindow.New, NewLocal: fixedwindow.NewLocal, Tag: "fw",
		Subject: conformance.Subject{ExactRetry: true},
		// an allowed reply too large for one integer comes back as a table
		Differential: []strategy.Limit{{Limit: strategy.MaxUnits, Window: time.Hour}},
		Checks:       conformance.WindowChecks(fixedwindow.New, fixedwindow.NewLocal, 4),
		Allocs:       strategy.Limit{Limit: 1 << 40, Window: time.Hour},
		ServerTime: conformance.ServerTime{
			Lim: strategy.Limit{Limit: 1, Window: time.Second},
			Steps: []conformance.TimeStep{
				{At: 200 * time.Millisecond, N: 1, Allowed: true},
				{At: 999 * time.Millisecond, N: 1, RetryAfter: time.Millisecond},
				{At: time.Second, N: 1, Allowed: true},
			},
		},
		TTL:   conformance.TTL{Lim: strategy.PerSecond(5), Start: 250 * time.Millisecond, N: 1, Want: 750 * time.Millisecond, KeepOnLaterWrite: true},
		Still: time.Second,
		Idle:  time.Second, // every window has just ended
		Memory: []conformance.Memory{
			{Lim: strategy.PerMinute(100), Requests: 100, Cost: 1, Encodings: []string{"int"}, MaxBytes: 72},
			{Lim: strategy.PerMinute(100), Prefix: "r:", Requests: 100, Cost: 1, Encodings: []string{"int"}, MaxBytes: 60},
		},
	})
}

func BenchmarkLocal(b *testing.B) { conformance.BenchmarkLocal(b, fixedwindow.NewLocal) }

// BenchmarkRedis: run with -bench and compare the ns/op of floor and fixedwindow.
func BenchmarkRedis(b *testing.B)  { conformance.BenchmarkRedis(b, "fixedwindow", fixedwindow.New) }
func BenchmarkRefund(b *testing.B) { conformance.BenchRefund(b, fixedwindow.New) }
func BenchmarkOverride(b *testing.B) {
	conformance.BenchOverride(b, fixedwindow.New, fixedwindow.NewLocal, 1<<30)
}
