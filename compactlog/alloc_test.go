//go:build !race

package compactlog_test

import (
	"testing"
	"time"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

// TestLocalAllocs: a decision on a warm subject allocates nothing, whatever
// its cost: the twin stores a run per request, not an entry per unit. (The
// race detector's instrumentation allocates, hence the build tag.)
func TestLocalAllocs(t *testing.T) {
	st := conformance.LocalAllocs(t, compactlog.NewLocal, strategy.Limit{Limit: compactlog.MaxLimit, Window: time.Hour})
	// a cost of n is one run: the same allocations for n = 1 and n = 5000
	fresh := func(n int64) float64 {
		return testing.AllocsPerRun(100, func() { st.Reset(ctx, "cold"); st.AllowN(ctx, "cold", n) })
	}
	if one, many := fresh(1), fresh(5000); one != many {
		t.Errorf("a fresh subject: %v allocations for n = 1, %v for n = 5000; want the same", one, many)
	}
}
