package multilimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/multilimit"
	"github.com/ratekit/ratelimit/strategy"
)

// Three requests a second and five a minute, all or nothing: the requests
// the per-second rule denies do not use up the per-minute quota.
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	mr.SetTime(start) // the Redis server's clock decides
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	limiter, err := multilimit.New(rdb, []multilimit.Rule{
		{Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(3)},
		{Algorithm: strategy.FixedWindow, Limit: strategy.PerMinute(5)},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i, at := range []time.Duration{0, 0, 0, 0, 0, time.Second, time.Second, time.Second} {
		mr.SetTime(start.Add(at))
		res, err := limiter.AllowN(ctx, "user:42", 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("t=%v request %d: allowed=%v remaining=%d of %d, retry after %v\n",
			at, i+1, res.Allowed, res.Remaining, res.Limit, res.RetryAfter)
	}
	// Output:
	// t=0s request 1: allowed=true remaining=2 of 3, retry after 0s
	// t=0s request 2: allowed=true remaining=1 of 3, retry after 0s
	// t=0s request 3: allowed=true remaining=0 of 3, retry after 0s
	// t=0s request 4: allowed=false remaining=0 of 3, retry after 1s
	// t=0s request 5: allowed=false remaining=0 of 3, retry after 1s
	// t=1s request 6: allowed=true remaining=1 of 5, retry after 0s
	// t=1s request 7: allowed=true remaining=0 of 5, retry after 0s
	// t=1s request 8: allowed=false remaining=0 of 5, retry after 59s
}

// AllowNEach tells which rule denied, e.g. for one RateLimit header per
// policy.
func ExampleLimiter_AllowNEach() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	clock := strategy.ClockFunc(func() time.Time { return time.Date(2026, 11, 29, 12, 30, 0, 0, time.UTC) })

	limiter, err := multilimit.New(rdb, []multilimit.Rule{
		{Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(10)},
		{Algorithm: strategy.FixedWindow, Limit: strategy.PerHour(12)},
	}, strategy.WithClock(clock))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	res, each, err := limiter.AllowNEach(ctx, "user:42", 8)
	if err != nil {
		panic(err)
	}
	fmt.Printf("cost 8: allowed=%v remaining=%d\n", res.Allowed, res.Remaining)
	res, each, err = limiter.AllowNEach(ctx, "user:42", 5)
	if err != nil {
		panic(err)
	}
	fmt.Printf("cost 5: allowed=%v retry after %v\n", res.Allowed, res.RetryAfter)
	for i, r := range limiter.Rules() {
		fmt.Printf("%v: allowed=%v remaining=%d retry after %v\n", r, each[i].Allowed, each[i].Remaining, each[i].RetryAfter)
	}
	// Output:
	// cost 8: allowed=true remaining=2
	// cost 5: allowed=false retry after 30m0s
	// sliding_log 10/1s: allowed=false remaining=2 retry after 1s
	// fixed_window 12/1h0m0s: allowed=false remaining=4 retry after 30m0s
}
