package compactlog_test

import (
	"testing"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/internal/conformance"
)

func TestOverrides(t *testing.T) {
	conformance.Overrides(t, compactlog.New, compactlog.NewLocal)
}
