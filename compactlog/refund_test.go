package compactlog_test

import (
	"testing"
	"time"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

func TestRefunds(t *testing.T) {
	conformance.Refunds(t, strategy.Limit{Limit: 10, Window: time.Minute}, compactlog.New, compactlog.NewLocal)
}

func TestRefundDifferential(t *testing.T) {
	conformance.RefundDifferential(t, compactlog.New, compactlog.NewLocal,
		strategy.Limit{Limit: 5, Window: 1500 * time.Millisecond},
		strategy.Limit{Limit: 100, Window: time.Second},
		strategy.Limit{Limit: 1, Window: 300 * time.Millisecond})
}

// TestRefundRanges: a limit whose value is read by ranges, and a refund
// that crosses the ring's end.
func TestRefundRanges(t *testing.T) {
	conformance.RefundDifferential(t, compactlog.New, compactlog.NewLocal,
		strategy.Limit{Limit: 600, Window: time.Second})
}

func TestRefundServerTime(t *testing.T) { conformance.RefundServerTime(t, compactlog.New) }

func BenchmarkRefund(b *testing.B) { conformance.BenchRefund(b, compactlog.New) }
