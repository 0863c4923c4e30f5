package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ratekit/ratelimit"
)

// A client of a rate-limited API waits for its turn instead of being
// denied: here 1 call per 20ms, so the second and third calls each sleep
// about 20ms (plus jitter) before they pass.
func ExampleLimiter_Wait() {
	limiter, err := ratelimit.New(nil, ratelimit.Config{
		Algorithm: ratelimit.SlidingLog,
		Limit:     1,
		Window:    20 * time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 1; i <= 3; i++ {
		r, err := limiter.Wait(ctx, "upstream-api")
		if err != nil {
			panic(err)
		}
		fmt.Printf("call %d: allowed=%v\n", i, r.Allowed)
	}

	// A request larger than the capacity can never pass: an error at once.
	_, err = limiter.WaitN(ctx, "upstream-api", 2)
	fmt.Println(err)

	// So is a wait that would outlast the context's deadline.
	hourly, _ := ratelimit.New(nil, ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Hour})
	hourly.Allow(ctx, "upstream-api")
	_, err = hourly.Wait(ctx, "upstream-api")
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// call 1: allowed=true
	// call 2: allowed=true
	// call 3: allowed=true
	// ratelimit: invalid cost: WaitN: n = 2 exceeds the capacity 1, so it can never pass
	// true
}
