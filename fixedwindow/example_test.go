package fixedwindow_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/strategy"
)

// An hourly export quota of 100 rows, on an embedded miniredis with the
// server's clock fixed. Windows are aligned to the hour: a denial waits
// for the next one, which starts empty.
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 12, 1, 12, 59, 30, 0, time.UTC)) // the Redis server's TIME decides
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	lim, err := fixedwindow.New(rdb, strategy.PerHour(100), strategy.WithPrefix("rl:export:"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, n := range []int64{60, 50} {
		r, _ := lim.AllowN(ctx, "user:42", n)
		fmt.Printf("12:59:30 cost %d: allowed=%v remaining=%d retry after=%v\n", n, r.Allowed, r.Remaining, r.RetryAfter)
	}
	mr.SetTime(time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC))
	r, _ := lim.AllowN(ctx, "user:42", 50)
	fmt.Printf("13:00:00 cost 50: allowed=%v remaining=%d retry after=%v\n", r.Allowed, r.Remaining, r.RetryAfter)
	fmt.Println(mr.Keys()) // one integer per subject
	// Output:
	// 12:59:30 cost 60: allowed=true remaining=40 retry after=0s
	// 12:59:30 cost 50: allowed=false remaining=40 retry after=30s
	// 13:00:00 cost 50: allowed=true remaining=50 retry after=0s
	// [rl:export:fw:{user:42}]
}

// The in-process twin, from a client clock, here fixed. Across a window's
// edge a subject can spend up to twice the limit in a moment: the price
// of one integer per subject.
func ExampleNewLocal() {
	now := time.Date(2026, 12, 1, 12, 0, 59, 0, time.UTC)
	var clockNs atomic.Int64 // the clock's time in Unix ns: a Clock must be safe for concurrent use
	clockNs.Store(now.UnixNano())
	clock := strategy.ClockFunc(func() time.Time { return time.Unix(0, clockNs.Load()).UTC() })
	lim, err := fixedwindow.NewLocal(strategy.PerMinute(2), strategy.WithClock(clock))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 1; i <= 5; i++ {
		if i == 4 {
			now = now.Add(time.Second) // 12:01:00, a new window
			clockNs.Store(now.UnixNano())
		}
		r, _ := lim.AllowN(ctx, "user:42", 1)
		fmt.Printf("%s: allowed=%-5v remaining=%d retry after=%v\n", now.Format("15:04:05"), r.Allowed, r.Remaining, r.RetryAfter)
	}
	// Output:
	// 12:00:59: allowed=true  remaining=1 retry after=0s
	// 12:00:59: allowed=true  remaining=0 retry after=0s
	// 12:00:59: allowed=false remaining=0 retry after=1s
	// 12:01:00: allowed=true  remaining=1 retry after=0s
	// 12:01:00: allowed=true  remaining=0 retry after=0s
}
