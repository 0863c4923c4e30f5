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
	conformance.LocalAllocs(t, slidingcounter.NewLocal, strategy.Limit{Limit: 1 << 30, Window: time.Hour})
}
