package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
)

// A hot subject spread over 4 keys: on a Redis Cluster each shard's key
// hashes to another slot, so one tenant's traffic is served by several
// nodes. The subject still gets exactly its limit.
func ExampleConfig_shards() {
	mr := miniredis.NewMiniRedis() // or a *redis.ClusterClient
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	ingest, err := ratelimit.New(rdb, ratelimit.Config{
		Algorithm: ratelimit.GCRA, Limit: 100, Window: time.Second,
		Shards:  4, // 25 a second each
		Timeout: 10 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	allowed := 0
	for range 120 {
		if r, _ := ingest.Allow(ctx, "tenant:big"); r.Allowed {
			allowed++
		}
	}
	p, _ := ingest.Peek(ctx, "tenant:big") // exact: reads every shard
	fmt.Printf("allowed %d of 120; remaining %d of %d\n", allowed, p.Remaining, p.Limit)
	fmt.Println(mr.Keys())
	// Output:
	// allowed 100 of 120; remaining 0 of 100
	// [rl:gc:{tenant:big#0} rl:gc:{tenant:big#1} rl:gc:{tenant:big#2} rl:gc:{tenant:big#3}]
}
