package slidingcounter_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/slidingcounter"
	"github.com/ratekit/ratelimit/strategy"
)

// 10 uploads a minute, on an embedded miniredis with the server's clock
// fixed. Half-way through the next window, half of the previous window's
// count still weighs: the estimate of a sliding window from two integers.
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 12, 1, 12, 0, 10, 0, time.UTC)) // the Redis server's TIME decides
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	lim, err := slidingcounter.New(rdb, strategy.PerMinute(10), strategy.WithPrefix("rl:upload:"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	r, _ := lim.AllowN(ctx, "user:42", 10)
	fmt.Printf("12:00:10 cost 10: allowed=%v remaining=%d\n", r.Allowed, r.Remaining)
	r, _ = lim.AllowN(ctx, "user:42", 1)
	fmt.Printf("12:00:10 cost 1:  allowed=%v retry after=%v\n", r.Allowed, r.RetryAfter)

	mr.SetTime(time.Date(2026, 12, 1, 12, 1, 30, 0, time.UTC)) // 10 × (30s left / 60s) = 5 still count
	r, _ = lim.AllowN(ctx, "user:42", 1)
	fmt.Printf("12:01:30 cost 1:  allowed=%v remaining=%d\n", r.Allowed, r.Remaining)
	// Output:
	// 12:00:10 cost 10: allowed=true remaining=0
	// 12:00:10 cost 1:  allowed=false retry after=56s
	// 12:01:30 cost 1:  allowed=true remaining=4
}

// The in-process twin, from a client clock, here fixed. A denial's
// RetryAfter is when the previous window's weighted count has fallen far
// enough: 4 per minute all spent at 12:00:00 weigh 3 at 12:01:15, leaving
// room for 1.
func ExampleNewLocal() {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var clockNs atomic.Int64 // the clock's time in Unix ns: a Clock must be safe for concurrent use
	clockNs.Store(now.UnixNano())
	clock := strategy.ClockFunc(func() time.Time { return time.Unix(0, clockNs.Load()).UTC() })
	lim, err := slidingcounter.NewLocal(strategy.PerMinute(4), strategy.WithClock(clock))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, step := range []time.Duration{0, 0, 0, 0, 0, 45 * time.Second, 30 * time.Second, 0} {
		now = now.Add(step)
		clockNs.Store(now.UnixNano())
		r, _ := lim.AllowN(ctx, "user:42", 1)
		fmt.Printf("%s: allowed=%-5v remaining=%d retry after=%v\n", now.Format("15:04:05"), r.Allowed, r.Remaining, r.RetryAfter)
	}
	// Output:
	// 12:00:00: allowed=true  remaining=3 retry after=0s
	// 12:00:00: allowed=true  remaining=2 retry after=0s
	// 12:00:00: allowed=true  remaining=1 retry after=0s
	// 12:00:00: allowed=true  remaining=0 retry after=0s
	// 12:00:00: allowed=false remaining=0 retry after=1m15s
	// 12:00:45: allowed=false remaining=0 retry after=30s
	// 12:01:15: allowed=true  remaining=0 retry after=0s
	// 12:01:15: allowed=false remaining=0 retry after=15s
}
