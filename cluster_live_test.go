package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
)

// TestClusterLiveChanges runs the changes made on live traffic through the
// facade on the real 3-master cluster: a policy in shadow mode with a
// candidate and a tier, a refund, and a promote by Set.Update, with a
// strict observer (no decision made by the failure policy: a CROSSSLOT, for
// one, would be).
func TestClusterLiveChanges(t *testing.T) {
	cluster := testredis.SharedCluster(t)
	rdb := cluster.Client(t)
	ctx := context.Background()
	p := ratelimit.Policies{"live": {
		Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Hour, Mode: "shadow",
		Prefix: "live:" + t.Name() + ":", Timeout: clusterTimeout,
		Candidate: &ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Hour},
		Tiers:     map[string]ratelimit.Limit{"pro": {Limit: 3}},
	}}
	// a frozen client clock: an hour's boundary passing mid-test would
	// reset the fixed window
	clock := conformance.NewClock(time.Now())
	set, err := ratelimit.NewSet(rdb, p, ratelimit.WithObserver(strict{t}), ratelimit.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	l, _ := set.Get("live")
	for _, key := range []string{"user:1", "user:2", "user:3"} { // spread over the masters
		for i := range 3 {
			r, err := l.Allow(ctx, key)
			if err != nil || !r.Allowed || r.Shadow != (i == 2) {
				t.Fatalf("%s: Allow %d = %+v, %v; want allowed, Shadow %v", key, i, r, err, i == 2)
			}
		}
		if r, err := mustTier(t, l, "pro").AllowN(ctx, key, 1); err != nil || !r.Allowed || r.Shadow || r.Limit != 3 {
			t.Fatalf("%s: pro Allow = %+v, %v; want allowed under 3, not a shadow pass", key, r, err)
		}
		if r, err := l.RefundN(ctx, key, 1); err != nil || r.Remaining != 0 { // 3 used, 1 back: 2 of 2
			t.Fatalf("%s: RefundN = %+v, %v; want Remaining 0 under the policy's limit", key, r, err)
		}
		if r, err := mustTier(t, l, "pro").Peek(ctx, key); err != nil || r.Remaining != 1 {
			t.Fatalf("%s: pro Peek after the refund = %+v, %v; want Remaining 1", key, r, err)
		}
	}
	// promote the candidate: the sliding log holds what it recorded in
	// shadow (2 units, then 1 more, 1 refunded)
	promoted := p["live"].Candidate
	promoted.Prefix = p["live"].Prefix
	promoted.Timeout = clusterTimeout
	if err := set.Update(ratelimit.Policies{"live": *promoted}); err != nil {
		t.Fatal(err)
	}
	l, _ = set.Get("live")
	for _, key := range []string{"user:1", "user:2", "user:3"} {
		if r, err := l.Allow(ctx, key); err != nil || r.Allowed {
			t.Errorf("%s: Allow after the promote = %+v, %v; want denied: the candidate's 2 units carried over", key, r, err)
		}
	}
}
