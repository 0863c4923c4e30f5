package slidinglog_test

import (
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// TestRefundNewestFirst: a refund takes the newest entries whole, then
// part of the entry where it stops; RetryAfter and ResetAfter stay exact.
func TestRefundNewestFirst(t *testing.T) {
	conformance.OnBackends(t, strategy.Limit{Limit: 5, Window: time.Second}, slidinglog.New, slidinglog.NewLocal, func(t *testing.T, st strategy.Strategy, clock *conformance.Clock) {
		rf := st.(strategy.Refunder)
		allow := func(n int64, want bool) strategy.Result {
			t.Helper()
			r, err := st.AllowN(ctx, "s", n)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed != want {
				t.Fatalf("at %s AllowN(%d) = %+v, want Allowed %v", clock.Now().Sub(conformance.Epoch), n, r, want)
			}
			return r
		}
		allow(2, true) // t=0
		clock.Advance(100 * time.Millisecond)
		allow(2, true) // t=100
		clock.Advance(100 * time.Millisecond)
		allow(1, true) // t=200: full
		got, err := rf.RefundN(ctx, "s", 2)
		if err != nil {
			t.Fatal(err)
		}
		// left: 2 units at t=0, 1 at t=100
		want := strategy.Result{Allowed: true, Limit: 5, Remaining: 2, ResetAfter: 900 * time.Millisecond}
		if got != want {
			t.Fatalf("RefundN(2) = %+v, want %+v", got, want)
		}
		if r := allow(3, false); r.RetryAfter != 800*time.Millisecond {
			t.Errorf("AllowN(3) RetryAfter = %s, want 800ms (the t=0 entry leaves)", r.RetryAfter)
		}
		allow(2, true) // t=200 again
		clock.Advance(800 * time.Millisecond)
		// t=1000: the t=0 entry left; 1 unit at t=100 and 2 at t=200 count
		if r := allow(3, false); r.RetryAfter != 100*time.Millisecond || r.Remaining != 2 {
			t.Errorf("AllowN(3) at t=1000 = %+v, want Remaining 2, RetryAfter 100ms (the t=100 entry leaves)", r)
		}
		// the units that left are not given back: only the 3 that count
		got, err = rf.RefundN(ctx, "s", 5)
		if err != nil {
			t.Fatal(err)
		}
		if want := (strategy.Result{Allowed: true, Limit: 5, Remaining: 5}); got != want {
			t.Errorf("RefundN(5) at t=1000 = %+v, want %+v", got, want)
		}
		allow(5, true)
		allow(1, false)
	})
}

func BenchmarkRefund(b *testing.B) { conformance.BenchRefund(b, slidinglog.New) }

func BenchmarkOverride(b *testing.B) {
	conformance.BenchOverride(b, slidinglog.New, slidinglog.NewLocal, 1<<30)
}
