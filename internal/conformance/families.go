package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// This file holds the checks that a family of algorithms shares: the
// bucket (token bucket and GCRA, which promise the same decisions), the
// exact log (sliding log and compact log, likewise) and the windows
// (fixed window and sliding counter, whose counts belong to aligned
// windows); and the allocation check and benchmarks of every twin.

// BucketSpec returns the Spec of a bucket algorithm (token bucket, GCRA):
// both decide alike and store a subject's state until it is full again,
// so they share every number but what a subject costs in memory.
// Its Checks are Bucket's.
func BucketSpec[R Keyed, L Twin](newRedis NewRedis[R], newLocal NewLocal[L], tag string, memory ...Memory) Spec[R, L] {
	return Spec[R, L]{
		New: newRedis, NewLocal: newLocal, Tag: tag,
		Allocs:  strategy.PerSecond(1000),
		Subject: Subject{ExactRetry: true, UsesBurst: true},
		// an allowed reply too large for one integer comes back as a table
		Differential: []strategy.Limit{{Limit: 1, Window: time.Hour, Burst: 1 << 20}},
		// refunds up to a burst above and below the limit
		RefundLimits: []strategy.Limit{{Limit: 10, Window: time.Second, Burst: 15}, {Limit: 7, Window: 333 * time.Millisecond, Burst: 3}},
		Checks:       []Check{{"bucket", func(t *testing.T) { Bucket(t, newRedis, newLocal) }}},
		ServerTime: ServerTime{
			// the interval of a unit is 333.3 ms
			Lim: strategy.Limit{Limit: 3, Window: time.Second, Burst: 1},
			Steps: []TimeStep{
				{At: 0, N: 1, Allowed: true},
				{At: 333 * time.Millisecond, N: 1, RetryAfter: time.Millisecond},
				{At: 334 * time.Millisecond, N: 1, Allowed: true},
			},
			Real: strategy.PerMinute(2), RealRetry: 30 * time.Second,
		},
		// a unit every 12 s: the key lives until 3 units are back
		TTL:    TTL{Lim: strategy.Limit{Limit: 5, Window: time.Minute, Burst: 10}, N: 3, Want: 36 * time.Second},
		Still:  5 * time.Second, // 5/12 of a unit
		Idle:   2 * time.Second, // every subject is full again
		Memory: memory,
		Invalid: []ConfigCase{
			{Name: "burst too large to be exact", Lim: strategy.Limit{Limit: 1, Window: strategy.MaxWindow, Burst: 1 << 20}, Field: "Burst"},
			{Name: "limit too large to be exact", Lim: strategy.Limit{Limit: 1<<40 - 1, Window: 8192 * time.Millisecond}, Field: "Limit"},
		},
		// the largest exact limits
		Accepted: []strategy.Limit{
			{Limit: strategy.MaxUnits, Window: time.Second, Burst: strategy.MaxUnits},
			{Limit: 1 << 20, Window: time.Second, Burst: 1 << 30},
			{Limit: 7, Window: 24 * time.Hour, Burst: 1e6},
		},
	}
}

// Bucket runs, each a subtest, the decisions a bucket algorithm (token
// bucket, GCRA) promises beyond the suite's: the refill to the unit and
// the millisecond, Burst ignored at Limit 0, a steady client never denied,
// never above the rate, exactly the rational-number bucket, and exactly
// the capacity under concurrency.
func Bucket[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	t.Helper()
	t.Run("refill", func(t *testing.T) { refill(t, newRedis, newLocal) })
	t.Run("burst ignored at limit zero", func(t *testing.T) { BurstIgnoredAtLimitZero(t, newRedis, newLocal) })
	t.Run("steady client never denied", func(t *testing.T) { SteadyClientNeverDenied(t, newRedis, newLocal) })
	t.Run("never above rate", func(t *testing.T) { NeverAboveRate(t, newRedis, newLocal) })
	t.Run("exact against rationals", func(t *testing.T) { ExactAgainstRationals(t, newRedis, newLocal) })
	t.Run("concurrent exactly capacity", func(t *testing.T) { ConcurrentExactlyCapacity(t, newRedis, newLocal) })
	t.Run("refund after refill", func(t *testing.T) { refundAfterRefill(t, newRedis, newLocal) })
	t.Run("refund from a clock behind", func(t *testing.T) { refundFromBehind(t, newRedis, newLocal) })
}

