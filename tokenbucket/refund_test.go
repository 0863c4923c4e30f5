package tokenbucket_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

func TestRefunds(t *testing.T) {
	conformance.Refunds(t, strategy.Limit{Limit: 10, Window: time.Minute}, tokenbucket.New, tokenbucket.NewLocal)
}

func TestRefundDifferential(t *testing.T) {
	conformance.RefundDifferential(t, tokenbucket.New, tokenbucket.NewLocal,
		strategy.Limit{Limit: 5, Window: 1500 * time.Millisecond},
		strategy.Limit{Limit: 100, Window: time.Second},
		strategy.Limit{Limit: 10, Window: time.Second, Burst: 15},
		strategy.Limit{Limit: 7, Window: 333 * time.Millisecond, Burst: 3},
		strategy.Limit{Limit: 1, Window: 300 * time.Millisecond})
}

// TestRefundAfterRefill: a refund tops the bucket up to its capacity, no
// further, after refilling to now.
func TestRefundAfterRefill(t *testing.T) {
	conformance.OnBackends(t, strategy.Limit{Limit: 10, Window: time.Second}, tokenbucket.New, tokenbucket.NewLocal,
		func(t *testing.T, st strategy.Strategy, clock *conformance.Clock) {
			rf := st.(strategy.Refunder)
			if r, err := st.AllowN(ctx, "b", 10); err != nil || !r.Allowed {
				t.Fatalf("AllowN(10) = %+v, %v", r, err)
			}
			clock.Advance(300 * time.Millisecond) // 3 units back
			for _, want := range []int64{8, 10} {
				got, err := rf.RefundN(ctx, "b", 5)
				if err != nil {
					t.Fatal(err)
				}
				if got.Remaining != want {
					t.Errorf("RefundN(5) = %+v, want Remaining %d", got, want)
				}
			}
		})
}

func TestRefundServerTime(t *testing.T) { conformance.RefundServerTime(t, tokenbucket.New) }

func BenchmarkRefund(b *testing.B) { conformance.BenchRefund(b, tokenbucket.New) }

// ctx is the context of the refund tests.
var ctx = context.Background()
