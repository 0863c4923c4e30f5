package tokenbucket_test

import (
	"testing"

	"github.com/ratekit/ratelimit/tokenbucket"
	"github.com/ratekit/ratelimit/internal/conformance"
)

func TestOverrides(t *testing.T) {
	conformance.Overrides(t, tokenbucket.New, tokenbucket.NewLocal)
}