// refundFromBehind: a refund whose clock is behind the last decision's (a
// process whose clock lags, a refund sent late) gives back its units and
// no more: the bucket emptied at t and given 3 back from t - 500 ms holds
// 3 at t, not the 5 more that refilled between the two clocks.
func refundFromBehind[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	OnBackends(t, strategy.Limit{Limit: 10, Window: time.Second}, newRedis, newLocal, func(t *testing.T, st strategy.Strategy, clock *Clock) {
		rf := st.(strategy.Refunder)
		if r := Allow(t, st, "b", 10); !r.Allowed {
			t.Fatalf("AllowN(10) = %+v", r)
		}
		at := clock.Now()
		clock.Set(at.Add(-500 * time.Millisecond))
		if _, err := rf.RefundN(ctx, "b", 3); err != nil {
			t.Fatal(err)
		}
		clock.Set(at)
		if r := Allow(t, st, "b", 0); r.Remaining != 3 {
			t.Errorf("at the emptying decision's time after RefundN(3) from 500ms before: %+v, want Remaining 3", r)
		}
	})
}

// refundAfterRefill: a refund tops the bucket up to its capacity, no
// further, after refilling to now.
func refundAfterRefill[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	OnBackends(t, strategy.Limit{Limit: 10, Window: time.Second}, newRedis, newLocal, func(t *testing.T, st strategy.Strategy, clock *Clock) {
		rf := st.(strategy.Refunder)
		if r := Allow(t, st, "b", 10); !r.Allowed {
			t.Fatalf("AllowN(10) = %+v", r)
		}
		clock.Advance(300 * time.Millisecond) // 3 units back
		for _, want := range []int64{8, 10} {
			got, err := rf.RefundN(ctx, "b", 5)
			if err != nil {
				t.Fatal(err)
			}
			if got.Remaining != want {
				t.Errorf("RefundN(5) = %+v, want Remaining %d", got, want)
			}
		}
	})
}

// refill: 4 per second, burst 6: a unit comes back every 250 ms, up to 6.
func refill[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	OnBackends(t, strategy.Limit{Limit: 4, Window: time.Second, Burst: 6}, newRedis, newLocal, func(t *testing.T, st strategy.Strategy, clock *Clock) {
		if r := Allow(t, st, "k", 6); !r.Allowed || r.Remaining != 0 || r.ResetAfter != 1500*time.Millisecond {
			t.Fatalf("AllowN(6) on an idle subject = %+v, want allowed, Remaining 0, ResetAfter 1.5s", r)
		}
		clock.Advance(249 * time.Millisecond)
		if r := Allow(t, st, "k", 1); r.Allowed || r.RetryAfter != time.Millisecond || r.ResetAfter != 1251*time.Millisecond {
			t.Fatalf("at 249ms: %+v, want denied with RetryAfter 1ms, ResetAfter 1251ms", r)
		}
		clock.Advance(time.Millisecond)
		if r := Allow(t, st, "k", 1); !r.Allowed || r.Remaining != 0 {
			t.Fatalf("at 250ms: %+v, want allowed with Remaining 0", r)
		}
		if r := Allow(t, st, "k", 3); r.Allowed || r.RetryAfter != 750*time.Millisecond {
			t.Fatalf("AllowN(3) at 250ms: %+v, want denied with RetryAfter 750ms", r)
		}
		clock.Advance(10 * time.Second)
		if r := Allow(t, st, "k", 0); !r.Allowed || r.Remaining != 6 || r.ResetAfter != 0 {
			t.Fatalf("after 10s idle: %+v, want full capacity (Remaining 6, ResetAfter 0), never more", r)
		}
	})
}

