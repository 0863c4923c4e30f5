package lease_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/lease"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// A hot subject decided in process: the first decisions lease small
// blocks, the next ones grow with the demand, and most decisions make no
// Redis call. ratelimit.Wrap adds the facade's failure policy, timeout and
// observer around it.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	clock := time.UnixMilli(1_700_000_000_000) // a fixed clock: deterministic output
	now := strategy.ClockFunc(func() time.Time { return clock })

	lim := strategy.Limit{Limit: 1000, Window: time.Minute}
	l, err := lease.New(lim, func(lim strategy.Limit) (strategy.Strategy, error) {
		return slidinglog.New(rdb, lim, strategy.WithClock(now))
	}, lease.WithClock(now))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	defer l.Close(ctx) // gives back what the leases hold (the bucket's rule)
	limiter, err := ratelimit.Wrap(l, ratelimit.Config{Name: "tenant-api"})
	if err != nil {
		panic(err)
	}
	allowed := 0
	for range 100 {
		if res, err := limiter.Allow(ctx, "tenant:7"); err == nil && res.Allowed {
			allowed++
		}
	}
	st := l.Stats()
	fmt.Printf("lifetime %v, %d allowed, %d leases of %d units, %d decided in process\n",
		l.Lifetime(), allowed, st.Leases, st.Taken, st.Local)
	// Output:
	// lifetime 1.2s, 100 allowed, 10 leases of 118 units, 90 decided in process
}
