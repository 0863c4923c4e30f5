package compactlog_test

import (
	"testing"
	"time"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

func TestOverrides(t *testing.T) {
	conformance.Overrides(t, compactlog.New, compactlog.NewLocal)
}

// BenchmarkOverride: AllowN under the strategy's limit against AllowNWith
// under a per-call limit (a subject's tier), on the twin and on Redis.
func BenchmarkOverride(b *testing.B) {
	conformance.BenchOverride(b, compactlog.New, compactlog.NewLocal,
		strategy.Limit{Limit: 5000, Window: time.Hour}, strategy.Limit{Limit: 10000, Window: time.Hour})
}
