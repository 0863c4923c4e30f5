package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
)

// The README's quickstart: five logins a minute per user, exact, on Redis.
func Example() {
	mr := miniredis.NewMiniRedis() // any Redis: *redis.Client, *redis.ClusterClient, *redis.Ring
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)) // the Redis server's clock decides
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	limiter, err := ratelimit.New(rdb, ratelimit.Config{
		Algorithm: ratelimit.SlidingLog,
		Limit:     5,
		Window:    time.Minute,
		Prefix:    "rl:login:",
		Timeout:   time.Second, // the longest a decision waits on Redis; default 250ms
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 1; i <= 6; i++ {
		res, err := limiter.Allow(ctx, "user:42")
		if err != nil {
			panic(err) // bad input; a Redis outage is a Result with Degraded set, by the failure policy
		}
		fmt.Printf("login %d: allowed=%v remaining=%d retry after=%v\n", i, res.Allowed, res.Remaining, res.RetryAfter)
		mr.SetTime(time.Date(2026, 11, 29, 12, 0, i*10, 0, time.UTC))
	}
	// Output:
	// login 1: allowed=true remaining=4 retry after=0s
	// login 2: allowed=true remaining=3 retry after=0s
	// login 3: allowed=true remaining=2 retry after=0s
	// login 4: allowed=true remaining=1 retry after=0s
	// login 5: allowed=true remaining=0 retry after=0s
	// login 6: allowed=false remaining=0 retry after=10s
}
