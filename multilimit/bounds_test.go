package multilimit_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/multilimit"
	"github.com/ratekit/ratelimit/strategy"
)

// bigRules: a sliding log at MaxUnits per hour, with a loose fixed window.
var bigRules = []multilimit.Rule{
	{Algorithm: strategy.SlidingLog, Limit: strategy.Limit{Limit: strategy.MaxUnits, Window: time.Hour}},
	{Algorithm: strategy.FixedWindow, Limit: strategy.Limit{Limit: strategy.MaxUnits, Window: 24 * time.Hour}},
}

// TestLargeCostIsOneEntry: a request of n units is one entry of a sliding
// log rule whatever n (the script used to add n members), and the
// decisions stay exact in units.
func TestLargeCostIsOneEntry(t *testing.T) {
	run := func(t *testing.T, m *multilimit.Limiter, zcard func() int64, clock *conformance.Clock) {
		for i, s := range []struct {
			n       int64
			allowed bool
			entries int64
		}{
			{1_000_000, true, 2},
			{strategy.MaxUnits - 1_000_000, true, 3},
			{1, false, 3},
		} {
			r, err := m.AllowN(ctx, "big", s.n)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed != s.allowed {
				t.Fatalf("step %d: AllowN(%d) = %+v, want Allowed %v", i, s.n, r, s.allowed)
			}
			if got := zcard(); got > s.entries {
				t.Fatalf("step %d: after AllowN(%d) the sliding log holds %d entries, want at most %d", i, s.n, got, s.entries)
			}
			clock.Advance(time.Second)
		}
		// at +3s: the first 10^6 units leave at 1h, the rest at 1h+1s
		_, each := eachAt(t, m, "big", 1_000_001)
		if r := each[0]; r.Allowed || r.RetryAfter != time.Hour-2*time.Second || r.ResetAfter != time.Hour-2*time.Second {
			t.Errorf("sliding log rule, AllowN(10^6+1) when full = %+v, want denied with RetryAfter and ResetAfter 59m58s", r)
		}
		_, each = eachAt(t, m, "big", 1_000_000)
		if r := each[0]; r.Allowed || r.RetryAfter != time.Hour-3*time.Second {
			t.Errorf("sliding log rule, AllowN(10^6) when full = %+v, want denied with RetryAfter 59m57s", r)
		}
	}
	t.Run("miniredis", func(t *testing.T) {
		mr, rdb := conformance.Miniredis(t)
		clock := conformance.NewClock(conformance.Epoch)
		m, err := multilimit.New(rdb, bigRules, strategy.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		run(t, m, func() int64 {
			z, _ := mr.ZMembers(m.Keys("big")[0])
			return int64(len(z))
		}, clock)
	})
	t.Run("redis", func(t *testing.T) {
		rdb := conformance.RealRedis(t)
		clock := conformance.NewClock(conformance.Epoch)
		m, err := multilimit.New(rdb, bigRules, strategy.WithClock(clock), strategy.WithPrefix(testredis.Prefix(t)))
		if err != nil {
			t.Fatal(err)
		}
		run(t, m, func() int64 { return rdb.ZCard(ctx, m.Keys("big")[0]).Val() }, clock)
	})
}

func eachAt(t *testing.T, m multi, key string, n int64) (strategy.Result, []strategy.Result) {
	t.Helper()
	r, rs, err := m.AllowNEach(ctx, key, n)
	if err != nil {
		t.Fatal(err)
	}
	return r, rs
}

// TestLocalLargeCost: the twin holds one entry for a request of 2^40 units
// and allocates nothing in proportion to n (it used to allocate 8 bytes a
// unit).
func TestLocalLargeCost(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	m, err := multilimit.NewLocal(bigRules, strategy.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if r, err := m.AllowN(ctx, "big", strategy.MaxUnits); err != nil || !r.Allowed {
		t.Fatalf("AllowN(2^40) = %+v, %v; want allowed", r, err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Errorf("AllowN(2^40) allocated %d bytes, want under 64 KiB", grew)
	}
	if entries := multilimit.LogOf(m, "big", 0); entries != 1 {
		t.Errorf("the twin's sliding log holds %d entries after one request, want 1", entries)
	}
}

// TestStepBackCostsNoMore: with 60,000 entries held, requests made while
// the clock stepped back merge into the newest entry (the twin used to
// shift every newer entry for every unit).
func TestStepBackCostsNoMore(t *testing.T) {
	const held = 60_000
	clock := conformance.NewClock(conformance.Epoch)
	m, _ := multilimit.NewLocal([]multilimit.Rule{{Algorithm: strategy.SlidingLog, Limit: strategy.Limit{Limit: 2 * held, Window: time.Hour}}}, strategy.WithClock(clock))
	for i := 0; i < held; i++ {
		m.AllowN(ctx, "k", 1)
		clock.Advance(time.Millisecond)
	}
	entries0 := multilimit.LogOf(m, "k", 0)
	if entries0 != held {
		t.Fatalf("%d entries for %d requests in distinct ms, want %d", entries0, held, held)
	}
	i := 0
	for range 1000 {
		clock.Advance(-time.Duration(1+i%50) * time.Second)
		if r, _ := m.AllowN(ctx, "k", 3); !r.Allowed {
			t.Fatalf("request %d after the clock stepped back denied: %+v", i, r)
		}
		clock.Advance(time.Duration(1+i%50) * time.Second)
		i++
	}
	if entries := multilimit.LogOf(m, "k", 0); entries != held {
		t.Errorf("1000 requests after steps back: entries %d -> %d, want them merged into the newest entry", entries0, entries)
	}
	if r, _ := m.Peek(ctx, "k"); r.Remaining != 2*held-held-3000 {
		t.Errorf("Peek = %+v, want Remaining %d", r, held-3000)
	}
}

// TestClockStepsBack holds a sliding log rule on every backend to the
// documented semantics of a clock that steps back
// (conformance.SlidingLogModel), as package slidinglog is.
func TestClockStepsBack(t *testing.T) {
	for _, b := range backendNames {
		t.Run(b, func(t *testing.T) {
			conformance.SlidingLogClockSteps(t, func(t *testing.T, lim strategy.Limit, clock *conformance.Clock) strategy.Strategy {
				m, err := build(t, b, []multilimit.Rule{{Algorithm: strategy.SlidingLog, Limit: lim}}, clock)
				if err != nil {
					t.Fatal(err)
				}
				return m
			})
		})
	}
}
