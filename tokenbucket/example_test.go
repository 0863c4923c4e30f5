package tokenbucket_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

// 10 requests a second with bursts of up to 20, on an embedded miniredis
// with the server's clock fixed: an idle client may spend its whole burst
// at once, then gets a token every 100ms.
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

	lim, err := tokenbucket.New(rdb, strategy.Limit{Limit: 10, Window: time.Second, Burst: 20})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	decide := func(after time.Duration, n int64) {
		now = now.Add(after)
		mr.SetTime(now)
		r, _ := lim.AllowN(ctx, "api-key:7", n)
		fmt.Printf("+%-5v cost %2d: allowed=%-5v remaining=%2d retry after=%v\n", after, n, r.Allowed, r.Remaining, r.RetryAfter)
	}
	decide(0, 20)                   // the whole burst
	decide(0, 1)                    // empty: the next token in 100ms
	decide(250*time.Millisecond, 2) // 2.5 tokens refilled
	decide(0, 1)                    // half a token left
	// Output:
	// +0s    cost 20: allowed=true  remaining= 0 retry after=0s
	// +0s    cost  1: allowed=false remaining= 0 retry after=100ms
	// +250ms cost  2: allowed=true  remaining= 0 retry after=0s
	// +0s    cost  1: allowed=false remaining= 0 retry after=50ms
}

// The in-process twin, from a client clock, here fixed. A request larger
// than the bucket can never pass: RetryAfter is strategy.Never.
func ExampleNewLocal() {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var clockNs atomic.Int64 // the clock's time in Unix ns: a Clock must be safe for concurrent use
	clockNs.Store(now.UnixNano())
	clock := strategy.ClockFunc(func() time.Time { return time.Unix(0, clockNs.Load()).UTC() })
	lim, err := tokenbucket.NewLocal(strategy.Limit{Limit: 10, Window: time.Second, Burst: 20}, strategy.WithClock(clock))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	r, _ := lim.AllowN(ctx, "api-key:7", 15)
	fmt.Printf("cost 15: allowed=%v remaining=%d retry after=%v\n", r.Allowed, r.Remaining, r.RetryAfter)
	r, _ = lim.AllowN(ctx, "api-key:7", 10)
	fmt.Printf("cost 10: allowed=%v remaining=%d retry after=%v\n", r.Allowed, r.Remaining, r.RetryAfter)
	r, _ = lim.AllowN(ctx, "api-key:7", 21)
	fmt.Printf("cost 21: allowed=%v never=%v\n", r.Allowed, r.RetryAfter == strategy.Never)
	now = now.Add(2 * time.Second)
	clockNs.Store(now.UnixNano())
	r, _ = lim.Peek(ctx, "api-key:7")
	fmt.Printf("2s later: remaining=%d of %d\n", r.Remaining, r.Limit)
	// Output:
	// cost 15: allowed=true remaining=5 retry after=0s
	// cost 10: allowed=false remaining=5 retry after=500ms
	// cost 21: allowed=false never=true
	// 2s later: remaining=20 of 20
}
