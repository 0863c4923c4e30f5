package gcra_test

import (
	"testing"

	"github.com/ratekit/ratelimit/gcra"
	"github.com/ratekit/ratelimit/internal/conformance"
)

func TestOverrides(t *testing.T) {
	conformance.Overrides(t, gcra.New, gcra.NewLocal)
}
