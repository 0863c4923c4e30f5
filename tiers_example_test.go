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

// Plans as tiers of one limiter: free users get 3 searches a minute, pro
// users 10. A subject's usage is shared by every tier, so a user who
// upgrades mid-window keeps what they used and gets the difference at once.
func ExampleLimiter_Tier() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	search, err := ratelimit.New(rdb, ratelimit.Config{
		Algorithm: ratelimit.SlidingLog, Limit: 3, Window: time.Minute, // the default, for "free" and unknown plans
		Tiers:   map[string]ratelimit.Limit{"pro": {Limit: 10}}, // Window 0: the policy's
		Timeout: 10 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	decide := func(plan string) {
		var st strategy.Strategy = search
		if t, err := search.Tier(plan); err == nil { // an unknown plan gets the default limit
			st = t
		}
		r, _ := st.AllowN(ctx, "user:42", 1)
		fmt.Printf("%-4s allowed=%v remaining=%d of %d\n", plan, r.Allowed, r.Remaining, r.Limit)
	}
	for range 4 {
		decide("free")
	}
	decide("pro") // upgraded: the 3 units used still count, now against 10
	_, err = search.Tier("gold")
	fmt.Println(err)
	// Output:
	// free allowed=true remaining=2 of 3
	// free allowed=true remaining=1 of 3
	// free allowed=true remaining=0 of 3
	// free allowed=false remaining=0 of 3
	// pro  allowed=true remaining=6 of 10
	// ratelimit: invalid option: no tier "gold"; the tiers are "pro"
}
