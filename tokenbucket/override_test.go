package tokenbucket_test

import (
	"testing"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/tokenbucket"
)

func TestOverrides(t *testing.T) {
	conformance.Overrides(t, tokenbucket.New, tokenbucket.NewLocal)
}
