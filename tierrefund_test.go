package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// TestTierRefundN: a tier's RefundN returns the state as the tier's Peek
// reports it, not the state under the policy's own limit.
func TestTierRefundN(t *testing.T) {
	ctx := context.Background()
	_, mini := conformance.Miniredis(t)
	backends := []struct {
		name string
		rdb  func(t *testing.T) redis.Scripter // nil: NewLocal
	}{
		{"miniredis", func(*testing.T) redis.Scripter { return mini }},
		{"redis", func(t *testing.T) redis.Scripter { return testredis.Shared(t).Client(t) }},
		{"local", nil},
	}
	for _, a := range []strategy.Algorithm{ratelimit.SlidingLog, ratelimit.CompactLog, ratelimit.FixedWindow} {
		for _, b := range backends {
			t.Run(string(a)+"/"+b.name, func(t *testing.T) {
				cfg := ratelimit.Config{Algorithm: a, Limit: 10, Window: time.Minute, Prefix: testredis.Prefix(t),
					Tiers: map[string]ratelimit.Limit{"pro": {Limit: 30}}, Timeout: 10 * time.Second}
				clock := conformance.NewClock(conformance.Epoch)
				var l *ratelimit.Limiter
				var err error
				if b.rdb == nil {
					l, err = ratelimit.New(nil, cfg, ratelimit.WithClock(clock))
				} else {
					l, err = ratelimit.New(b.rdb(t), cfg, ratelimit.WithClock(clock))
				}
				if err != nil {
					t.Fatal(err)
				}
				pro := mustTier(t, l, "pro")
				if r, err := pro.AllowN(ctx, "u", 30); err != nil || !r.Allowed {
					t.Fatalf("pro AllowN(30) = %+v, %v; want allowed", r, err)
				}
				got, err := pro.(strategy.Refunder).RefundN(ctx, "u", 5)
				if err != nil {
					t.Fatal(err)
				}
				want, err := pro.Peek(ctx, "u")
				if err != nil {
					t.Fatal(err)
				}
				if got != want || got.Limit != 30 || got.Remaining != 5 || !got.Allowed {
					t.Errorf("pro RefundN(5) = %+v; want the tier's Peek %+v (Limit 30, Remaining 5)", got, want)
				}
				// the policy's own Limiter still reports its own limit
				own, err := l.RefundN(ctx, "u", 0)
				if err != nil || own.Limit != 10 || own.Allowed {
					t.Errorf("RefundN(0) under the own limit = %+v, %v; want Limit 10, denied (25 used)", own, err)
				}
			})
		}
	}
}
