package report

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/benchmarks/internal/targets"
	"github.com/ratekit/ratelimit/strategy"
)

func TestMaxInWindow(t *testing.T) {
	for _, c := range []struct {
		name  string
		times []event
		w     int64
		want  int
	}{
		{"none", nil, 10, 0},
		{"one instant", []event{5, 5, 5}, 10, 3},
		{"edge excluded", []event{0, 10}, 10, 1},
		{"edge included", []event{1, 10}, 10, 2},
		{"two bursts across a boundary", []event{9, 9, 10, 10}, 10, 4},
		{"slides", []event{0, 3, 6, 9, 12, 15}, 10, 4},
	} {
		if got := maxInWindow(c.times, c.w); got != c.want {
			t.Errorf("%s: maxInWindow(%v, %d) = %d, want %d", c.name, c.times, c.w, got, c.want)
		}
	}
}

func TestHistQuantile(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h[histIndex(int64(i)*1000)]++ // 1µs .. 1ms
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 500e3}, {0.99, 990e3}} {
		if got := h.quantile(c.q); math.Abs(got-c.want)/c.want > 0.05 {
			t.Errorf("quantile(%v) = %.0f, want %.0f within 5%%", c.q, got, c.want)
		}
	}
	for _, v := range []int64{0, 1, 31, 32, 33, 1000, 123456789} {
		if got := histValue(histIndex(v)); math.Abs(got-float64(v)) > 0.04*float64(v)+1 {
			t.Errorf("histValue(histIndex(%d)) = %.0f, want within 4%%", v, got)
		}
	}
}

// The probes must find what the algorithms are known for: the exact log
// never lets more than the limit through; a peer fixed window whose window
// opens on the first request lets almost twice through at its boundary;
// a token bucket with burst = limit lets a burst and a window's refill.
func TestPrecisionProbesOnPeers(t *testing.T) {
	lim := strategy.PerMinute(100)
	ctx := context.Background()
	want := map[string][2]float64{
		"peer:ulule fixed_window":    {1.99, 1},
		"peer:redis_rate gcra":       {1, 1.99},
		"peer:mennanov token_bucket": {1.01, 1.99},
	}
	for _, tg := range targets.Peers() {
		w, ok := want[tg.Name]
		if !ok {
			continue
		}
		pb, err := precision(ctx, tg, lim, boundaryBurst(lim))
		if err != nil {
			t.Fatalf("%s: %v", tg.Name, err)
		}
		ps, err := precision(ctx, tg, lim, burstThenSteady(lim))
		if err != nil {
			t.Fatalf("%s: %v", tg.Name, err)
		}
		if math.Abs(pb-w[0]) > 0.015 || math.Abs(ps-w[1]) > 0.015 {
			t.Errorf("%s: precision boundary %.3f burst+steady %.3f, want %.2f and %.2f", tg.Name, pb, ps, w[0], w[1])
		}
	}
}

func TestAlignedStart(t *testing.T) {
	for _, w := range []time.Duration{time.Second, time.Minute, 7 * time.Second, time.Hour} {
		if ms := alignedStart(w).UnixMilli(); ms%w.Milliseconds() != 0 {
			t.Errorf("alignedStart(%s) = %d ms, not a multiple of the window", w, ms)
		}
	}
}
