package fixedwindow_test

import (
	"testing"

	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/internal/conformance"
)

func TestOverrides(t *testing.T) {
	conformance.Overrides(t, fixedwindow.New, fixedwindow.NewLocal)
}
