package compactlog_test

import (
	"testing"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/internal/conformance"
)

// TestClockStepsBack holds every backend to the documented semantics of a
// clock that steps back (conformance.SlidingLogModel), which the sliding
// log, the compact log and multilimit's sliding-log rules share.
func TestClockStepsBack(t *testing.T) {
	conformance.SlidingLogClockStepsBackends(t, compactlog.New, compactlog.NewLocal)
}
