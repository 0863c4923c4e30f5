package gcra_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/gcra"
	"github.com/ratekit/ratelimit/strategy"
)

// 5 requests a second, bursts of 5, on an embedded miniredis with the
// server's clock fixed: the token bucket's decisions from one stored
// instant per subject (its theoretical arrival time).
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	mr.SetTime(now) // the Redis server's TIME decides
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	lim, err := gcra.New(rdb, strategy.PerSecond(5))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 1; i <= 6; i++ {
		r, _ := lim.AllowN(ctx, "ip:192.0.2.1", 1)
		fmt.Printf("request %d: allowed=%-5v remaining=%d retry after=%v\n", i, r.Allowed, r.Remaining, r.RetryAfter)
	}
	mr.SetTime(now.Add(200 * time.Millisecond)) // one emission interval later
	r, _ := lim.AllowN(ctx, "ip:192.0.2.1", 1)
	fmt.Printf("+200ms:    allowed=%-5v remaining=%d retry after=%v\n", r.Allowed, r.Remaining, r.RetryAfter)
	fmt.Println(mr.Keys())
	// Output:
	// request 1: allowed=true  remaining=4 retry after=0s
	// request 2: allowed=true  remaining=3 retry after=0s
	// request 3: allowed=true  remaining=2 retry after=0s
	// request 4: allowed=true  remaining=1 retry after=0s
	// request 5: allowed=true  remaining=0 retry after=0s
	// request 6: allowed=false remaining=0 retry after=200ms
	// +200ms:    allowed=true  remaining=0 retry after=0s
	// [rl:gc:{ip:192.0.2.1}]
}

// The in-process twin, from a client clock, here fixed: a burst of 3
// on a rate of 1 a second; after the burst, one request a second.
func ExampleNewLocal() {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := start
	var clockNs atomic.Int64 // the clock's time in Unix ns: a Clock must be safe for concurrent use
	clockNs.Store(now.UnixNano())
	clock := strategy.ClockFunc(func() time.Time { return time.Unix(0, clockNs.Load()).UTC() })
	lim, err := gcra.NewLocal(strategy.Limit{Limit: 1, Window: time.Second, Burst: 3}, strategy.WithClock(clock))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, at := range []time.Duration{0, 0, 0, 0, 500 * time.Millisecond, time.Second} {
		now = start.Add(at)
		clockNs.Store(now.UnixNano())
		r, _ := lim.AllowN(ctx, "ip:192.0.2.1", 1)
		fmt.Printf("t=%-5v allowed=%-5v remaining=%d retry after=%v\n", at, r.Allowed, r.Remaining, r.RetryAfter)
	}
	// Output:
	// t=0s    allowed=true  remaining=2 retry after=0s
	// t=0s    allowed=true  remaining=1 retry after=0s
	// t=0s    allowed=true  remaining=0 retry after=0s
	// t=0s    allowed=false remaining=0 retry after=1s
	// t=500ms allowed=false remaining=0 retry after=500ms
	// t=1s    allowed=true  remaining=0 retry after=0s
}
