package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
)

// An export is charged up front by its size in rows; when the job fails,
// the rows it did not deliver are given back, so the user's quota pays
// only for the work done.
func ExampleLimiter_RefundN() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	rows, err := ratelimit.New(rdb, ratelimit.Config{
		Algorithm: ratelimit.FixedWindow, Limit: 1000, Window: time.Hour, Timeout: 10 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	const charged = 800
	r, _ := rows.AllowN(ctx, "user:42", charged)
	fmt.Printf("charged %d: allowed=%v remaining=%d\n", charged, r.Allowed, r.Remaining)

	delivered := 300 // then the job fails
	r, err = rows.RefundN(ctx, "user:42", charged-int64(delivered))
	if err != nil {
		panic(err) // Redis failed: RefundN has no failure policy
	}
	fmt.Printf("refunded %d: remaining=%d\n", charged-delivered, r.Remaining) // the state after, as Peek reports it

	// A refund never gives back more than was spent.
	r, _ = rows.RefundN(ctx, "user:42", 10_000)
	fmt.Printf("refunded 10000: remaining=%d of %d\n", r.Remaining, r.Limit)
	// Output:
	// charged 800: allowed=true remaining=200
	// refunded 500: remaining=700
	// refunded 10000: remaining=1000 of 1000
}
