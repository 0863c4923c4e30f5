package slidinglog_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

var ctx = context.Background()

// TestLargeCostIsOneEntry: a request of n units is one sorted-set entry
// whatever n (the script used to add n members: 10^6 of them blocked Redis
// for seconds), and the decisions stay exact in units.
func TestLargeCostIsOneEntry(t *testing.T) {
	lim := strategy.Limit{Limit: strategy.MaxUnits, Window: time.Hour}
	run := func(t *testing.T, st *slidinglog.Limiter, zcard func() int64, clock *conformance.Clock) {
		steps := []struct {
			n       int64
			advance time.Duration
			allowed bool
			entries int64 // at most, the base entry included
		}{
			{1_000_000, time.Second, true, 2},
			{strategy.MaxUnits - 1_000_000 - 5, time.Second, true, 3},
			{5, 0, true, 4},
			{1, 0, false, 4},
			{1_000_001, 0, false, 4},
		}
		for i, s := range steps {
			r, err := st.AllowN(ctx, "big", s.n)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed != s.allowed {
				t.Fatalf("step %d: AllowN(%d) = %+v, want Allowed %v", i, s.n, r, s.allowed)
			}
			if got := zcard(); got > s.entries {
				t.Fatalf("step %d: after AllowN(%d) the sorted set holds %d entries, want at most %d", i, s.n, got, s.entries)
			}
			clock.Advance(s.advance)
		}
		// the oldest unit leaves at 1h, the 10^6+1-th at 1h+1s, all at 1h+2s
		for _, c := range []struct {
			n          int64
			retry, rst time.Duration
		}{{1, time.Hour - 2*time.Second, time.Hour}, {1_000_000, time.Hour - 2*time.Second, time.Hour}, {1_000_001, time.Hour - time.Second, time.Hour}} {
			r, err := st.AllowN(ctx, "big", c.n)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed || r.Remaining != 0 || r.RetryAfter != c.retry || r.ResetAfter != c.rst {
				t.Errorf("AllowN(%d) when full = %+v, want denied, Remaining 0, RetryAfter %v, ResetAfter %v", c.n, r, c.retry, c.rst)
			}
		}
		clock.Advance(time.Hour - 2*time.Second)
		if r, _ := st.Peek(ctx, "big"); r.Remaining != 1_000_000 {
			t.Errorf("Peek after the first request left = %+v, want Remaining 1000000", r)
		}
		if r, _ := st.AllowN(ctx, "big", 1_000_000); !r.Allowed || r.Remaining != 0 {
			t.Errorf("AllowN(10^6) after the first request left = %+v, want allowed with Remaining 0", r)
		}
		if got := zcard(); got > 4 {
			t.Errorf("after eviction the sorted set holds %d entries, want at most 4", got)
		}
	}
	t.Run("miniredis", func(t *testing.T) {
		mr, rdb := conformance.Miniredis(t)
		clock := conformance.NewClock(conformance.Epoch)
		st, err := slidinglog.New(rdb, lim, strategy.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		run(t, st, func() int64 {
			m, _ := mr.ZMembers(st.Key("big"))
			return int64(len(m))
		}, clock)
	})
	t.Run("redis", func(t *testing.T) {
		rdb := conformance.RealRedis(t)
		clock := conformance.NewClock(conformance.Epoch)
		st, err := slidinglog.New(rdb, lim, strategy.WithClock(clock), strategy.WithPrefix(testredis.Prefix(t)))
		if err != nil {
			t.Fatal(err)
		}
		run(t, st, func() int64 { return rdb.ZCard(ctx, st.Key("big")).Val() }, clock)
	})
}

// TestLocalLargeCost: the twin holds one entry for a request of 2^40 units
// and allocates nothing in proportion to n (it used to allocate 8 bytes a
// unit: 2^40 units crashed the process).
func TestLocalLargeCost(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	st, err := slidinglog.NewLocal(strategy.Limit{Limit: strategy.MaxUnits, Window: time.Hour}, strategy.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if r, err := st.AllowN(ctx, "big", strategy.MaxUnits); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("AllowN(2^40) = %+v, %v; want allowed with Remaining 0", r, err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Errorf("AllowN(2^40) allocated %d bytes, want under 64 KiB", grew)
	}
	if entries := slidinglog.LogOf(st, "big"); entries != 1 {
		t.Errorf("the twin holds %d entries after one request, want 1", entries)
	}
	// half the limit every half window: each request evicts the one
	// before the last, and allocates nothing
	clock.Advance(time.Hour)
	allocs := testing.AllocsPerRun(100, func() {
		clock.Advance(30 * time.Minute)
		if r, _ := st.AllowN(ctx, "big", strategy.MaxUnits/2); !r.Allowed {
			t.Fatalf("AllowN(2^39) half a window after the last = %+v, want allowed", r)
		}
	})
	if allocs != 0 {
		t.Errorf("AllowN(2^39) allocates %v times a call, want 0", allocs)
	}
	if entries := slidinglog.LogOf(st, "big"); entries != 2 {
		t.Errorf("the twin holds %d entries, want 2 (the requests of the last window)", entries)
	}
}

// TestStepBackCostsNoMore: with 60,000 units held as 60,000 entries, a clock
// that steps back makes each request one more entry at most, merged into
// the newest, and allocates (so copies) nothing; the twin used to shift
// every newer entry for every unit: 34 s for one call.
func TestStepBackCostsNoMore(t *testing.T) {
	const held = 60_000
	lim := strategy.Limit{Limit: 2 * held, Window: time.Hour}
	t.Run("local", func(t *testing.T) {
		clock := conformance.NewClock(conformance.Epoch)
		st, _ := slidinglog.NewLocal(lim, strategy.WithClock(clock))
		for i := 0; i < held; i++ {
			st.AllowN(ctx, "k", 1)
			clock.Advance(time.Millisecond)
		}
		entries0 := slidinglog.LogOf(st, "k")
		if entries0 != held {
			t.Fatalf("%d entries for %d requests in distinct ms, want %d", entries0, held, held)
		}
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			clock.Advance(-time.Duration(1+i%50) * time.Second)
			if r, _ := st.AllowN(ctx, "k", 3); !r.Allowed {
				t.Fatalf("request %d after the clock stepped back denied: %+v", i, r)
			}
			clock.Advance(time.Duration(1+i%50) * time.Second)
			i++
		})
		if entries := slidinglog.LogOf(st, "k"); entries != held || allocs != 0 {
			t.Errorf("requests after steps back: entries %d -> %d, %v allocations a call; want no new entry (merged into the newest) and no allocation (nothing copied)",
				entries0, entries, allocs)
		}
		if r, _ := st.Peek(ctx, "k"); r.Remaining != lim.Limit-held-3*int64(i) {
			t.Errorf("Peek = %+v, want Remaining %d", r, lim.Limit-held-3*int64(i))
		}
	})
	t.Run("redis", func(t *testing.T) {
		rdb := conformance.RealRedis(t)
		clock := conformance.NewClock(conformance.Epoch)
		st, _ := slidinglog.New(rdb, strategy.Limit{Limit: 1000, Window: time.Hour}, strategy.WithClock(clock), strategy.WithPrefix(testredis.Prefix(t)))
		for i := 0; i < 500; i++ {
			st.AllowN(ctx, "k", 1)
			clock.Advance(time.Millisecond)
		}
		before := rdb.ZCard(ctx, st.Key("k")).Val()
		for i := 0; i < 100; i++ {
			clock.Advance(-time.Second)
			if r, _ := st.AllowN(ctx, "k", 2); !r.Allowed {
				t.Fatalf("request %d after the clock stepped back denied: %+v", i, r)
			}
			clock.Advance(time.Second)
		}
		if after := rdb.ZCard(ctx, st.Key("k")).Val(); after != before {
			t.Errorf("ZCARD %d -> %d after 100 requests in the past: want them merged into the newest entry", before, after)
		}
	})
}
