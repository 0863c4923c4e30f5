package slidinglog_test

import (
	"testing"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/slidinglog"
)

func TestOverrides(t *testing.T) {
	conformance.Overrides(t, slidinglog.New, slidinglog.NewLocal)
}
