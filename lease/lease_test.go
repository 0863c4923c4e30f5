package lease_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/lease"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

func mini(t *testing.T) *redis.Client {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func TestNewErrors(t *testing.T) {
	rdb := mini(t)
	lim := strategy.PerSecond(100)
	cases := []struct {
		name  string
		build func(strategy.Limit) (strategy.Strategy, error)
		opts  []lease.Option
		want  error
	}{
		{"nil build", nil, nil, strategy.ErrInvalidOption},
		{"the log's twin", func(l strategy.Limit) (strategy.Strategy, error) { return slidinglog.NewLocal(l) }, nil, lease.ErrNoLease},
		{"the compact log's twin", func(l strategy.Limit) (strategy.Strategy, error) { return compactlog.NewLocal(l) }, nil, lease.ErrNoLease},
		{"lifetime 0", func(l strategy.Limit) (strategy.Strategy, error) { return slidinglog.New(rdb, l) }, []lease.Option{lease.WithLifetime(0)}, strategy.ErrInvalidOption},
		{"share 0", func(l strategy.Limit) (strategy.Strategy, error) { return slidinglog.New(rdb, l) }, []lease.Option{lease.WithShare(0)}, strategy.ErrInvalidOption},
		{"max subjects 0", func(l strategy.Limit) (strategy.Strategy, error) { return slidinglog.New(rdb, l) }, []lease.Option{lease.WithMaxSubjects(0)}, strategy.ErrInvalidOption},
		{"invalid limit", func(l strategy.Limit) (strategy.Strategy, error) {
			return slidinglog.New(rdb, strategy.Limit{Limit: -1, Window: time.Second})
		}, nil, strategy.ErrInvalidLimit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := lease.New(lim, c.build, c.opts...)
			if !errors.Is(err, c.want) {
				t.Errorf("New: %v, want an error wrapping %v", err, c.want)
			}
			if l != nil {
				l.Close(context.Background())
			}
		})
	}
}

