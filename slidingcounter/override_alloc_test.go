//go:build !race

package slidingcounter_test

import (
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/slidingcounter"
	"github.com/ratekit/ratelimit/strategy"
)

// TestOverrideAllocs: a per-call limit costs no allocation more than the
// strategy's own.
func TestOverrideAllocs(t *testing.T) {
	conformance.OverrideAllocs(t, slidingcounter.New, slidingcounter.NewLocal,
		strategy.Limit{Limit: 1000, Window: time.Hour}, strategy.Limit{Limit: 5000, Window: time.Hour, Burst: 9000})
}
