package ratelimit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/strategy"
)

// agreement keeps how the candidate's last decision compared with the
// enforced one (the Decision of Op "compare"); a metric in production.
type agreement struct{ last string }

func (a *agreement) Observe(_ context.Context, d ratelimit.Decision) {
	if d.Op == "compare" {
		a.last = d.Agreement
	}
}

// Trying a sliding log beside the fixed window in force, on the same
// traffic: at the fixed window's edge it lets through a burst that the
// sliding log would have denied. Callers only ever see the fixed window's
// decisions. On Redis (New) the candidate's script rides in the enforced
// one's pipeline, so it costs no extra round trip.
func ExampleConfig_candidate() {
	now := time.Date(2026, 11, 29, 12, 0, 50, 0, time.UTC)
	var clockNs atomic.Int64 // the clock's time in Unix ns: a Clock must be safe for concurrent use
	clockNs.Store(now.UnixNano())
	clock := strategy.ClockFunc(func() time.Time { return time.Unix(0, clockNs.Load()).UTC() })
	obs := &agreement{}
	api, err := ratelimit.New(nil, ratelimit.Config{
		Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Minute,
		Candidate: &ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Minute},
	}, ratelimit.WithClock(clock), ratelimit.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 1; i <= 5; i++ {
		if i == 4 {
			now = now.Add(10 * time.Second) // 12:01:00, a new fixed window
			clockNs.Store(now.UnixNano())
		}
		r, _ := api.Allow(ctx, "user:42")
		fmt.Printf("request %d at %s: allowed=%-5v %s\n", i, now.Format("15:04:05"), r.Allowed, obs.last)
	}
	// Output:
	// request 1 at 12:00:50: allowed=true  both_allow
	// request 2 at 12:00:50: allowed=true  both_allow
	// request 3 at 12:00:50: allowed=false both_deny
	// request 4 at 12:01:00: allowed=true  candidate_only_deny
	// request 5 at 12:01:00: allowed=true  candidate_only_deny
}