// bucket returns a leased token bucket of 1000/s on miniredis, on clock.
func bucket(t *testing.T, clock *conformance.Clock, opts ...lease.Option) *lease.Limiter {
	t.Helper()
	rdb := mini(t)
	l, err := lease.New(strategy.PerSecond(1000), func(lim strategy.Limit) (strategy.Strategy, error) {
		return tokenbucket.New(rdb, lim, strategy.WithClock(clock))
	}, append([]lease.Option{lease.WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

// TestCloseGivesBack: Close returns what the bucket's leases hold, so the
// bucket is left as if only the spent units had been taken.
func TestCloseGivesBack(t *testing.T) {
	clock := conformance.NewClock(time.UnixMilli(1_700_000_000_000))
	l := bucket(t, clock)
	ctx := context.Background()
	for range 100 {
		if res, err := l.AllowN(ctx, "k", 1); err != nil || !res.Allowed {
			t.Fatalf("AllowN = %+v, %v", res, err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	if st.Taken-st.Returned != 100 || st.Stranded != 0 {
		t.Errorf("after Close: %+v; want taken - returned = the 100 spent, nothing stranded", st)
	}
	// the bucket's burst is 1000 less one lifetime's (20ms) refill, 20
	res, err := l.Peek(ctx, "k")
	if err != nil || res.Remaining != 980-100 {
		t.Errorf("Peek after Close = %+v, %v; want 880 remaining", res, err)
	}
	// after Close, decisions go to the strategy, one call each
	before := l.Stats()
	if res, err := l.AllowN(ctx, "k", 1); err != nil || !res.Allowed || l.Stats().Local != before.Local {
		t.Errorf("AllowN after Close = %+v, %v, %+v; want allowed by the strategy", res, err, l.Stats())
	}
}

// TestIdleGivesBack: when demand stops, the first call (of any subject)
// that finds a sweep due gives the ended lease back, on a goroutine of the
// sweep's.
func TestIdleGivesBack(t *testing.T) {
	clock := conformance.NewClock(time.UnixMilli(1_700_000_000_000))
	l := bucket(t, clock)
	ctx := context.Background()
	for range 100 {
		l.AllowN(ctx, "k", 1)
	}
	if st := l.Stats(); st.Taken == 100 {
		t.Fatalf("%+v: the leases hold nothing unspent; the test needs some", st)
	}
	if st := l.Stats(); st.Returned != 0 {
		t.Fatalf("%+v: given back before the lease ended", st)
	}
	// the lease (20ms) ended, the bucket not yet refilled what it holds
	clock.Advance(21 * time.Millisecond)
	if res, err := l.AllowN(ctx, "other", 1); err != nil || !res.Allowed {
		t.Fatalf("AllowN(other) = %+v, %v", res, err)
	}
	l.WaitRefunds()
	if st := l.Stats(); st.Taken-st.Returned != 101 {
		t.Errorf("%+v: want taken - returned = the 101 spent, k's lease given back by the sweep", st)
	}
}

// TestSweepOutlivesCaller: the sweep's refunds run on their own goroutine,
// detached from the caller that swept: a caller whose context is already
// canceled still has the ended lease given back, not stranded.
func TestSweepOutlivesCaller(t *testing.T) {
	clock := conformance.NewClock(time.UnixMilli(1_700_000_000_000))
	l := bucket(t, clock)
	ctx := context.Background()
	for range 100 {
		l.AllowN(ctx, "k", 1)
	}
	held := l.Stats().Taken - 100
	if held <= 0 {
		t.Fatalf("%+v: the lease holds nothing unspent; the test needs some", l.Stats())
	}
	clock.Advance(21 * time.Millisecond) // the lease ended; its units not yet refilled
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	l.AllowN(canceled, "other", 1) // its own decision fails or not; it sweeps
	l.WaitRefunds()
	if st := l.Stats(); st.Returned != held || st.Stranded != 0 {
		t.Errorf("%+v: want the %d units k's lease held returned, none stranded", st, held)
	}
}

// TestRefilledNotGivenBack: units a lease held until the bucket had
// refilled them are not given back: another process drained the bucket
// meanwhile, and a refund of them would put them in it a second time. They
// count as stranded. The same with a part refilled: only the rest goes
// back.
func TestRefilledNotGivenBack(t *testing.T) {
	for _, c := range []struct {
		name  string
		after func(held int64) time.Duration // from the lease to the drain and Close
	}{
		{"none refilled", func(int64) time.Duration { return 21 * time.Millisecond }},
		{"partly refilled", func(held int64) time.Duration { return time.Duration(100+held/2) * time.Millisecond }},
		{"all refilled", func(int64) time.Duration { return time.Second }},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := conformance.NewClock(time.UnixMilli(1_700_000_000_000))
			rdb := mini(t)
			ctx := context.Background()
			lim := strategy.PerSecond(1000)
			l, err := lease.New(lim, func(lim strategy.Limit) (strategy.Strategy, error) {
				return tokenbucket.New(rdb, lim, strategy.WithClock(clock))
			}, lease.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			for range 100 {
				l.AllowN(ctx, "k", 1)
			}
			held := l.Stats().Taken - 100
			if held <= 0 {
				t.Fatalf("%+v: the lease holds nothing unspent; the test needs some", l.Stats())
			}
			after := c.after(held)
			clock.Advance(after)
			// another process, deciding directly: it takes the whole burst
			other, err := tokenbucket.New(rdb, lim, strategy.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			if res, err := other.AllowN(ctx, "k", 1); err != nil || !res.Allowed {
				t.Fatalf("other: %+v, %v", res, err)
			}
			drained, err := other.Peek(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.AllowN(ctx, "k", drained.Remaining); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(ctx); err != nil {
				t.Fatal(err)
			}
			res, err := other.Peek(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			// the lease's units still missing at the drain: 100 + held
			// taken at the start, refilled at 1 per ms since
			missing := max(100+held-after.Milliseconds(), 0)
			want := min(held, missing)
			st := l.Stats()
			if res.Remaining > want || st.Returned > want || st.Returned+st.Stranded != held {
				t.Errorf("after Close, %s later: %d remaining, %+v; want at most the %d of %d held units not refilled given back, the rest stranded",
					after, res.Remaining, st, want, held)
			}
			// what was still missing goes back, but for the ms the
			// ceiling of ResetAfter may hide
			if st.Returned < want-1 {
				t.Errorf("%+v: %d given back, though the bucket still missed %d of the lease's units", st, st.Returned, want)
			}
		})
	}
}

// TestSweepForgetsIdle: a sweep forgets subjects idle for four lifetimes,
// so that new subjects lease again once WithMaxSubjects was reached.
func TestSweepForgetsIdle(t *testing.T) {
	clock := conformance.NewClock(time.UnixMilli(1_700_000_000_000))
	l := bucket(t, clock, lease.WithMaxSubjects(2))
	ctx := context.Background()
	for _, k := range []string{"a", "b"} {
		for range 50 {
			l.AllowN(ctx, k, 1)
		}
	}
	clock.Advance(time.Second)
	l.AllowN(ctx, "c", 1) // decided directly (a and b are held), then sweeps them
	before := l.Stats()
	for range 50 {
		if res, err := l.AllowN(ctx, "c", 1); err != nil || !res.Allowed {
			t.Fatalf("AllowN(c) = %+v, %v", res, err)
		}
	}
	if after := l.Stats(); after.Leases == before.Leases || after.Local == before.Local {
		t.Errorf("c did not lease once a and b went idle: %+v, before %+v", after, before)
	}
}

// TestNoGoroutine: a Limiter runs no goroutine but a sweep's refunds,
// which end, so many dropped without Close leave none behind.
func TestNoGoroutine(t *testing.T) {
	clock := conformance.NewClock(time.UnixMilli(1_700_000_000_000))
	rdb := mini(t)
	ctx := context.Background()
	rdb.Ping(ctx) // the client's connection, before counting
	before := runtime.NumGoroutine()
	for range 50 {
		l, err := lease.New(strategy.PerSecond(1000), func(lim strategy.Limit) (strategy.Strategy, error) {
			return tokenbucket.New(rdb, lim, strategy.WithClock(clock))
		}, lease.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			l.AllowN(ctx, "k", 1)
		}
		clock.Advance(time.Second)
		l.AllowN(ctx, "k", 1) // sweeps
		l.WaitRefunds()
	}
	after := runtime.NumGoroutine()
	for i := 0; after > before && i < 100; i++ {
		time.Sleep(10 * time.Millisecond) // settle: nothing else of the test's may still be ending
		after = runtime.NumGoroutine()
	}
	if after > before {
		t.Errorf("%d goroutines before 50 limiters, %d after: want no more", before, after)
	}
}

// TestMaxSubjects: beyond WithMaxSubjects, a subject is decided by the
// strategy, one call per decision.
func TestMaxSubjects(t *testing.T) {
	clock := conformance.NewClock(time.UnixMilli(1_700_000_000_000))
	l := bucket(t, clock, lease.WithMaxSubjects(2))
	ctx := context.Background()
	for _, k := range []string{"a", "b"} {
		for range 50 {
			l.AllowN(ctx, k, 1)
		}
	}
	before := l.Stats()
	if before.Local == 0 {
		t.Fatalf("%+v: no decision in process", before)
	}
	for range 50 {
		if res, err := l.AllowN(ctx, "c", 1); err != nil || !res.Allowed {
			t.Fatalf("AllowN(c) = %+v, %v", res, err)
		}
	}
	if after := l.Stats(); after.Local != before.Local || after.Leases != before.Leases {
		t.Errorf("a third subject leased: %+v, before %+v", after, before)
	}
}

// TestInvalidInput: invalid keys and costs are errors and touch nothing.
func TestInvalidInput(t *testing.T) {
	clock := conformance.NewClock(time.UnixMilli(1_700_000_000_000))
	l := bucket(t, clock)
	ctx := context.Background()
	if _, err := l.AllowN(ctx, "", 1); !errors.Is(err, strategy.ErrInvalidKey) {
		t.Errorf("AllowN(\"\") = %v, want ErrInvalidKey", err)
	}
	if _, err := l.AllowN(ctx, "k", -1); err == nil {
		t.Error("AllowN(-1): no error")
	}
	if st := l.Stats(); st.Leases != 0 {
		t.Errorf("invalid input leased: %+v", st)
	}
}

// TestObserver: every lease taken and every unit given back or stranded
// is an event, and the events add up to Stats.
func TestObserver(t *testing.T) {
	clock := conformance.NewClock(time.UnixMilli(1_700_000_000_000))
	var mu sync.Mutex
	sums := map[lease.Op]int64{}
	l := bucket(t, clock, lease.WithObserver(func(ev lease.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Op != lease.OpTake || ev.Allowed {
			sums[ev.Op] += ev.Units
		}
	}))
	ctx := context.Background()
	for range 100 {
		l.AllowN(ctx, "k", 1)
	}
	clock.Advance(time.Second)
	for range 10 {
		l.AllowN(ctx, "k", 1) // the ended lease goes back first
	}
	l.Close(ctx)
	st := l.Stats()
	mu.Lock()
	defer mu.Unlock()
	if sums[lease.OpTake] != st.Taken || sums[lease.OpGiveBack] != st.Returned || sums[lease.OpStrand] != st.Stranded || st.Returned == 0 {
		t.Errorf("events %v, stats %+v: want the same sums, something given back", sums, st)
	}
}

// TestAllowLocal: AllowLocal decides from what a lease holds, or the
// denial it serves, and nothing else: no call, no allocation, nothing
// counted when it declines (the caller then asks AllowN, which counts).
func TestAllowLocal(t *testing.T) {
	clock := conformance.NewClock(time.UnixMilli(1_700_000_000_000))
	l := bucket(t, clock)
	ctx := context.Background()
	if _, ok := l.AllowLocal(ctx, "k", 1); ok {
		t.Fatal("AllowLocal before any lease: ok")
	}
	if st := l.Stats(); st != (lease.Stats{}) {
		t.Fatalf("a declined AllowLocal counted: %+v", st)
	}
	for range 100 { // demand, so that the leases grow past it
		if res, err := l.AllowN(ctx, "k", 1); err != nil || !res.Allowed {
			t.Fatalf("AllowN = %+v, %v", res, err)
		}
	}
	held := l.Stats().Taken - 100
	if held < 10 {
		t.Fatalf("the first lease holds nothing more: %+v", l.Stats())
	}
	res, ok := l.AllowLocal(ctx, "k", 1)
	if !ok || !res.Allowed || res.Remaining != held-1 {
		t.Fatalf("AllowLocal(1) = %+v, %v; want allowed from the lease, Remaining %d", res, ok, held-1)
	}
	for _, c := range []struct {
		name string
		key  string
		n    int64
	}{{"more than the lease holds", "k", held}, {"zero", "k", 0}, {"another key", "other", 1}, {"an invalid key", "", 1}} {
		before := l.Stats()
		if res, ok := l.AllowLocal(ctx, c.key, c.n); ok {
			t.Errorf("AllowLocal, %s = %+v, ok", c.name, res)
		}
		if l.Stats() != before {
			t.Errorf("AllowLocal, %s, counted: %+v, before %+v", c.name, l.Stats(), before)
		}
	}
	if a := testing.AllocsPerRun(100, func() { l.AllowLocal(ctx, "k", 0) }); a != 0 {
		t.Errorf("a declined AllowLocal allocates %.0f", a)
	}
	if a := testing.AllocsPerRun(5, func() { l.AllowLocal(ctx, "k", 1) }); a != 0 {
		t.Errorf("AllowLocal allocates %.0f", a)
	}
	clock.Advance(time.Second) // the lease has ended
	if res, ok := l.AllowLocal(ctx, "k", 1); ok {
		t.Errorf("AllowLocal after the lease ended = %+v, ok", res)
	}
	l.Close(ctx)
	if res, ok := l.AllowLocal(ctx, "k", 1); ok {
		t.Errorf("AllowLocal after Close = %+v, ok", res)
	}
}
