//go:build !race

package compactlog_test

import (
	"testing"
	"time"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/strategy"
)

// TestFreshSubjectAllocs: the twin stores a run per request, not an entry
// per unit, so a fresh subject's first request allocates as much for a
// cost of 1 as for 5000 (TestSpec checks a warm one allocates nothing).
// (The race detector's instrumentation may allocate, hence the build tag.)
func TestFreshSubjectAllocs(t *testing.T) {
	st, err := compactlog.NewLocal(strategy.Limit{Limit: compactlog.MaxLimit, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	fresh := func(n int64) float64 {
		return testing.AllocsPerRun(100, func() { st.Reset(ctx, "cold"); st.AllowN(ctx, "cold", n) })
	}
	if one, many := fresh(1), fresh(5000); one != many {
		t.Errorf("a fresh subject: %v allocations for n = 1, %v for n = 5000; want the same", one, many)
	}
}