// ExactLogSpec returns the Spec of an exact log (sliding log, compact log):
// both decide alike, a unit counting for exactly one window, so they share
// every number but what a subject costs in memory. Its Checks are
// ExactLog's.
func ExactLogSpec[R Keyed, L Twin](newRedis NewRedis[R], newLocal NewLocal[L], tag string, memory ...Memory) Spec[R, L] {
	return Spec[R, L]{
		New: newRedis, NewLocal: newLocal, Tag: tag,
		Subject: Subject{ExactRetry: true},
		// an allowed reply too large for one integer comes back as a table
		Differential: []strategy.Limit{{Limit: strategy.MaxUnits, Window: time.Hour}},
		Checks:       []Check{{"exact log", func(t *testing.T) { ExactLog(t, newRedis, newLocal) }}},
		ServerTime: ServerTime{
			Lim: strategy.Limit{Limit: 1, Window: time.Second},
			Steps: []TimeStep{
				{At: 0, N: 1, Allowed: true},
				{At: 999 * time.Millisecond, N: 1, RetryAfter: time.Millisecond},
				{At: time.Second, N: 1, Allowed: true},
			},
			Real: strategy.PerMinute(2), RealRetry: time.Minute,
		},
		// the key expires when its newest unit leaves the window
		TTL:    TTL{Lim: strategy.Limit{Limit: 2, Window: time.Minute}, N: 1, Want: time.Minute},
		Still:  5 * time.Second,
		Idle:   3 * time.Second, // two windows after the subjects went idle
		Memory: memory,
	}
}

// ExactLog runs, each a subtest over every backend, the window edges of an
// exact log (sliding log, compact log): a unit counts while now - t <
// Window, RetryAfter for a cost of n waits for the n-th oldest unit, and
// units recorded ahead (a lease's) count until then + Window.
func ExactLog[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	t.Helper()
	t.Run("window edges", func(t *testing.T) {
		OnBackends(t, strategy.Limit{Limit: 2, Window: time.Second}, newRedis, newLocal, func(t *testing.T, st strategy.Strategy, clock *Clock) {
			mustAllow := func(want bool, what string) strategy.Result {
				t.Helper()
				r := Allow(t, st, "edge", 1)
				if r.Allowed != want {
					t.Fatalf("%s: Allowed = %v, want %v (%+v)", what, r.Allowed, want, r)
				}
				return r
			}
			mustAllow(true, "unit at t=0")
			clock.Advance(400 * time.Millisecond)
			mustAllow(true, "unit at t=400ms")
			clock.Advance(599 * time.Millisecond) // t=999ms: the t=0 unit still counts (999 < 1000)
			if r := mustAllow(false, "at t=999ms"); r.RetryAfter != time.Millisecond || r.ResetAfter != 401*time.Millisecond {
				t.Fatalf("at t=999ms: %+v, want RetryAfter 1ms, ResetAfter 401ms (the t=400ms unit leaves at 1400ms)", r)
			}
			clock.Advance(time.Millisecond) // t=1000ms: now - 0 = Window, the unit has left
			mustAllow(true, "at t=1000ms")
			if r := mustAllow(false, "again at t=1000ms"); r.RetryAfter != 400*time.Millisecond {
				t.Fatalf("RetryAfter at t=1000ms = %v, want 400ms", r.RetryAfter)
			}
		})
	})
	t.Run("units recorded ahead", func(t *testing.T) { unitsAhead(t, newRedis, newLocal) })
	t.Run("RetryAfter for a cost", func(t *testing.T) {
		// units at 0, 100, 200, 300, 400 ms of limit 5/s; at 500ms a request
		// of 3 needs the three oldest to leave: the third leaves at 1200ms.
		OnBackends(t, strategy.Limit{Limit: 5, Window: time.Second}, newRedis, newLocal, func(t *testing.T, st strategy.Strategy, clock *Clock) {
			for i := 0; i < 5; i++ {
				if r := Allow(t, st, "k", 1); !r.Allowed {
					t.Fatalf("unit %d denied", i)
				}
				clock.Advance(100 * time.Millisecond)
			}
			for _, c := range []struct {
				n    int64
				want time.Duration
			}{{1, 500 * time.Millisecond}, {3, 700 * time.Millisecond}, {5, 900 * time.Millisecond}} {
				if r := Allow(t, st, "k", c.n); r.Allowed || r.RetryAfter != c.want || r.ResetAfter != 900*time.Millisecond {
					t.Errorf("AllowN(%d) at 500ms = %+v, want denied, RetryAfter %v, ResetAfter 900ms", c.n, r, c.want)
				}
			}
		})
	})
}

