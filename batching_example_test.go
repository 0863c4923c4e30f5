package ratelimit_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
)

// New batches concurrent decisions on a go-redis client with
// ContextTimeoutEnabled by default (they share pipelines), and
// WithoutBatching sends each alone: either way exactly the limit, 100 of
// 640 concurrent requests, is allowed.
func ExampleWithoutBatching() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()

	cfg := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 100, Window: time.Minute, Timeout: 10 * time.Second}
	for _, mode := range []struct {
		name string
		opts []ratelimit.Option
	}{{"batched (the default)", nil}, {"WithoutBatching", []ratelimit.Option{ratelimit.WithoutBatching()}}} {
		cfg.Prefix = fmt.Sprintf("rl:%d:", len(mode.opts)) // each its own keys
		l, err := ratelimit.New(rdb, cfg, mode.opts...)
		if err != nil {
			panic(err)
		}
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for range 10 {
					if r, err := l.Allow(context.Background(), "api-key:7"); err == nil && r.Allowed && !r.Degraded {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		fmt.Printf("%s: %d of 640 allowed\n", mode.name, allowed.Load())
	}
	// Output:
	// batched (the default): 100 of 640 allowed
	// WithoutBatching: 100 of 640 allowed
}
