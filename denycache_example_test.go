package ratelimit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/strategy"
)

// A client hammering past its limit: once Redis has denied it, this
// process denies it too, without a round trip, until its RetryAfter has
// passed.
func ExampleWithDenyCache() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var clockNs atomic.Int64 // the clock's time in Unix ns: a Clock must be safe for concurrent use
	clockNs.Store(now.UnixNano())
	clock := strategy.ClockFunc(func() time.Time { return time.Unix(0, clockNs.Load()).UTC() }) // the cache's clock, and Redis's

	api, err := ratelimit.New(rdb, ratelimit.Config{
		Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Minute, Timeout: 10 * time.Second,
	}, ratelimit.WithDenyCache(10_000), ratelimit.WithClock(clock))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 1; i <= 5; i++ {
		before := mr.CommandCount()
		r, _ := api.Allow(ctx, "api-key:7")
		fmt.Printf("request %d: allowed=%v retry after=%v, Redis called: %v\n",
			i, r.Allowed, r.RetryAfter, mr.CommandCount() > before)
		if i == 4 {
			now = now.Add(time.Minute) // the next window: the cached denial has expired
			clockNs.Store(now.UnixNano())
		}
	}
	// Output:
	// request 1: allowed=true retry after=0s, Redis called: true
	// request 2: allowed=true retry after=0s, Redis called: true
	// request 3: allowed=false retry after=1m0s, Redis called: true
	// request 4: allowed=false retry after=1m0s, Redis called: false
	// request 5: allowed=true retry after=0s, Redis called: true
}
