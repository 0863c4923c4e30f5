package sharded_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/sharded"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// One tenant's 10 requests a minute over 4 keys; on a Redis Cluster each key
// can live on another node.
func Example() {
	mr := miniredis.NewMiniRedis() // or a *redis.ClusterClient
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	l, err := sharded.New(4, strategy.PerMinute(10), func(share strategy.Limit) (strategy.Strategy, error) {
		return slidinglog.New(rdb, share)
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("shards:", l.Limits())
	ctx := context.Background()
	allowed := 0
	for range 12 {
		if r, err := l.AllowN(ctx, "tenant:big", 1); err == nil && r.Allowed {
			allowed++
		}
	}
	p, _ := l.Peek(ctx, "tenant:big")
	fmt.Printf("allowed %d of 12, Peek: remaining %d of %d\n", allowed, p.Remaining, p.Limit)
	fmt.Println(mr.Keys())

	small, _ := sharded.New(6, strategy.PerMinute(4), func(share strategy.Limit) (strategy.Strategy, error) {
		return slidinglog.New(rdb, share)
	})
	fmt.Println("6 shards asked of 4/min:", small.Shards(), "in use")
	// Output:
	// shards: [3/1m0s 3/1m0s 2/1m0s 2/1m0s]
	// allowed 10 of 12, Peek: remaining 0 of 10
	// [rl:sl:{tenant:big#0} rl:sl:{tenant:big#1} rl:sl:{tenant:big#2} rl:sl:{tenant:big#3}]
	// 6 shards asked of 4/min: 4 in use
}
