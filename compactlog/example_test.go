package compactlog_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/strategy"
)

// A login limit of 3 per minute, exact, on an embedded miniredis with the
// server's clock fixed: the fourth attempt waits until the first leaves
// the window.
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	mr.SetTime(now)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	lim, err := compactlog.New(rdb, strategy.PerMinute(3), strategy.WithPrefix("rl:login:"))
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
	v, _ := mr.Get(lim.Key("user:42"))
	fmt.Printf("key %s: %d bytes, %d per unit\n", lim.Key("user:42"), len(v), v[0])
	// Output:
	// attempt 1: allowed=true remaining=2 retry after=0s
	// attempt 2: allowed=true remaining=1 retry after=0s
	// attempt 3: allowed=true remaining=0 retry after=0s
	// attempt 4: allowed=false remaining=0 retry after=30s
	// key rl:login:cl:{user:42}: 19 bytes, 2 per unit
}
