//go:build !race

package slidingcounter_test

import (
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/slidingcounter"
	"github.com/ratekit/ratelimit/strategy"
)

// TestLocalAllocs: a decision on a warm subject allocates nothing. (The race
// detector's instrumentation allocates, hence the build tag.)
func TestLocalAllocs(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	st, err := slidingcounter.NewLocal(strategy.Limit{Limit: 1 << 30, Window: time.Hour}, strategy.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	st.AllowN(ctx, "warm", 1)
	for name, f := range map[string]func(){
		"AllowN": func() { st.AllowN(ctx, "warm", 1) },
		"Peek":   func() { st.Peek(ctx, "warm") },
	} {
		if got := testing.AllocsPerRun(1000, f); got != 0 {
			t.Errorf("%s on a warm subject: %v allocations, want 0", name, got)
		}
	}
}
