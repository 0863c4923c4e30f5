package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
)

// lastCause keeps the cause of the last decision the failure policy made.
type lastCause struct{ err error }

func (o *lastCause) Observe(_ context.Context, d ratelimit.Decision) { o.err = d.Cause }

// Two limiters on one Redis share a circuit breaker, so that they detect
// an outage together: after 2 failures in a row, both stop calling Redis
// for a minute and their failure policies decide at once.
func ExampleNewBreaker() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	breaker, err := ratelimit.NewBreaker(2, time.Minute)
	if err != nil {
		panic(err)
	}
	cfg := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Minute, Timeout: 10 * time.Second}
	cfg.OnFailure = ratelimit.FailClosed
	obs := &lastCause{}
	login, _ := ratelimit.New(rdb, cfg, ratelimit.WithBreaker(breaker), ratelimit.WithObserver(obs))
	cfg.OnFailure = ratelimit.FailOpen
	search, _ := ratelimit.New(rdb, cfg, ratelimit.WithBreaker(breaker), ratelimit.WithObserver(obs))

	ctx := context.Background()
	decide := func(name string, l *ratelimit.Limiter) {
		r, _ := l.Allow(ctx, "user:42")
		fmt.Printf("%-6s allowed=%-5v degraded=%-5v breaker %-6v cause: %v\n",
			name, r.Allowed, r.Degraded, breaker.State(), obs.err)
	}
	decide("login", login)
	mr.SetError("LOADING Redis is loading the dataset in memory") // Redis cannot serve
	decide("login", login)
	decide("search", search) // the second failure in a row opens the breaker
	mr.SetError("")          // Redis is back, but the breaker is open for a minute
	decide("login", login)
	decide("search", search)
	// Output:
	// login  allowed=true  degraded=false breaker closed cause: <nil>
	// login  allowed=false degraded=true  breaker closed cause: ratelimit: backend error: LOADING Redis is loading the dataset in memory
	// search allowed=true  degraded=true  breaker open   cause: ratelimit: backend error: LOADING Redis is loading the dataset in memory
	// login  allowed=false degraded=true  breaker open   cause: ratelimit: backend error: circuit breaker open, Redis not called
	// search allowed=true  degraded=true  breaker open   cause: ratelimit: backend error: circuit breaker open, Redis not called
}
