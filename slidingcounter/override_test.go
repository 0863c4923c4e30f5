package slidingcounter_test

import (
	"testing"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/slidingcounter"
)

func TestOverrides(t *testing.T) {
	conformance.Overrides(t, slidingcounter.New, slidingcounter.NewLocal)
}
