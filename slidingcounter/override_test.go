package slidingcounter_test

import (
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/slidingcounter"
	"github.com/ratekit/ratelimit/strategy"
)

func TestOverrides(t *testing.T) {
	conformance.Overrides(t, slidingcounter.New, slidingcounter.NewLocal)
}

// BenchmarkOverride: AllowN under the strategy's limit against AllowNWith
// under a per-call limit (a subject's tier), on the twin and on Redis.
func BenchmarkOverride(b *testing.B) {
	conformance.BenchOverride(b, slidingcounter.New, slidingcounter.NewLocal,
		strategy.Limit{Limit: 1 << 19, Window: time.Hour}, strategy.Limit{Limit: 1 << 20, Window: time.Hour})
}