// allowAheader is an exact log on Redis: it records a lease's units ahead
// of now (package lease).
type allowAheader interface {
	AllowAhead(ctx context.Context, key string, n int64, ahead time.Duration) (strategy.Result, error)
}

// unitsAhead: units recorded ahead (a lease's) count from the decision
// until now + ahead + Window, and later requests are recorded no earlier.
// The local twin records nothing ahead (it is not leased).
func unitsAhead[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	OnBackendsAt(t, strategy.Limit{Limit: 10, Window: time.Second}, Epoch, newRedis, newLocal, func(t *testing.T, name string, st strategy.Strategy, clock *Clock) {
		a, ok := st.(allowAheader)
		if name == "local" {
			if ok {
				t.Fatalf("the local twin has AllowAhead")
			}
			return
		}
		if !ok {
			t.Fatalf("%T has no AllowAhead", st)
		}
		ctx := context.Background()
		res, err := a.AllowAhead(ctx, "k", 6, 100*time.Millisecond)
		if err != nil || !res.Allowed || res.Remaining != 4 || res.ResetAfter != 1100*time.Millisecond {
			t.Fatalf("AllowAhead(6, 100ms) = %+v, %v; want allowed, 4 remaining, reset after 1.1s", res, err)
		}
		steps := []struct {
			name      string
			advance   time.Duration
			n         int64
			allowed   bool
			remaining int64
		}{
			{"the lease's units count now", 0, 5, false, 4},
			{"and just before ahead + Window", 1099 * time.Millisecond, 5, false, 4},
			{"they leave at ahead + Window", time.Millisecond, 10, true, 0},
		}
		for _, s := range steps {
			clock.Advance(s.advance)
			res, err := st.AllowN(ctx, "k", s.n)
			if err != nil || res.Allowed != s.allowed || res.Remaining != s.remaining {
				t.Errorf("%s: AllowN(%d) = %+v, %v; want allowed %v, remaining %d", s.name, s.n, res, err, s.allowed, s.remaining)
			}
		}
		if _, err := a.AllowAhead(ctx, "k", 1, 0); err == nil {
			t.Error("AllowAhead with ahead 0: no error")
		}
	})
}

// OnBackendsAt is OnBackends with the clock starting at start, and the
// backend's name passed to f.
func OnBackendsAt[R, L strategy.Strategy](t *testing.T, lim strategy.Limit, start time.Time, newRedis NewRedis[R], newLocal NewLocal[L], f func(t *testing.T, name string, st strategy.Strategy, clock *Clock)) {
	t.Helper()
	for _, name := range BackendNames() {
		t.Run(name, func(t *testing.T) {
			clock := NewClock(start)
			f(t, name, Backend(t, name, lim, clock, newRedis, newLocal), clock)
		})
	}
}

// WindowChecks are the Checks of an algorithm whose counts belong to
// aligned windows (fixed window, sliding counter).
//
// refunded is the Remaining of a subject of 4 per second that spent 4 units,
// then 1 more half-way through the next window, then asked 4 back: only
// the current window's count is given back, so a window algorithm says
// what the previous window still weighs.
func WindowChecks[R, L strategy.Strategy](newRedis NewRedis[R], newLocal NewLocal[L], refunded int64) []Check {
	return []Check{
		{"clock back to an earlier window", func(t *testing.T) { ClockBackToAnEarlierWindow(t, newRedis, newLocal) }},
		{"refund of the current window only", func(t *testing.T) { refundCurrentWindowOnly(t, newRedis, newLocal, refunded) }},
	}
}

