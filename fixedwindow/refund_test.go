package fixedwindow_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

func TestRefunds(t *testing.T) {
	conformance.Refunds(t, strategy.Limit{Limit: 10, Window: time.Minute}, fixedwindow.New, fixedwindow.NewLocal)
}

func TestRefundDifferential(t *testing.T) {
	conformance.RefundDifferential(t, fixedwindow.New, fixedwindow.NewLocal,
		strategy.Limit{Limit: 5, Window: 1500 * time.Millisecond},
		strategy.Limit{Limit: 100, Window: time.Second},
		strategy.Limit{Limit: 1, Window: 300 * time.Millisecond})
}

// TestRefundCurrentWindowOnly: units counted in an earlier window are not
// given back; the current window's count never goes below 0.
func TestRefundCurrentWindowOnly(t *testing.T) {
	conformance.OnBackends(t, strategy.Limit{Limit: 4, Window: time.Second}, fixedwindow.New, fixedwindow.NewLocal,
		func(t *testing.T, st strategy.Strategy, clock *conformance.Clock) {
			rf := st.(strategy.Refunder)
			if r, err := st.AllowN(ctx, "w", 4); err != nil || !r.Allowed {
				t.Fatalf("AllowN(4) = %+v, %v", r, err)
			}
			clock.Advance(time.Second) // the next window
			if r, err := st.AllowN(ctx, "w", 1); err != nil || !r.Allowed {
				t.Fatalf("AllowN(1) in the next window = %+v, %v", r, err)
			}
			got, err := rf.RefundN(ctx, "w", 4)
			if err != nil {
				t.Fatal(err)
			}
			if want := (strategy.Result{Allowed: true, Limit: 4, Remaining: 4}); got != want {
				t.Errorf("RefundN(4) = %+v, want %+v (only the current window's 1 unit back)", got, want)
			}
			if r, err := st.AllowN(ctx, "w", 5); err != nil || r.Allowed {
				t.Errorf("AllowN(5) after the refund = %+v, %v, want denied", r, err)
			}
		})
}

func TestRefundServerTime(t *testing.T) { conformance.RefundServerTime(t, fixedwindow.New) }

func BenchmarkRefund(b *testing.B) { conformance.BenchRefund(b, fixedwindow.New) }

// ctx is the context of the refund tests.
var ctx = context.Background()
