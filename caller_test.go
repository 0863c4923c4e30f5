package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// stalled is a strategy whose backend never answers: each call waits for
// until (the caller's context, or the guard's deadline) and then fails as a
// Redis strategy does, wrapping strategy.ErrBackend around the cause.
type stalled struct {
	honours bool
	until   func(ctx context.Context) error
}

func (s stalled) AllowN(ctx context.Context, _ string, _ int64) (strategy.Result, error) {
	return strategy.Result{}, fmt.Errorf("%w: %w", strategy.ErrBackend, s.until(ctx))
}
func (s stalled) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return s.AllowN(ctx, key, 0)
}
func (s stalled) Reset(ctx context.Context, key string) error {
	_, err := s.AllowN(ctx, key, 0)
	return err
}
func (s stalled) Limit() strategy.Limit { return strategy.Limit{Limit: 5, Window: time.Minute} }
func (s stalled) HonoursContext() bool  { return s.honours }

// untilDone waits for ctx's end and returns its error.
func untilDone(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// untilDeadline waits until ctx's deadline has passed by the clock, and
// then fails as a socket whose read deadline was set to it does: with an
// i/o timeout, possibly before ctx reports its deadline itself.
func untilDeadline(ctx context.Context) error {
	d, ok := ctx.Deadline()
	if !ok {
		return untilDone(ctx)
	}
	time.Sleep(time.Until(d))
	for time.Now().Before(d) {
		time.Sleep(time.Millisecond)
	}
	return errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: i/o timeout")
}

// lateCtx is a context whose deadline has passed by the clock but that
// does not report it yet (its timer has not fired): the moment between a
// socket's i/o timeout and the context's own.
type lateCtx struct {
	context.Context
	d time.Time
}

func (c lateCtx) Deadline() (time.Time, bool) { return c.d, true }

// The caller's own cancellation or deadline is the caller's error: it does
// not wrap strategy.ErrBackend, no failure policy decides, the breaker
// does not count it and the Observer is not told of a Redis failure.
func TestCallerEndsTheCall(t *testing.T) {
	canceled := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	cancelSoon := func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		return ctx, cancel
	}
	shortDeadline := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 20*time.Millisecond)
	}
	lateDeadline := func() (context.Context, context.CancelFunc) {
		ctx := lateCtx{Context: context.Background(), d: time.Now().Add(20 * time.Millisecond)}
		return ctx, func() {}
	}
	for _, tc := range []struct {
		name  string
		ctx   func() (context.Context, context.CancelFunc)
		until func(context.Context) error
		want  error
	}{
		{"canceled before the call", canceled, untilDone, context.Canceled},
		{"canceled during the call", cancelSoon, untilDone, context.Canceled},
		{"deadline during the call", shortDeadline, untilDone, context.DeadlineExceeded},
		{"i/o timeout at the deadline", shortDeadline, untilDeadline, context.DeadlineExceeded},
		{"i/o timeout before the context reports its deadline", lateDeadline, untilDeadline, context.DeadlineExceeded},
	} {
		for _, honours := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/inline=%v", tc.name, honours), func(t *testing.T) {
				rec, b := &decisionLog{}, mustBreaker(t, 1, time.Hour)
				l, err := ratelimit.Wrap(stalled{honours: honours, until: tc.until},
					ratelimit.Config{OnFailure: ratelimit.FailOpen, Timeout: 10 * time.Second},
					ratelimit.WithObserver(rec), ratelimit.WithBreaker(b))
				if err != nil {
					t.Fatal(err)
				}
				for _, op := range []struct {
					name string
					call func(ctx context.Context) (ratelimit.Result, error)
				}{
					{"Allow", func(ctx context.Context) (ratelimit.Result, error) { return l.Allow(ctx, "k") }},
					{"Peek", func(ctx context.Context) (ratelimit.Result, error) { return l.Peek(ctx, "k") }},
					{"Reset", func(ctx context.Context) (ratelimit.Result, error) { return ratelimit.Result{}, l.Reset(ctx, "k") }},
				} {
					ctx, cancel := tc.ctx()
					r, err := op.call(ctx)
					cancel()
					if !errors.Is(err, tc.want) || errors.Is(err, strategy.ErrBackend) {
						t.Errorf("%s: err = %v, want %v and not ErrBackend", op.name, err, tc.want)
					}
					if r.Degraded || r.Allowed {
						t.Errorf("%s: Result = %+v, want the zero Result: no policy applies", op.name, r)
					}
					if s := b.State(); s != breaker.Closed {
						t.Fatalf("%s: breaker %v after a call its caller ended, want closed (it opens after 1 failure)", op.name, s)
					}
					if op.name == "Reset" {
						continue
					}
					if d := rec.last(t); d.Degraded || errors.Is(d.Cause, strategy.ErrBackend) || errors.Is(d.Err, strategy.ErrBackend) {
						t.Errorf("%s: observed Degraded %v, Cause %v, Err %v; want no backend failure", op.name, d.Degraded, d.Cause, d.Err)
					}
				}
			})
		}
	}
	// The limiter's own Timeout, sooner than the caller's deadline, is a
	// failure of Redis: the policy decides and the breaker counts it.
	for _, honours := range []bool{true, false} {
		t.Run(fmt.Sprintf("Timeout sooner than the caller's deadline/inline=%v", honours), func(t *testing.T) {
			b := mustBreaker(t, 1, time.Hour)
			l, err := ratelimit.Wrap(stalled{honours: honours, until: untilDeadline},
				ratelimit.Config{OnFailure: ratelimit.FailOpen, Timeout: 20 * time.Millisecond},
				ratelimit.WithBreaker(b))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			r, err := l.Allow(ctx, "k")
			if err != nil || !r.Degraded || !r.Allowed {
				t.Errorf("Allow = %+v, %v; want a degraded allowance (FailOpen)", r, err)
			}
			if s := b.State(); s != breaker.Open {
				t.Errorf("breaker %v after a Timeout, want open", s)
			}
		})
	}
}

