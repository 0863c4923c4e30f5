package slidinglog_test

import (
	"testing"

	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/internal/conformance"
)

func TestOverrides(t *testing.T) {
	conformance.Overrides(t, slidinglog.New, slidinglog.NewLocal)
}
