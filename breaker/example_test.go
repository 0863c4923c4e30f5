package breaker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/strategy"
)

// lastCause keeps the cause of the last decision the failure policy made.
type lastCause struct{ err error }

func (o *lastCause) Observe(_ context.Context, d ratelimit.Decision) { o.err = d.Cause }

// Two limiters on one Redis share a circuit breaker, so that they detect
// an outage together: after 2 failures in a row, both stop calling Redis
// for a minute and their failure policies decide at once. The breaker and
// the limiters read one clock, so FailClosed's RetryAfter counts down the
// cool-down as the clock is stepped, and the first decision after it
// probes Redis and closes the breaker.
func ExampleNew() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	var clockNs atomic.Int64 // the clock's time in Unix ns: a Clock must be safe for concurrent use
	clockNs.Store(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixNano())
	clock := strategy.ClockFunc(func() time.Time { return time.Unix(0, clockNs.Load()).UTC() })
	step := func(d time.Duration) { clockNs.Add(int64(d)) }

	b, err := breaker.New(2, time.Minute, breaker.WithClock(clock))
	if err != nil {
		panic(err)
	}
	cfg := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Minute, Timeout: 10 * time.Second}
	cfg.OnFailure = ratelimit.FailClosed
	obs := &lastCause{}
	opts := []ratelimit.Option{ratelimit.WithClock(clock), ratelimit.WithBreaker(b), ratelimit.WithObserver(obs)}
	login, _ := ratelimit.New(rdb, cfg, opts...)
	cfg.OnFailure = ratelimit.FailOpen
	search, _ := ratelimit.New(rdb, cfg, opts...)

	ctx := context.Background()
	decide := func(name string, l *ratelimit.Limiter) {
		r, _ := l.Allow(ctx, "user:42")
		fmt.Printf("%-6s allowed=%-5v degraded=%-5v retry=%-5v breaker %-9v cause: %v\n",
			name, r.Allowed, r.Degraded, r.RetryAfter, b.State(), obs.err)
	}
	decide("login", login)
	mr.SetError("LOADING Redis is loading the dataset in memory") // Redis cannot serve
	decide("login", login)
	decide("search", search) // the second failure in a row opens the breaker
	mr.SetError("")          // Redis is back, but the breaker is open for a minute
	decide("login", login)
	decide("search", search)
	step(45 * time.Second)
	decide("login", login) // FailClosed: Redis is tried again in 15s
	step(15 * time.Second)
	fmt.Println("breaker", b.State())
	decide("login", login) // the probe: Redis answers, the breaker closes
	// Output:
	// login  allowed=true  degraded=false retry=0s    breaker closed    cause: <nil>
	// login  allowed=false degraded=true  retry=1m0s  breaker closed    cause: ratelimit: backend error: LOADING Redis is loading the dataset in memory
	// search allowed=true  degraded=true  retry=0s    breaker open      cause: ratelimit: backend error: LOADING Redis is loading the dataset in memory
	// login  allowed=false degraded=true  retry=1m0s  breaker open      cause: ratelimit: backend error: circuit breaker open, Redis not called
	// search allowed=true  degraded=true  retry=0s    breaker open      cause: ratelimit: backend error: circuit breaker open, Redis not called
	// login  allowed=false degraded=true  retry=15s   breaker open      cause: ratelimit: backend error: circuit breaker open, Redis not called
	// breaker half-open
	// login  allowed=true  degraded=false retry=0s    breaker closed    cause: <nil>
}