// refundCurrentWindowOnly: see WindowChecks.
func refundCurrentWindowOnly[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L], refunded int64) {
	OnBackends(t, strategy.Limit{Limit: 4, Window: time.Second}, newRedis, newLocal, func(t *testing.T, st strategy.Strategy, clock *Clock) {
		if r := Allow(t, st, "w", 4); !r.Allowed {
			t.Fatalf("AllowN(4) = %+v", r)
		}
		clock.Advance(1500 * time.Millisecond) // half-way through the next window
		if r := Allow(t, st, "w", 1); !r.Allowed {
			t.Fatalf("AllowN(1) in the next window = %+v", r)
		}
		got, err := st.(strategy.Refunder).RefundN(ctx, "w", 4)
		if err != nil {
			t.Fatal(err)
		}
		if got.Remaining != refunded {
			t.Errorf("RefundN(4) = %+v, want Remaining %d (the current window's unit back, the previous window as it weighs)", got, refunded)
		}
	})
}

// ClockBackToAnEarlierWindow: a count belongs to its window (fixed window,
// sliding counter); a clock that goes back to an earlier window finds it
// empty, not the later count.
func ClockBackToAnEarlierWindow[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	t.Helper()
	OnBackendsAt(t, strategy.PerSecond(3), Epoch.Add(time.Second), newRedis, newLocal, func(t *testing.T, _ string, st strategy.Strategy, clock *Clock) {
		Allow(t, st, "k", 3)
		clock.Set(Epoch.Add(999 * time.Millisecond))
		if r := Allow(t, st, "k", 1); !r.Allowed || r.Remaining != 2 {
			t.Fatalf("one window back: %+v, want allowed with Remaining 2", r)
		}
	})
}

// LiveClock is a manual clock that also runs with real time, and
// remembers the last time it told. A real Redis's TTLs run in real time: on
// a clock that stands still between steps, a key could expire while the
// clock is still in its window, which no real clock allows; on this one it
// cannot. Safe for concurrent use.
type LiveClock struct {
	// Manual is the manual part; advance it to move the clock.
	Manual *Clock
	start  time.Time
	mu     sync.Mutex
	last   time.Time
}

// NewLiveClock returns a LiveClock at t.
func NewLiveClock(t time.Time) *LiveClock {
	return &LiveClock{Manual: NewClock(t), start: time.Now()}
}

// Now returns the manual time plus the real time since the clock was made.
func (c *LiveClock) Now() time.Time {
	t := c.Manual.Now().Add(time.Since(c.start))
	c.mu.Lock()
	c.last = t
	c.mu.Unlock()
	return t
}

// Last returns the time Now last returned.
func (c *LiveClock) Last() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// Event is an allowed request: N units at T (Unix ms).
type Event struct{ T, N int64 }

// MaxInWindow returns the most units that fall within one sliding window
// (t - w, t] of the events, which must be in time order.
func MaxInWindow(events []Event, w int64) int64 {
	var best, sum int64
	j := 0
	for i := range events {
		sum += events[i].N
		for events[j].T <= events[i].T-w {
			sum -= events[j].N
			j++
		}
		best = max(best, sum)
	}
	return best
}

// Hammer has goroutines goroutines, each on sts[i % len(sts)], send perG
// requests of one unit for key at once, and returns how many were
// allowed.
func Hammer(t *testing.T, sts []strategy.Strategy, key string, goroutines, perG int) int64 {
	t.Helper()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		st := sts[g%len(sts)]
		wg.Go(func() {
			for range perG {
				r, err := st.AllowN(ctx, key, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return allowed.Load()
}

// LocalAllocs checks that a decision and a Peek on a warm subject of the
// twin that newLocal makes for lim allocate nothing, and returns the twin.
func LocalAllocs[L strategy.Strategy](t *testing.T, newLocal NewLocal[L], lim strategy.Limit) L {
	t.Helper()
	clock := NewClock(Epoch)
	st, err := newLocal(lim, strategy.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	for range 64 { // warm: whatever the twin keeps has grown to hold what the loop keeps
		Allow(t, st, "warm", 1)
		clock.Advance(time.Millisecond)
	}
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"AllowN", func() { st.AllowN(ctx, "warm", 1) }},
		{"Peek", func() { st.Peek(ctx, "warm") }},
	} {
		if got := testing.AllocsPerRun(100, c.f); got != 0 {
			t.Errorf("%s on a warm subject: %v allocations, want 0", c.name, got)
		}
	}
	return st
}

// BenchmarkLocal measures a decision of the twin that newLocal makes: on
// one warm subject, the same without time.Now (a clock that stands
// still), and in parallel over 1,024 subjects.
func BenchmarkLocal[L strategy.Strategy](b *testing.B, newLocal NewLocal[L]) {
	lim := strategy.Limit{Limit: 1 << 30, Window: time.Second}
	st, err := newLocal(lim)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.Run("warm", func(b *testing.B) {
		for b.Loop() {
			st.AllowN(ctx, "warm", 1)
		}
	})
	b.Run("warm-cheap-clock", func(b *testing.B) { // the decision alone, without time.Now
		now := Epoch
		st, _ := newLocal(lim, strategy.WithClock(strategy.ClockFunc(func() time.Time { return now })))
		for b.Loop() {
			st.AllowN(ctx, "warm", 1)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = fmt.Sprint("user:", i)
		}
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				st.AllowN(ctx, keys[i%len(keys)], 1)
				i++
			}
		})
	})
}

