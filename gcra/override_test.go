package gcra_test

import (
	"testing"
	"time"

	"github.com/ratekit/ratelimit/gcra"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

func TestOverrides(t *testing.T) {
	conformance.Overrides(t, gcra.New, gcra.NewLocal)
}

// BenchmarkOverride: AllowN under the strategy's limit against AllowNWith
// under a per-call limit (a subject's tier), on the twin and on Redis.
func BenchmarkOverride(b *testing.B) {
	conformance.BenchOverride(b, gcra.New, gcra.NewLocal,
		strategy.Limit{Limit: 1 << 30, Window: time.Hour}, strategy.Limit{Limit: 1 << 31, Window: time.Hour})
}
