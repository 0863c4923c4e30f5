package batch_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/batch"
)

// Turning batching on: wrap the go-redis client and pass the batch client
// wherever a client goes. 200 concurrent requests for one subject share
// pipelines; exactly the limit is allowed, as without batching.
func Example() {
	mr := miniredis.NewMiniRedis() // any Redis: *redis.Client, *redis.ClusterClient, *redis.Ring
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))

	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	rdb, err := batch.New(client) // the one line
	if err != nil {
		panic(err)
	}
	defer rdb.Close() // stops the batch client (first), not the go-redis client

	limiter, err := ratelimit.New(rdb, ratelimit.Config{
		Algorithm: ratelimit.FixedWindow,
		Limit:     100,
		Window:    time.Minute,
		Timeout:   5 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 200 {
		wg.Go(func() {
			res, err := limiter.Allow(context.Background(), "api-key:7")
			if err != nil || res.Degraded {
				panic(fmt.Sprint(res, err))
			}
			if res.Allowed {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Printf("allowed %d of 200\n", allowed)
	// Output:
	// allowed 100 of 200
}
