package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

// fakeSleeper stands for time passing: each sleep advances the manual clock
// the limiter decides by, and is recorded.
type fakeSleeper struct {
	clock  *conformance.Clock
	mu     sync.Mutex
	sleeps []time.Duration
}

func (f *fakeSleeper) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	f.sleeps = append(f.sleeps, d)
	f.mu.Unlock()
	f.clock.Advance(d)
	return nil
}

func noJitter(time.Duration) time.Duration { return 0 }

// waitLimiters returns, for every algorithm, a limiter on miniredis and its
// local twin, both on the manual clock.
func waitLimiters(t *testing.T, cfg Config, clock *conformance.Clock) map[string]*Limiter {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	out := map[string]*Limiter{}
	for _, a := range strategy.Algorithms() {
		c := cfg
		c.Algorithm = a
		l, err := New(rdb, c, WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		out[string(a)] = l
		if l, err = New(nil, c, WithClock(clock)); err != nil {
			t.Fatal(err)
		}
		out[string(a)+"/local"] = l
	}
	return out
}

func TestWaitNSleepsRetryAfterThenPasses(t *testing.T) {
	for _, n := range []int64{1, 2} {
		clock := conformance.NewClock(conformance.Epoch)
		for name, l := range waitLimiters(t, Config{Limit: 3, Window: time.Second, Prefix: "w:"}, clock) {
			t.Run(fmt.Sprintf("%s/n=%d", name, n), func(t *testing.T) {
				ctx := context.Background()
				key := "user:" + name
				// The subtests share the clock and run in map order, so start
				// each on a window boundary: the three requests must fall in one
				// fixed window, whatever ran before.
				clock.Set(clock.Now().Truncate(time.Second).Add(time.Second))
				for i := range 3 {
					if r, err := l.Allow(ctx, key); err != nil || !r.Allowed {
						t.Fatalf("request %d: %+v, %v; want allowed", i+1, r, err)
					}
					clock.Advance(100 * time.Millisecond)
				}
				denied, err := l.AllowN(ctx, key, n)
				if err != nil || denied.Allowed || denied.RetryAfter <= 0 {
					t.Fatalf("AllowN(%d) on a full subject = %+v, %v; want denied with RetryAfter > 0", n, denied, err)
				}
				f := &fakeSleeper{clock: clock}
				r, err := l.waitN(ctx, key, n, f.sleep, noJitter)
				if err != nil || !r.Allowed {
					t.Fatalf("waitN(%d) = %+v, %v; want allowed", n, r, err)
				}
				// RetryAfter is exact: one sleep of exactly RetryAfter suffices.
				if len(f.sleeps) != 1 || f.sleeps[0] != denied.RetryAfter {
					t.Fatalf("waitN(%d) slept %v; want once, %v", n, f.sleeps, denied.RetryAfter)
				}
			})
		}
	}
}

func TestWaitNJitterNeverShortensTheSleep(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	l, err := New(nil, Config{Algorithm: SlidingLog, Limit: 1, Window: time.Second}, WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 50 {
		r, err := l.Peek(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		f := &fakeSleeper{clock: clock}
		if _, err := l.waitN(ctx, "k", 1, f.sleep, jitter); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if len(f.sleeps) != 0 {
				t.Fatalf("first wait on an idle subject slept %v; want no sleep", f.sleeps)
			}
			continue
		}
		if len(f.sleeps) != 1 || f.sleeps[0] < r.RetryAfter || f.sleeps[0] > r.RetryAfter+r.RetryAfter/8 {
			t.Fatalf("wait %d slept %v; want once, within [%v, %v]", i, f.sleeps, r.RetryAfter, r.RetryAfter+r.RetryAfter/8)
		}
	}
}

func TestJitterBounds(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 7, 8, time.Millisecond, time.Second, time.Hour} {
		var seenNonZero bool
		for range 1000 {
			j := jitter(d)
			if j < 0 || j > d/8 {
				t.Fatalf("jitter(%v) = %v; want within [0, %v]", d, j, d/8)
			}
			seenNonZero = seenNonZero || j > 0
		}
		if d >= time.Millisecond && !seenNonZero {
			t.Fatalf("jitter(%v) was 0 in 1000 draws; want some spread", d)
		}
	}
}

func TestWaitNReturnsAtOnce(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	newFull := func(t *testing.T) *Limiter {
		t.Helper()
		l, err := New(rdb, Config{Algorithm: SlidingLog, Limit: 2, Window: time.Minute, Prefix: "w:" + t.Name() + ":"}, WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		if r, err := l.AllowN(context.Background(), "k", 2); err != nil || !r.Allowed {
			t.Fatalf("filling: %+v, %v", r, err)
		}
		return l
	}
	for _, c := range []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		key     string
		n       int64
		allowed bool
		is      error
	}{
		{"n above capacity", ctxBackground, "k", 3, false, strategy.ErrInvalidCost},
		{"deadline before retry after", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Second) // RetryAfter is about a minute
		}, "k", 1, false, context.DeadlineExceeded},
		{"canceled context", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, "k", 1, false, context.Canceled},
		{"empty key", ctxBackground, "", 1, false, strategy.ErrInvalidKey},
		{"negative n", ctxBackground, "k", -1, false, strategy.ErrInvalidCost},
		{"n = 0 on a full subject", ctxBackground, "k", 0, false, nil},
		{"n = 0 on an idle subject", ctxBackground, "idle", 0, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newFull(t)
			ctx, cancel := c.ctx()
			defer cancel()
			f := &fakeSleeper{clock: conformance.NewClock(conformance.Epoch)} // the limiter's clock stays put
			r, err := l.waitN(ctx, c.key, c.n, f.sleep, noJitter)
			if c.is == nil && err != nil || c.is != nil && !errors.Is(err, c.is) {
				t.Fatalf("waitN = %+v, %v; want an error matching %v", r, err, c.is)
			}
			if r.Allowed != c.allowed {
				t.Fatalf("waitN = %+v; want Allowed %v", r, c.allowed)
			}
			if len(f.sleeps) != 0 {
				t.Fatalf("waitN slept %v; want no sleep", f.sleeps)
			}
		})
	}
	t.Run("backend down, fail open", func(t *testing.T) {
		down := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: down.Addr(), MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		l, err := New(rdb, Config{Algorithm: SlidingLog, Limit: 2, Window: time.Minute, OnFailure: FailOpen}, WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		down.Close()
		f := &fakeSleeper{clock: clock}
		r, err := l.waitN(context.Background(), "k", 1, f.sleep, noJitter)
		if err != nil || !r.Allowed || !r.Degraded || len(f.sleeps) != 0 {
			t.Fatalf("waitN with Redis down = %+v, %v after sleeps %v; want allowed, degraded, at once", r, err, f.sleeps)
		}
	})
	t.Run("backend down, fail closed", func(t *testing.T) {
		down := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: down.Addr(), MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		l, err := New(rdb, Config{Algorithm: SlidingLog, Limit: 2, Window: time.Minute, OnFailure: FailClosed}, WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		down.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f := &fakeSleeper{clock: clock}
		sleep := func(ctx context.Context, d time.Duration) error {
			if len(f.sleeps) == 2 {
				cancel() // give up after a few tries
			}
			return f.sleep(ctx, d)
		}
		r, err := l.waitN(ctx, "k", 1, sleep, noJitter)
		if !errors.Is(err, context.Canceled) || r.Allowed || !r.Degraded {
			t.Fatalf("waitN with Redis down = %+v, %v; want denied, degraded, then context.Canceled", r, err)
		}
		if len(f.sleeps) != 2 {
			t.Fatalf("waitN slept %v; want twice before the cancel", f.sleeps)
		}
		for _, d := range f.sleeps {
			if d < minWaitSleep {
				t.Fatalf("waitN slept %v; want every sleep >= %v so it cannot spin", f.sleeps, minWaitSleep)
			}
		}
	})
}

func ctxBackground() (context.Context, context.CancelFunc) {
	return context.Background(), func() {}
}

// The public Wait on real time: short windows, behaviour only.
func TestWaitRealTime(t *testing.T) {
	t.Run("waiters all pass, never above the limit", func(t *testing.T) {
		l, err := New(nil, Config{Algorithm: SlidingLog, Limit: 2, Window: 40 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 4 {
			wg.Go(func() {
				for range 2 {
					r, err := l.Wait(context.Background(), "k")
					if err == nil && !r.Allowed {
						err = errors.New("Wait returned a denied Result without an error")
					}
					if err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// the limiter saw the 8 units: the subject is not idle
		if p, _ := l.Peek(context.Background(), "k"); p.Remaining == 2 && p.ResetAfter == 0 {
			t.Errorf("Peek after 8 waits = %+v; want recent units recorded", p)
		}
	})
	t.Run("cancel while sleeping", func(t *testing.T) {
		l, err := New(nil, Config{Algorithm: SlidingLog, Limit: 1, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Allow(context.Background(), "k"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := l.Wait(ctx, "k")
			done <- err
		}()
		time.Sleep(20 * time.Millisecond)
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait = %v; want context.Canceled", err)
			}
		case <-time.After(30 * time.Second): // a hang guard, not a speed assertion
			t.Fatal("Wait did not return after its context was canceled")
		}
	})
}
