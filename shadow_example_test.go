package ratelimit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/strategy"
)

// Shadow mode tries a new limit on live traffic before enforcing it:
// requests over the limit are let through, marked Shadow, with the
// Remaining and RetryAfter enforcement would have sent.
func ExampleConfig_shadow() {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var clockNs atomic.Int64 // the clock's time in Unix ns: a Clock must be safe for concurrent use
	clockNs.Store(now.UnixNano())
	clock := strategy.ClockFunc(func() time.Time { return time.Unix(0, clockNs.Load()).UTC() })
	export, err := ratelimit.New(nil, ratelimit.Config{
		Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Minute,
		Mode: "shadow", // the default, "", is "enforce"
	}, ratelimit.WithClock(clock))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		r, _ := export.Allow(ctx, "user:42")
		fmt.Printf("export %d: allowed=%v shadow=%v remaining=%d retry after=%v\n",
			i, r.Allowed, r.Shadow, r.Remaining, r.RetryAfter)
		now = now.Add(10 * time.Second)
		clockNs.Store(now.UnixNano())
	}
	// Output:
	// export 1: allowed=true shadow=false remaining=1 retry after=0s
	// export 2: allowed=true shadow=false remaining=0 retry after=0s
	// export 3: allowed=true shadow=true remaining=0 retry after=40s
}
