package slidinglog_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// Three logins a minute, exact, on an embedded miniredis with the
// server's clock fixed: the fourth attempt waits until the first leaves
// the window, and the log holds one entry per unit.
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

	lim, err := slidinglog.New(rdb, strategy.PerMinute(3), strategy.WithPrefix("rl:login:"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 1; i <= 4; i++ {
		r, err := lim.AllowN(ctx, "user:42", 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("attempt %d: allowed=%v remaining=%d retry after=%v\n", i, r.Allowed, r.Remaining, r.RetryAfter)
		now = now.Add(10 * time.Second)
		mr.SetTime(now)
	}
	fmt.Println(mr.Keys()) // one sorted set per subject
	// Output:
	// attempt 1: allowed=true remaining=2 retry after=0s
	// attempt 2: allowed=true remaining=1 retry after=0s
	// attempt 3: allowed=true remaining=0 retry after=0s
	// attempt 4: allowed=false remaining=0 retry after=30s
	// [rl:login:sl:{user:42}]
}

// The in-process twin makes the same decisions from a client clock, here
// fixed: a request of cost 2 waits until 2 units have left the window.
func ExampleNewLocal() {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := start
	var clockNs atomic.Int64 // the clock's time in Unix ns: a Clock must be safe for concurrent use
	clockNs.Store(now.UnixNano())
	clock := strategy.ClockFunc(func() time.Time { return time.Unix(0, clockNs.Load()).UTC() })
	lim, err := slidinglog.NewLocal(strategy.PerMinute(3), strategy.WithClock(clock))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	decide := func(after time.Duration, n int64) {
		now = now.Add(after)
		clockNs.Store(now.UnixNano())
		r, _ := lim.AllowN(ctx, "user:42", n)
		fmt.Printf("t=%-5v cost %d: allowed=%-5v remaining=%d retry after=%v\n", now.Sub(start), n, r.Allowed, r.Remaining, r.RetryAfter)
	}
	decide(0, 1)
	decide(20*time.Second, 2) // full
	decide(0, 1)              // until the unit of t=0 leaves
	decide(40*time.Second, 2) // 1 left; the next leaves at t=1m20s
	decide(20*time.Second, 2)
	// Output:
	// t=0s    cost 1: allowed=true  remaining=2 retry after=0s
	// t=20s   cost 2: allowed=true  remaining=0 retry after=0s
	// t=20s   cost 1: allowed=false remaining=0 retry after=40s
	// t=1m0s  cost 2: allowed=false remaining=1 retry after=20s
	// t=1m20s cost 2: allowed=true  remaining=1 retry after=0s
}
