package slidingcounter_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/slidingcounter"
	"github.com/ratekit/ratelimit/strategy"
)

func TestRefunds(t *testing.T) {
	conformance.Refunds(t, strategy.Limit{Limit: 10, Window: time.Minute}, slidingcounter.New, slidingcounter.NewLocal)
}

func TestRefundDifferential(t *testing.T) {
	conformance.RefundDifferential(t, slidingcounter.New, slidingcounter.NewLocal,
		strategy.Limit{Limit: 5, Window: 1500 * time.Millisecond},
		strategy.Limit{Limit: 100, Window: time.Second},
		strategy.Limit{Limit: 1, Window: 300 * time.Millisecond})
}

// TestRefundCurrentWindowOnly: the previous window is not touched: a
// request refunded after the window changed still weighs its share.
func TestRefundCurrentWindowOnly(t *testing.T) {
	conformance.OnBackends(t, strategy.Limit{Limit: 4, Window: time.Second}, slidingcounter.New, slidingcounter.NewLocal,
		func(t *testing.T, st strategy.Strategy, clock *conformance.Clock) {
			rf := st.(strategy.Refunder)
			if r, err := st.AllowN(ctx, "w", 4); err != nil || !r.Allowed {
				t.Fatalf("AllowN(4) = %+v, %v", r, err)
			}
			clock.Advance(1500 * time.Millisecond) // half-way through the next window
			if r, err := st.AllowN(ctx, "w", 1); err != nil || !r.Allowed {
				t.Fatalf("AllowN(1) in the next window = %+v, %v", r, err)
			}
			// used = 1 + ceil(4 x 1/2) = 3; the refund gives back the 1
			got, err := rf.RefundN(ctx, "w", 4)
			if err != nil {
				t.Fatal(err)
			}
			if got.Remaining != 2 {
				t.Errorf("RefundN(4) = %+v, want Remaining 2 (the previous window still weighs 2)", got)
			}
		})
}

func TestRefundServerTime(t *testing.T) { conformance.RefundServerTime(t, slidingcounter.New) }

func BenchmarkRefund(b *testing.B) { conformance.BenchRefund(b, slidingcounter.New) }

// ctx is the context of the refund tests.
var ctx = context.Background()
