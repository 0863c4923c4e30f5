//go:build !race

package fixedwindow_test

import (
	"testing"
	"time"

	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

// TestOverrideAllocs: a per-call limit costs no allocation more than the
// strategy's own.
func TestOverrideAllocs(t *testing.T) {
	conformance.OverrideAllocs(t, fixedwindow.New, fixedwindow.NewLocal,
		strategy.Limit{Limit: 1000, Window: time.Hour}, strategy.Limit{Limit: 5000, Window: time.Hour, Burst: 9000})
}
