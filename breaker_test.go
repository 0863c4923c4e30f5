package ratelimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

// refusing is a strategy whose backend refuses every call at once, counting
// the calls that reach it.
func refusing(calls *atomic.Int64) stalled {
	return stalled{honours: true, until: func(context.Context) error {
		calls.Add(1)
		return connReset
	}}
}

// Which clock times a breaker's cool-down: the limiter's for the breaker it
// builds itself, the one given to breaker.New for a shared one, the
// monotonic clock otherwise.
func TestBreakerClock(t *testing.T) {
	ctx := context.Background()
	t.Run("a limiter's own breaker reads WithClock", func(t *testing.T) {
		var calls atomic.Int64
		clock := conformance.NewClock(conformance.Epoch)
		rec := &decisionLog{}
		l, err := ratelimit.Wrap(refusing(&calls), ratelimit.Config{OnFailure: ratelimit.FailClosed},
			ratelimit.WithClock(clock), ratelimit.WithObserver(rec))
		if err != nil {
			t.Fatal(err)
		}
		for range breaker.DefaultFailures {
			l.Allow(ctx, "k")
		}
		want := func(name string, retry time.Duration, state breaker.State, calls0 int64) {
			t.Helper()
			r, err := l.Allow(ctx, "k")
			if err != nil || r.Allowed || !r.Degraded || r.RetryAfter != retry {
				t.Fatalf("%s: %+v, %v; want a degraded denial, RetryAfter %v", name, r, err, retry)
			}
			if d := rec.last(t); d.Breaker != state {
				t.Fatalf("%s: breaker %v, want %v", name, d.Breaker, state)
			}
			if got := calls.Load(); got != calls0 {
				t.Fatalf("%s: %d calls reached the strategy, want %d", name, got, calls0)
			}
		}
		n := int64(breaker.DefaultFailures)
		want("just opened", breaker.DefaultCooldown, breaker.Open, n)
		clock.Advance(breaker.DefaultCooldown - time.Millisecond)
		want("1ms before the cool-down ends", time.Millisecond, breaker.Open, n)
		clock.Advance(time.Millisecond)
		want("the probe, failing", breaker.DefaultCooldown, breaker.Open, n+1)
	})
	t.Run("a shared breaker keeps its own clock", func(t *testing.T) {
		var calls atomic.Int64
		clock := conformance.NewClock(conformance.Epoch)
		b := mustBreaker(t, 1, time.Hour) // monotonic
		l, err := ratelimit.Wrap(refusing(&calls), ratelimit.Config{OnFailure: ratelimit.FailOpen},
			ratelimit.WithClock(clock), ratelimit.WithBreaker(b))
		if err != nil {
			t.Fatal(err)
		}
		l.Allow(ctx, "k")
		clock.Advance(2 * time.Hour) // the limiter's clock, not the breaker's
		if r, _ := l.Allow(ctx, "k"); !r.Degraded || b.State() != breaker.Open || calls.Load() != 1 {
			t.Fatalf("after the limiter's clock passed the cool-down: %+v, breaker %v, %d calls; want open, 1 call", r, b.State(), calls.Load())
		}
	})
	t.Run("a shared breaker on the limiters' clock", func(t *testing.T) {
		var calls atomic.Int64
		var ns atomic.Int64 // a Clock must be safe for concurrent use
		ns.Store(conformance.Epoch.UnixNano())
		clock := strategy.ClockFunc(func() time.Time { return time.Unix(0, ns.Load()) })
		b := mustBreaker(t, 1, time.Hour, nil, breaker.WithClock(nil), breaker.WithClock(clock)) // nil ignored
		opts := []ratelimit.Option{ratelimit.WithClock(clock), ratelimit.WithBreaker(b)}
		l1, err := ratelimit.Wrap(refusing(&calls), ratelimit.Config{OnFailure: ratelimit.FailClosed}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := ratelimit.Wrap(refusing(&calls), ratelimit.Config{OnFailure: ratelimit.FailClosed}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		l1.Allow(ctx, "k") // opens it for both
		ns.Add(int64(59 * time.Minute))
		if r, _ := l2.Allow(ctx, "k"); r.RetryAfter != time.Minute || calls.Load() != 1 {
			t.Fatalf("59m into a 1h cool-down: %+v, %d calls; want RetryAfter 1m, 1 call", r, calls.Load())
		}
		ns.Add(int64(time.Minute))
		if s := b.State(); s != breaker.HalfOpen {
			t.Fatalf("after the cool-down: %v, want half-open", s)
		}
	})
	t.Run("the monotonic clock when none is set", func(t *testing.T) {
		b := mustBreaker(t, 1, time.Millisecond, nil, breaker.WithClock(nil))
		var calls atomic.Int64
		l, err := ratelimit.Wrap(refusing(&calls), ratelimit.Config{OnFailure: ratelimit.FailOpen}, ratelimit.WithBreaker(b))
		if err != nil {
			t.Fatal(err)
		}
		l.Allow(ctx, "k")
		if s := b.State(); s == breaker.Closed {
			t.Fatalf("after a failure: %v, want open", s)
		}
		// real time passes the cool-down: the breaker needs no client clock
		eventually(t, func() bool { return b.State() == breaker.HalfOpen }, "the breaker to half-open by the monotonic clock")
	})
}