// BenchmarkRedis compares a decision of the strategy newRedis makes with a
// trivial EVALSHA on the same real redis-server, with 32 goroutines per CPU
// over 10,000 subjects at 100 per minute; compare the ns/op of "floor" and
// name.
func BenchmarkRedis[R strategy.Strategy](b *testing.B, name string, newRedis NewRedis[R]) {
	rdb := testredis.Shared(b).Client(b)
	floor := redis.NewScript("return 1")
	st, err := newRedis(rdb, strategy.PerMinute(100), strategy.WithPrefix(testredis.Prefix(b)))
	if err != nil {
		b.Fatal(err)
	}
	subjects := make([]string, 10000)
	for i := range subjects {
		subjects[i] = "user:" + string(rune('a'+i%26)) + string(rune(i))
	}
	b.Run("floor", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				floor.Run(ctx, rdb, nil)
			}
		})
	})
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(len(subjects))
			for pb.Next() {
				st.AllowN(ctx, subjects[i%len(subjects)], 1)
				i++
			}
		})
	})
}

// WindowTraffic is random traffic of one subject for RandomTraffic.
type WindowTraffic struct {
	Lim strategy.Limit
	// Stream picks the random stream (with the seed, printed on failure).
	Stream uint64
	// Step and Cost draw the time before each request and its cost.
	Step func(rng *rand.Rand) time.Duration
	Cost func(rng *rand.Rand) int64
	// Lo and Hi bound the most units allowed in one sliding window of
	// Lim.Window: the documented worst case, and a floor showing the
	// traffic reached it.
	Lo, Hi int64
}

// RandomTraffic sends w's 600 requests over every backend, on a
// LiveClock, and checks that the most units allowed in any sliding window
// is within [w.Lo, w.Hi] and that no aligned window allows more than the
// limit (fixed window, sliding counter).
func RandomTraffic[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L], w WindowTraffic) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	limit, ms := w.Lim.Limit, w.Lim.Window.Milliseconds()
	for _, name := range BackendNames() {
		t.Run(name, func(t *testing.T) {
			clock := NewLiveClock(Epoch)
			st := Backend(t, name, w.Lim, clock, newRedis, newLocal)
			rng := rand.New(rand.NewPCG(seed, w.Stream))
			var events []Event
			perWindow := map[int64]int64{}
			for range 600 {
				clock.Manual.Advance(w.Step(rng))
				n := w.Cost(rng)
				if r := Allow(t, st, "k", n); r.Allowed {
					now := clock.Last().UnixMilli()
					events = append(events, Event{T: now, N: n})
					perWindow[now/ms] += n
				}
			}
			got := MaxInWindow(events, ms)
			t.Logf("seed %d: %d units in one sliding window at most, %.2f x the limit", seed, got, float64(got)/float64(limit))
			if got > w.Hi || got < w.Lo {
				t.Fatalf("seed %d: most units in one sliding window = %d, want in [%d, %d]", seed, got, w.Lo, w.Hi)
			}
			for idx, n := range perWindow {
				if n > limit {
					t.Fatalf("seed %d: %d units in the aligned window %d, want <= %d", seed, n, idx, limit)
				}
			}
		})
	}
}
