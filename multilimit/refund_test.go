package multilimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/multilimit"
	"github.com/ratekit/ratelimit/strategy"
)

// rulesOf builds, for lim, a sliding log rule of lim and a fixed window
// rule of twice the limit over three times the window: lim's capacity is
// the subject's until the fixed window fills.
func rulesOf(lim strategy.Limit) []multilimit.Rule {
	return []multilimit.Rule{
		{Algorithm: strategy.SlidingLog, Limit: lim},
		{Algorithm: strategy.FixedWindow, Limit: strategy.Limit{Limit: 2 * lim.Limit, Window: 3 * lim.Window}},
	}
}

func newRedis(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*multilimit.Limiter, error) {
	return multilimit.New(rdb, rulesOf(lim), opts...)
}

func newLocal(lim strategy.Limit, opts ...strategy.Option) (*multilimit.Local, error) {
	return multilimit.NewLocal(rulesOf(lim), opts...)
}

func TestRefunds(t *testing.T) {
	conformance.Refunds(t, strategy.Limit{Limit: 10, Window: time.Minute}, newRedis, newLocal)
}

func TestRefundDifferential(t *testing.T) {
	conformance.RefundDifferential(t, newRedis, newLocal,
		strategy.Limit{Limit: 5, Window: 1500 * time.Millisecond},
		strategy.Limit{Limit: 100, Window: time.Second},
		strategy.Limit{Limit: 1, Window: 300 * time.Millisecond})
}

// TestRefundEachRuleByItsOwn: a rule never gets back units that left its
// window; the other rule still gets them back.
func TestRefundEachRuleByItsOwn(t *testing.T) {
	conformance.OnBackends(t, strategy.Limit{Limit: 4, Window: time.Second}, newRedis, newLocal,
		func(t *testing.T, st strategy.Strategy, clock *conformance.Clock) {
			rf := st.(interface {
				RefundNEach(ctx context.Context, key string, n int64) (strategy.Result, []strategy.Result, error)
			})
			if r, err := st.AllowN(ctx, "m", 3); err != nil || !r.Allowed {
				t.Fatalf("AllowN(3) = %+v, %v", r, err)
			}
			clock.Advance(time.Second) // the sliding log's units left; the fixed window (8/3s) keeps 3
			_, each, err := rf.RefundNEach(ctx, "m", 2)
			if err != nil {
				t.Fatal(err)
			}
			if each[0].Remaining != 4 || each[1].Remaining != 7 {
				t.Errorf("RefundNEach(2) rules = %+v, want Remaining 4 (nothing to give back) and 7 (8 - 3 + 2)", each)
			}
		})
}

func TestRefundServerTime(t *testing.T) { conformance.RefundServerTime(t, newRedis) }

func TestRefundCluster(t *testing.T) {
	conformance.RefundCluster(t, strategy.Limit{Limit: 6, Window: time.Minute}, newRedis)
}

func BenchmarkRefund(b *testing.B) { conformance.BenchRefund(b, newRedis) }
