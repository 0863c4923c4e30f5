package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/strategy"
)

// One hot subject decided from leases: each script call takes a block of
// units that this process then spends without a round trip. The subject
// never gets more than its limit; a little less, here with time standing
// still: the bucket is kept with its burst less one lease lifetime's
// refill, and a block is leased whole or not at all (docs/lease.md). In a
// policy document: "lease": true.
func ExampleConfig_lease() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	clock := strategy.ClockFunc(func() time.Time { return now })

	api, err := ratelimit.New(rdb, ratelimit.Config{
		Algorithm: ratelimit.TokenBucket, Limit: 1000, Window: time.Minute,
		Lease:   true,
		Timeout: 10 * time.Second,
	}, ratelimit.WithClock(clock))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	before := mr.CommandCount()
	allowed := 0
	for range 2000 {
		if r, _ := api.Allow(ctx, "tenant:hot"); r.Allowed {
			allowed++
		}
	}
	fmt.Printf("allowed %d of 2000 (limit 1000) in %d Redis commands\n", allowed, mr.CommandCount()-before)
	// Output:
	// allowed 883 of 2000 (limit 1000) in 75 Redis commands
}
