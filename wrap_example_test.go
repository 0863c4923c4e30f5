package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// exempt is a strategy of your own: it lets some subjects through
// uncounted and asks the strategy it embeds about the others.
type exempt struct {
	strategy.Strategy
	keys map[string]bool
}

func (e exempt) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	if e.keys[key] {
		c := e.Limit().Capacity()
		return strategy.Result{Allowed: true, Limit: c, Remaining: c}, nil
	}
	return e.Strategy.AllowN(ctx, key, n)
}

// Wrap puts a strategy of your own behind a Limiter, with what New would
// add: validation of keys and costs, the failure policy, Timeout and
// breaker, the denial cache, the Observer, Wait, and httplimit.
func ExampleWrap() {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := strategy.ClockFunc(func() time.Time { return now })
	// the strategy it wraps: slidinglog.New on Redis in production
	inner, err := slidinglog.NewLocal(strategy.PerMinute(1), strategy.WithClock(clock))
	if err != nil {
		panic(err)
	}
	api, err := ratelimit.Wrap(exempt{inner, map[string]bool{"health-check": true}},
		ratelimit.Config{Name: "api", OnFailure: ratelimit.FailClosed}) // no Algorithm, Limit or Window: st has them
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, key := range []string{"user:42", "user:42", "health-check", "health-check"} {
		r, _ := api.Allow(ctx, key)
		fmt.Printf("%-12s allowed=%-5v remaining=%d retry after=%v\n", key, r.Allowed, r.Remaining, r.RetryAfter)
	}
	fmt.Println(api.Config().Name, api.Limit())
	// Output:
	// user:42      allowed=true  remaining=0 retry after=0s
	// user:42      allowed=false remaining=0 retry after=1m0s
	// health-check allowed=true  remaining=1 retry after=0s
	// health-check allowed=true  remaining=1 retry after=0s
	// api 1/1m0s
}