// With Redis paused, every decision of a caller whose deadline (50ms) is
// sooner than Timeout (1s) is the caller's: an error wrapping
// context.DeadlineExceeded and not ErrBackend, no policy, no breaker
// count; directly, batched by New's default, and through a batch.Client of
// the caller's.
func TestCallerDeadlineWithRedisPaused(t *testing.T) {
	for _, mode := range []string{"direct", "batched by default", "batch.Client"} {
		t.Run(mode, func(t *testing.T) {
			srv := testredis.Start(t)
			raw := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, PoolSize: 32})
			t.Cleanup(func() { raw.Close() })
			var rdb redis.Scripter = raw
			opts := []ratelimit.Option{}
			if mode == "direct" {
				opts = append(opts, ratelimit.WithoutBatching())
			}
			if mode == "batch.Client" {
				bc, err := batch.New(raw)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { bc.Close() })
				rdb = bc
			}
			b := mustBreaker(t, 1, time.Hour)
			rec := &decisionLog{}
			l, err := ratelimit.New(rdb, ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1000, Window: time.Minute, Timeout: time.Second},
				append(opts, ratelimit.WithBreaker(b), ratelimit.WithObserver(rec))...)
			if err != nil {
				t.Fatal(err)
			}
			const callers, rounds = 8, 5
			var wg sync.WaitGroup
			for i := range callers { // connections made, script loaded
				wg.Go(func() {
					if _, err := l.Allow(context.Background(), fmt.Sprintf("warm%d", i)); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if err := srv.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Signal(syscall.SIGCONT) })
			for round := range rounds {
				for i := range callers {
					wg.Go(func() {
						ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
						defer cancel()
						r, err := l.Allow(ctx, fmt.Sprintf("k%d", i))
						if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, strategy.ErrBackend) || r.Degraded || r.Allowed {
							t.Errorf("%s: round %d caller %d: %+v, %v; want the caller's deadline as the error, not ErrBackend, no policy",
								mode, round, i, r, err)
						}
					})
				}
				wg.Wait()
			}
			if s := b.State(); s != breaker.Closed {
				t.Errorf("%s: breaker %v, want closed: the callers' deadlines are not Redis failures", mode, s)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for _, d := range rec.ds {
				if d.Degraded {
					t.Errorf("%s: a degraded decision observed (Cause %v), want none", mode, d.Cause)
					break
				}
			}
		})
	}
}
