package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

// flaky is a redis.Scripter in front of a real one that can fail every
// script call with an error, or hang it, ignoring the context as a go-redis
// client without ContextTimeoutEnabled does, until released.
type flaky struct {
	redis.Scripter
	calls atomic.Int64 // script calls that reached flaky
	mu    sync.Mutex
	err   error         // returned by every call when set
	hang  chan struct{} // when set, calls block until it is closed
}

func (f *flaky) set(err error, hang chan struct{}) {
	f.mu.Lock()
	f.err, f.hang = err, hang
	f.mu.Unlock()
}

func (f *flaky) trouble(ctx context.Context) *redis.Cmd {
	f.calls.Add(1)
	f.mu.Lock()
	err, hang := f.err, f.hang
	f.mu.Unlock()
	if hang != nil {
		<-hang
	}
	if err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	return nil
}

func (f *flaky) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if cmd := f.trouble(ctx); cmd != nil {
		return cmd
	}
	return f.Scripter.EvalSha(ctx, sha, keys, args...)
}

func (f *flaky) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	if cmd := f.trouble(ctx); cmd != nil {
		return cmd
	}
	return f.Scripter.Eval(ctx, src, keys, args...)
}

// connReset is what a dead connection looks like to go-redis.
var connReset = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}

// redisReply is a Redis error reply.
type redisReply string

func (e redisReply) Error() string { return string(e) }
func (redisReply) RedisError()     {}

// decisionLog is an Observer that keeps every Decision.
type decisionLog struct {
	mu sync.Mutex
	ds []ratelimit.Decision
}

func (r *decisionLog) Observe(_ context.Context, d ratelimit.Decision) {
	r.mu.Lock()
	r.ds = append(r.ds, d)
	r.mu.Unlock()
}

func (r *decisionLog) last(t *testing.T) ratelimit.Decision {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ds) == 0 {
		t.Fatal("no decision observed")
	}
	return r.ds[len(r.ds)-1]
}

// cmdCounter counts the commands a go-redis client sends.
type cmdCounter struct{ n atomic.Int64 }

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func mustBreaker(t testing.TB, failures int, cooldown time.Duration, opts ...breaker.Option) *breaker.Breaker {
	t.Helper()
	b, err := breaker.New(failures, cooldown, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var failurePolicies = []ratelimit.FailurePolicy{ratelimit.FailOpen, ratelimit.FailClosed, ratelimit.FailLocal}

func TestFailureConfigValidates(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	valid := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 10, Window: time.Second}
	for _, c := range []struct {
		name string
		edit func(*ratelimit.Config)
		want string
	}{
		{"unknown policy", func(c *ratelimit.Config) { c.OnFailure = "sideways" }, `OnFailure must be "open", "closed" or "local"`},
		{"negative share", func(c *ratelimit.Config) { c.OnFailure, c.LocalShare = ratelimit.FailLocal, -0.5 }, "LocalShare must be in [0, 1]"},
		{"share above 1", func(c *ratelimit.Config) { c.OnFailure, c.LocalShare = ratelimit.FailLocal, 1.5 }, "LocalShare must be in [0, 1]"},
		{"NaN share", func(c *ratelimit.Config) { c.LocalShare = math.NaN() }, "LocalShare"},
		{"infinite share", func(c *ratelimit.Config) { c.LocalShare = math.Inf(1) }, "LocalShare"},
		{"negative timeout", func(c *ratelimit.Config) { c.Timeout = -time.Millisecond }, "Timeout must be >= 0"},
		{"most negative timeout", func(c *ratelimit.Config) { c.Timeout = math.MinInt64 }, "Timeout must be >= 0"},
		{"overflowing timeout", func(c *ratelimit.Config) { c.Timeout = math.MaxInt64 }, "Timeout must be <= 1m0s"},
		{"negative window", func(c *ratelimit.Config) { c.Window = -time.Second }, "Window must be > 0"},
		{"overflowing window", func(c *ratelimit.Config) { c.Window = math.MaxInt64 }, "Window must be <="},
		{"fractional window", func(c *ratelimit.Config) { c.Window = 1500 * time.Microsecond }, "whole number of milliseconds"},
		{"huge limit", func(c *ratelimit.Config) { c.Limit = math.MaxInt64 }, "Limit must be <="},
		{"huge burst", func(c *ratelimit.Config) { c.Burst = math.MaxInt64 }, "Burst must be <="},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := valid
			c.edit(&cfg)
			if _, err := ratelimit.New(rdb, cfg); err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "ratelimit: ") {
				t.Errorf("New: err = %v, want one containing %q", err, c.want)
			}
			if _, err := ratelimit.New(nil, cfg); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewLocal: err = %v, want one containing %q", err, c.want)
			}
		})
	}
	for _, c := range []struct {
		name string
		opt  func() (ratelimit.Option, error)
		want string
	}{
		{"deny cache of 0", func() (ratelimit.Option, error) { return ratelimit.WithDenyCache(0), nil }, "maxSubjects must be > 0, got 0"},
		{"deny cache of -1", func() (ratelimit.Option, error) { return ratelimit.WithDenyCache(-1), nil }, "maxSubjects must be > 0, got -1"},
		{"breaker failures < 0", func() (ratelimit.Option, error) {
			_, err := breaker.New(-1, 0)
			return nil, err
		}, "failures must be in"},
		{"breaker cooldown < 0", func() (ratelimit.Option, error) {
			_, err := breaker.New(0, -time.Second)
			return nil, err
		}, "cooldown must be >= 0"},
		{"breaker cooldown overflowing", func() (ratelimit.Option, error) {
			_, err := breaker.New(0, math.MaxInt64)
			return nil, err
		}, "cooldown must be <= 1h0m0s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opt, err := c.opt()
			if err == nil {
				_, err = ratelimit.New(rdb, valid, opt)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, strategy.ErrInvalidOption) {
				t.Errorf("err = %v, want ErrInvalidOption containing %q", err, c.want)
			}
		})
	}
	// no client: in process, where the denial cache does not apply
	if l, err := ratelimit.New(nil, valid, ratelimit.WithDenyCache(10)); err != nil || ratelimit.DenyCacheLen(l) != -1 {
		t.Errorf("New(nil) with WithDenyCache: %v; want an in-process Limiter without a denial cache", err)
	}
	if _, err := ratelimit.New(rdb, valid, nil, ratelimit.WithBreaker(nil)); err != nil {
		t.Errorf("nil options: %v, want them ignored", err)
	}
}

// Bad input is an error naming the problem under every policy, even with
// the breaker open, and never reaches Redis.
func TestBadInputTouchesNothing(t *testing.T) {
	mr := miniredis.RunT(t)
	var sent cmdCounter
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	rdb.AddHook(&sent)
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	huge := strings.Repeat("k", 1<<20)
	for _, a := range strategy.Algorithms() {
		for _, p := range failurePolicies {
			t.Run(fmt.Sprintf("%s/%s", a, p), func(t *testing.T) {
				open := mustBreaker(t, 1, time.Hour)
				for _, b := range []*breaker.Breaker{mustBreaker(t, 0, 0), open} {
					l, err := ratelimit.New(rdb, ratelimit.Config{Algorithm: a, Limit: 5, Window: time.Second, OnFailure: p, LocalShare: 0.5},
						ratelimit.WithBreaker(b), ratelimit.WithDenyCache(16))
					if err != nil {
						t.Fatal(err)
					}
					before := sent.n.Load()
					for _, c := range []struct {
						name string
						call func() error
						want error
						msg  string
					}{
						{"empty key", func() error { _, err := l.Allow(ctx, ""); return err }, strategy.ErrInvalidKey, "key must not be empty"},
						{"1 MiB key", func() error { _, err := l.Allow(ctx, huge); return err }, strategy.ErrInvalidKey, "key must be at most 4096 bytes, got 1048576"},
						{"empty key peek", func() error { _, err := l.Peek(ctx, ""); return err }, strategy.ErrInvalidKey, "key must not be empty"},
						{"1 MiB key peek", func() error { _, err := l.Peek(ctx, huge); return err }, strategy.ErrInvalidKey, "at most 4096 bytes"},
						{"empty key reset", func() error { return l.Reset(ctx, "") }, strategy.ErrInvalidKey, "key must not be empty"},
						{"1 MiB key reset", func() error { return l.Reset(ctx, huge) }, strategy.ErrInvalidKey, "at most 4096 bytes"},
						{"n < 0", func() error { _, err := l.AllowN(ctx, "k", -1); return err }, strategy.ErrInvalidCost, "n must be >= 0, got -1"},
						{"most negative n", func() error { _, err := l.AllowN(ctx, "k", math.MinInt64); return err }, strategy.ErrInvalidCost, "n must be >= 0"},
						{"huge n", func() error { _, err := l.AllowN(ctx, "k", math.MaxInt64); return err }, strategy.ErrInvalidCost, "n must be <= 1099511627776"},
					} {
						err := c.call()
						if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
							t.Errorf("%s (breaker %v): err = %v, want %v containing %q", c.name, b.State(), err, c.want, c.msg)
						}
					}
					if got := sent.n.Load() - before; got != 0 {
						t.Errorf("bad input sent %d commands to Redis, want 0", got)
					}
					if keys := mr.Keys(); len(keys) != 0 {
						t.Errorf("keys after bad input: %q, want none", keys)
					}
				}
			})
		}
	}
	// The hook does count: a valid decision sends a command.
	l, err := ratelimit.New(rdb, ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Second, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	before := sent.n.Load()
	if r, err := l.Allow(ctx, "k"); err != nil || !r.Allowed || r.Degraded {
		t.Fatalf("valid Allow = %+v, %v", r, err)
	}
	if sent.n.Load() == before || len(mr.Keys()) == 0 {
		t.Fatal("a valid decision sent nothing: the cmdCounter cannot see commands")
	}
}

// newFlaky returns a limiter on a miniredis behind a flaky Scripter.
func newFlaky(t *testing.T, cfg ratelimit.Config, opts ...ratelimit.Option) (*ratelimit.Limiter, *flaky, *decisionLog) {
	t.Helper()
	_, rdb := conformance.Miniredis(t)
	f := &flaky{Scripter: rdb}
	rec := &decisionLog{}
	l, err := ratelimit.New(f, cfg, append([]ratelimit.Option{ratelimit.WithObserver(rec)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l, f, rec
}

func TestFailurePolicies(t *testing.T) {
	ctx := context.Background()
	for _, p := range failurePolicies {
		t.Run(string(p), func(t *testing.T) {
			const cooldown = 100 * time.Millisecond
			cfg := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 4, Window: time.Minute, OnFailure: p, LocalShare: 0.5, Timeout: 10 * time.Second}
			clock := conformance.NewClock(conformance.Epoch) // the limiter's and the breaker's: stepped, never slept through
			b := mustBreaker(t, 3, cooldown, breaker.WithClock(clock))
			l, f, rec := newFlaky(t, cfg, ratelimit.WithClock(clock), ratelimit.WithBreaker(b))
			if r, err := l.Allow(ctx, "k"); err != nil || !r.Allowed || r.Degraded {
				t.Fatalf("healthy Allow = %+v, %v; want allowed, not degraded", r, err)
			}
			healthy := f.calls.Load()
			f.set(connReset, nil)
			check := func(i int, r ratelimit.Result, err error) {
				t.Helper()
				if err != nil || !r.Degraded {
					t.Fatalf("decision %d with Redis down = %+v, %v; want a degraded Result and no error", i, r, err)
				}
				switch p {
				case ratelimit.FailOpen:
					if !r.Allowed || r.Limit != 4 || r.Remaining != 4 {
						t.Fatalf("fail open %d: %+v, want allowed, Limit 4, Remaining 4", i, r)
					}
				case ratelimit.FailClosed:
					// the clock stands still: the whole cool-down, closed or open
					if r.Allowed || r.Remaining != 0 || r.RetryAfter != cooldown || r.ResetAfter != cooldown {
						t.Fatalf("fail closed %d: %+v, want denied, RetryAfter and ResetAfter the cool-down %v", i, r, cooldown)
					}
				case ratelimit.FailLocal:
					// the twin holds half of 4, from empty
					if r.Limit != 2 || r.Allowed != (i < 2) {
						t.Fatalf("fail local %d: %+v, want Limit 2 and the first 2 allowed", i, r)
					}
					if !r.Allowed && (r.RetryAfter <= 0 || r.RetryAfter > time.Minute) {
						t.Fatalf("fail local %d: %+v, want RetryAfter within the window", i, r)
					}
				}
			}
			for i := 0; i < 6; i++ {
				r, err := l.Allow(ctx, "k")
				check(i, r, err)
				d := rec.last(t)
				if !d.Degraded || d.Err != nil || d.Result != r {
					t.Fatalf("decision %d observed as %+v", i, d)
				}
				switch {
				case i < 3 && !errors.Is(d.Cause, syscall.ECONNRESET):
					t.Fatalf("decision %d: Cause = %v, want the connection error", i, d.Cause)
				case i >= 3 && (!errors.Is(d.Cause, breaker.ErrOpen) || !errors.Is(d.Cause, strategy.ErrBackend) || d.Breaker != breaker.Open):
					t.Fatalf("decision %d: Cause %v, breaker %v; want breaker.ErrOpen, open", i, d.Cause, d.Breaker)
				}
			}
			if got := f.calls.Load() - healthy; got != 3 {
				t.Errorf("script calls with Redis down = %d, want 3 before the breaker opened", got)
			}
			// beyond the capacity: never, whatever the policy
			if r, err := l.AllowN(ctx, "other", 5); err != nil || r.Allowed || r.RetryAfter != strategy.Never || !r.Degraded {
				t.Errorf("AllowN(5) of 4 with Redis down = %+v, %v; want denied, Never", r, err)
			}
			if r, err := l.Peek(ctx, "fresh"); err != nil || !r.Degraded || r.Allowed != (p != ratelimit.FailClosed) {
				t.Errorf("Peek with Redis down = %+v, %v", r, err)
			}
			if err := l.Reset(ctx, "k"); !errors.Is(err, breaker.ErrOpen) || !errors.Is(err, strategy.ErrBackend) {
				t.Errorf("Reset with the breaker open: err = %v, want ErrBackend and breaker.ErrOpen", err)
			}
			// Redis is back, but the breaker stays open for its cool-down
			// on the clock; FailClosed's RetryAfter is what is left of it.
			f.set(nil, nil)
			calls := f.calls.Load()
			clock.Advance(cooldown - 40*time.Millisecond)
			r, err := l.Allow(ctx, "other")
			if err != nil || !r.Degraded || b.State() != breaker.Open || f.calls.Load() != calls {
				t.Fatalf("%v into the cool-down: %+v, %v, breaker %v; want degraded without a call, open", cooldown-40*time.Millisecond, r, err, b.State())
			}
			if p == ratelimit.FailClosed && (r.RetryAfter != 40*time.Millisecond || r.ResetAfter != 40*time.Millisecond) {
				t.Fatalf("fail closed 40ms before the cool-down ends: %+v, want RetryAfter and ResetAfter 40ms", r)
			}
			clock.Advance(40*time.Millisecond - time.Nanosecond)
			if s := b.State(); s != breaker.Open {
				t.Fatalf("1ns before the cool-down ends: breaker %v, want open", s)
			}
			if r, _ := l.Allow(ctx, "other"); p == ratelimit.FailClosed && r.RetryAfter != time.Millisecond {
				t.Fatalf("fail closed 1ns before the cool-down ends: %+v, want RetryAfter 1ms (rounded up)", r)
			}
			// After the cool-down the next call probes and enforcement
			// resumes, with the unit recorded before the outage.
			clock.Advance(time.Nanosecond)
			if s := b.State(); s != breaker.HalfOpen {
				t.Fatalf("when the cool-down ends: breaker %v, want half-open", s)
			}
			for i := 0; i < 3; i++ {
				if r, err := l.Allow(ctx, "k"); err != nil || !r.Allowed || r.Degraded || r.Remaining != int64(2-i) {
					t.Fatalf("after recovery, Allow %d = %+v, %v; want allowed by Redis, Remaining %d", i, r, err, 2-i)
				}
			}
			if r, err := l.Allow(ctx, "k"); err != nil || r.Allowed || r.Degraded {
				t.Fatalf("fifth unit after recovery = %+v, %v; want denied by Redis", r, err)
			}
			if d := rec.last(t); d.Breaker != breaker.Closed || d.Degraded {
				t.Fatalf("after recovery observed %+v, want breaker closed", d)
			}
			if err := l.Reset(ctx, "k"); err != nil {
				t.Fatalf("Reset after recovery: %v", err)
			}
			f.set(connReset, nil)
			if err := l.Reset(ctx, "k"); !errors.Is(err, syscall.ECONNRESET) || !errors.Is(err, strategy.ErrBackend) {
				t.Errorf("Reset with Redis down: err = %v, want ErrBackend and the cause", err)
			}
		})
	}
}

// Replies that concern one key or one write prove that Redis serves: the
// decision is degraded, the breaker stays closed. A caller that gives up
// says nothing about Redis either.
func TestNotARedisFailure(t *testing.T) {
	ctx := context.Background()
	l, f, rec := newFlaky(t, ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 4, Window: time.Minute, OnFailure: ratelimit.FailClosed, Timeout: 10 * time.Second},
		ratelimit.WithBreaker(mustBreaker(t, 2, time.Hour)))
	for _, e := range []error{
		redisReply("WRONGTYPE Operation against a key holding the wrong kind of value"),
		redisReply("OOM command not allowed when used memory > 'maxmemory'."),
	} {
		f.set(e, nil)
		for i := 0; i < 4; i++ {
			if r, err := l.Allow(ctx, "k"); err != nil || r.Allowed || !r.Degraded {
				t.Fatalf("%v: Allow = %+v, %v; want degraded denial", e, r, err)
			}
			if d := rec.last(t); d.Breaker != breaker.Closed || !errors.Is(d.Cause, e) {
				t.Fatalf("%v: observed %+v, want the reply as Cause and the breaker closed", e, d)
			}
		}
	}
	hang := make(chan struct{})
	defer close(hang)
	f.set(nil, hang)
	for i := 0; i < 4; i++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		r, err := l.Allow(cctx, "k")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || r.Degraded || r.Allowed {
			t.Fatalf("caller deadline: %+v, %v; want the caller's deadline as the error, no policy", r, err)
		}
	}
	if d := rec.last(t); d.Breaker != breaker.Closed {
		t.Fatalf("after 4 calls abandoned by their caller the breaker is %v, want closed", d.Breaker)
	}
	// ... whereas the same Redis failing the limiter's own Timeout opens it
	f.set(redisReply("LOADING Redis is loading the dataset in memory"), nil)
	l.Allow(ctx, "k")
	l.Allow(ctx, "k")
	if d := rec.last(t); d.Breaker != breaker.Open {
		t.Fatalf("after 2 LOADING replies the breaker is %v, want open", d.Breaker)
	}
}

// settle waits until at most want goroutines run, and fails after wait.
func settleGoroutines(t *testing.T, want int, wait time.Duration) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		n := runtime.NumGoroutine()
		if n <= want {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after %v, want <= %d:\n%s", n, wait, want, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A client that ignores the context (go-redis without
// ContextTimeoutEnabled) cannot hold the caller beyond the Timeout, and an
// open breaker stops calling it.
func TestTimeoutReleasesCaller(t *testing.T) {
	ctx := context.Background()
	const timeout = 50 * time.Millisecond
	l, f, rec := newFlaky(t, ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 4, Window: time.Minute, Timeout: timeout},
		ratelimit.WithBreaker(mustBreaker(t, 3, time.Hour)))
	base := runtime.NumGoroutine()
	hang := make(chan struct{})
	f.set(nil, hang)
	for i := 0; i < 3; i++ {
		start := time.Now()
		r, err := l.Allow(ctx, "k")
		took := time.Since(start)
		if err != nil || !r.Allowed || !r.Degraded {
			t.Fatalf("hung Redis: %+v, %v; want degraded, allowed (fail open)", r, err)
		}
		if took < timeout || took > timeout+time.Second {
			t.Errorf("decision %d took %v, want the Timeout %v (plus scheduling)", i, took, timeout)
		}
		if c := rec.last(t).Cause; !errors.Is(c, context.DeadlineExceeded) || !strings.Contains(c.Error(), "within Timeout 50ms") {
			t.Errorf("Cause = %v, want the Timeout", c)
		}
	}
	calls := f.calls.Load()
	for i := 0; i < 100; i++ {
		if r, _ := l.Allow(ctx, "k"); !r.Degraded || !r.Allowed {
			t.Fatalf("breaker open: %+v", r)
		}
	}
	if got := f.calls.Load(); got != calls {
		t.Errorf("the open breaker let %d calls through, want 0", got-calls)
	}
	close(hang)
	settleGoroutines(t, base, 5*time.Second)
}

func TestCallerDeadlineWins(t *testing.T) {
	l, f, _ := newFlaky(t, ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 4, Window: time.Minute, OnFailure: ratelimit.FailClosed, Timeout: time.Minute})
	hang := make(chan struct{})
	defer close(hang)
	f.set(nil, hang)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	r, err := l.Allow(ctx, "k")
	if took := time.Since(start); took > 20*time.Millisecond+time.Second {
		t.Errorf("took %v with a caller deadline of 20ms and a Timeout of 1m", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || r.Allowed || r.Degraded {
		t.Errorf("got %+v, %v; want the caller's deadline as the error, no policy", r, err)
	}
	cctx, cancel2 := context.WithCancel(context.Background())
	cancel2()
	calls := f.calls.Load()
	if _, err := l.Allow(cctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: err = %v, want context.Canceled", err)
	}
	if got := f.calls.Load(); got != calls {
		t.Errorf("a canceled context still called Redis %d times", got-calls)
	}
}

func TestBreakerHalfOpenProbesOnce(t *testing.T) {
	ctx := context.Background()
	const cooldown = 50 * time.Millisecond
	clock := conformance.NewClock(conformance.Epoch) // safe for concurrent use: the probe runs on its own goroutine
	b := mustBreaker(t, 2, cooldown, breaker.WithClock(clock))
	l, f, _ := newFlaky(t, ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1000, Window: time.Minute, OnFailure: ratelimit.FailClosed, Timeout: 5 * time.Second},
		ratelimit.WithClock(clock), ratelimit.WithBreaker(b))
	f.set(connReset, nil)
	l.Allow(ctx, "k")
	l.Allow(ctx, "k")
	if s := b.State(); s != breaker.Open {
		t.Fatalf("after 2 failures: %v, want open", s)
	}
	clock.Advance(cooldown - time.Nanosecond)
	if s := b.State(); s != breaker.Open {
		t.Fatalf("1ns before the cool-down ends: %v, want open", s)
	}
	clock.Advance(time.Nanosecond)
	if s := b.State(); s != breaker.HalfOpen {
		t.Fatalf("after the cool-down: %v, want half-open", s)
	}
	// The probe hangs; meanwhile every other decision is degraded at once.
	hang := make(chan struct{})
	f.set(nil, hang)
	calls := f.calls.Load()
	probe := make(chan ratelimit.Result)
	go func() {
		r, _ := l.Allow(ctx, "k")
		probe <- r
	}()
	for f.calls.Load() == calls {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, _ := l.Allow(ctx, "k"); !r.Degraded || r.Allowed {
				t.Errorf("while probing: %+v, want degraded denial", r)
			}
		}()
	}
	wg.Wait()
	if got := f.calls.Load() - calls; got != 1 {
		t.Errorf("%d calls reached Redis while half-open, want 1 probe", got)
	}
	close(hang)
	if r := <-probe; r.Degraded || !r.Allowed {
		t.Fatalf("probe = %+v, want Redis's decision", r)
	}
	if s := b.State(); s != breaker.Closed {
		t.Fatalf("after a good probe: %v, want closed", s)
	}
	// A failing probe opens it again for a whole cool-down.
	f.set(connReset, nil)
	l.Allow(ctx, "k")
	l.Allow(ctx, "k")
	clock.Advance(cooldown)
	calls = f.calls.Load()
	l.Allow(ctx, "k") // the probe, failing
	if s := b.State(); s != breaker.Open || f.calls.Load() != calls+1 {
		t.Fatalf("after a failed probe: %v, %d calls; want open after 1 probe", s, f.calls.Load()-calls)
	}
	// ... for a whole cool-down from the probe's failure
	if r, _ := l.Allow(ctx, "k"); r.RetryAfter != cooldown {
		t.Fatalf("just after a failed probe: %+v, want RetryAfter the whole cool-down %v", r, cooldown)
	}
	clock.Advance(cooldown - time.Nanosecond)
	if s := b.State(); s != breaker.Open {
		t.Fatalf("1ns before the new cool-down ends: %v, want open", s)
	}
	clock.Advance(time.Nanosecond)
	if s := b.State(); s != breaker.HalfOpen {
		t.Fatalf("when the new cool-down ends: %v, want half-open", s)
	}
}

// One Breaker shared by two limiters on one Redis: an outage seen by one
// spares the other its timeouts.
func TestBreakerShared(t *testing.T) {
	ctx := context.Background()
	_, rdb := conformance.Miniredis(t)
	f := &flaky{Scripter: rdb}
	b := mustBreaker(t, 2, time.Hour)
	cfg := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 4, Window: time.Minute, Timeout: 10 * time.Second}
	l1, err := ratelimit.New(f, cfg, ratelimit.WithBreaker(b))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Prefix = "other:"
	l2, err := ratelimit.New(f, cfg, ratelimit.WithBreaker(b))
	if err != nil {
		t.Fatal(err)
	}
	f.set(connReset, nil)
	l1.Allow(ctx, "k")
	l1.Allow(ctx, "k")
	calls := f.calls.Load()
	if r, _ := l2.Allow(ctx, "k"); !r.Degraded || f.calls.Load() != calls {
		t.Fatalf("l2 after l1 opened the shared breaker: %+v, %d calls; want degraded without a call", r, f.calls.Load()-calls)
	}
}

// The denial cache, driven with the same random requests as a limiter
// without it on the same Redis (separate keys) and the same clock, makes
// exactly the same decisions, while sparing round trips: it never denies
// what Redis would have allowed.
func TestDenyCacheNeverDeniesWhatRedisAllows(t *testing.T) {
	t.Parallel() // its own servers and clock; it mostly waits
	seed := uint64(time.Now().UnixNano())
	for _, a := range strategy.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			ctx := context.Background()
			mr := miniredis.RunT(t)
			mr.SetTime(conformance.Epoch)
			clock := conformance.NewClock(conformance.Epoch)
			var sentCached, sentPlain cmdCounter
			client := func(h *cmdCounter) *redis.Client {
				c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
				c.AddHook(h)
				t.Cleanup(func() { c.Close() })
				return c
			}
			// a Timeout long enough that a loaded machine cannot degrade a decision
			cfg := ratelimit.Config{Algorithm: a, Limit: 6, Window: 2 * time.Second, Burst: 8, Prefix: "cached:", Timeout: 10 * time.Second}
			rec := &decisionLog{}
			cached, err := ratelimit.New(client(&sentCached), cfg, ratelimit.WithClock(clock), ratelimit.WithDenyCache(3), ratelimit.WithObserver(rec))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Prefix = "plain:"
			plain, err := ratelimit.New(client(&sentPlain), cfg, ratelimit.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			subjects := []string{"a", "b", "c", "d", "e"}
			hits := 0
			for i := 0; i < 1500; i++ {
				if rng.IntN(3) == 0 {
					clock.Advance(time.Duration(rng.IntN(300)) * time.Millisecond)
				}
				key := subjects[rng.IntN(len(subjects))]
				if rng.IntN(40) == 0 {
					if err := cached.Reset(ctx, key); err != nil {
						t.Fatal(err)
					}
					if err := plain.Reset(ctx, key); err != nil {
						t.Fatal(err)
					}
					continue
				}
				n := int64(1 + rng.IntN(3))
				if rng.IntN(10) == 0 {
					n = int64(1 + rng.IntN(9))
				}
				rc, err1 := cached.AllowN(ctx, key, n)
				rp, err2 := plain.AllowN(ctx, key, n)
				if err1 != nil || err2 != nil || rc.Degraded || rp.Degraded {
					t.Fatalf("seed %d op %d: %v, %v", seed, i, err1, err2)
				}
				hit := rec.last(t).Cached
				if hit {
					hits++
				}
				if rc.Allowed != rp.Allowed {
					t.Fatalf("seed %d op %d: AllowN(%q, %d): with cache %+v (from cache %v), without %+v", seed, i, key, n, rc, hit, rp)
				}
				// Units recorded since the cached denial can only delay the
				// request further: the cache's RetryAfter is at most Redis's.
				if hit && (rc.RetryAfter == strategy.Never) != (rp.RetryAfter == strategy.Never) ||
					hit && rp.RetryAfter != strategy.Never && (rc.RetryAfter > rp.RetryAfter || rc.RetryAfter <= 0) {
					t.Fatalf("seed %d op %d: AllowN(%q, %d): cached RetryAfter %v, Redis says %v", seed, i, key, n, rc.RetryAfter, rp.RetryAfter)
				}
				if got := ratelimit.DenyCacheLen(cached); got > 3 {
					t.Fatalf("the cache holds %d subjects, want <= 3", got)
				}
			}
			if hits == 0 || sentCached.n.Load() >= sentPlain.n.Load() {
				t.Fatalf("seed %d: %d denials from the cache, %d vs %d commands: the cache did nothing", seed, hits, sentCached.n.Load(), sentPlain.n.Load())
			}
			t.Logf("%d of 1500 decisions from the cache; %d vs %d commands", hits, sentCached.n.Load(), sentPlain.n.Load())
		})
	}
}

func TestDenyCacheResetAndBound(t *testing.T) {
	ctx := context.Background()
	_, rdb := conformance.Miniredis(t)
	var sent cmdCounter
	rdb.AddHook(&sent)
	clock := conformance.NewClock(conformance.Epoch)
	l, err := ratelimit.New(rdb, ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Minute, Timeout: 10 * time.Second},
		ratelimit.WithClock(clock), ratelimit.WithDenyCache(30))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		key := fmt.Sprint("user:", i)
		l.Allow(ctx, key)
		if r, _ := l.Allow(ctx, key); r.Allowed {
			t.Fatalf("second unit of %s allowed", key)
		}
	}
	if got := ratelimit.DenyCacheLen(l); got > 30 || got < 15 {
		t.Fatalf("after 300 denied subjects the cache holds %d, want at most 30 (and not nearly empty)", got)
	}
	l.Allow(ctx, "x")
	l.Allow(ctx, "x") // denied by Redis, cached
	before := sent.n.Load()
	if r, _ := l.Allow(ctx, "x"); r.Allowed || r.RetryAfter != time.Minute || sent.n.Load() != before {
		t.Fatalf("third unit of x = %+v, %d commands; want denied from the cache, RetryAfter 1m", r, sent.n.Load()-before)
	}
	clock.Advance(30 * time.Second)
	if r, _ := l.Allow(ctx, "x"); r.Allowed || r.RetryAfter != 30*time.Second || sent.n.Load() != before {
		t.Fatalf("30s later = %+v; want denied from the cache, RetryAfter 30s", r)
	}
	if err := l.Reset(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if r, _ := l.Allow(ctx, "x"); !r.Allowed {
		t.Fatalf("after Reset: %+v, want allowed", r)
	}
	if l, err := ratelimit.New(nil, ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Minute}, ratelimit.WithDenyCache(10)); err != nil || ratelimit.DenyCacheLen(l) != -1 {
		t.Fatalf("NewLocal with a deny cache: %v, want it accepted and unused", err)
	}
}

// With Redis down, a login limiter that must not be bypassed denies, and a
// search limiter shared by 20 application hosts lets each host allow its
// twentieth of the limit on its own. Neither returns an error: the Result
// says the decision was degraded.
func ExampleFailurePolicy() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	addr := mr.Addr()
	mr.Close() // Redis is down
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()

	login, err := ratelimit.New(rdb, ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Minute,
		OnFailure: ratelimit.FailClosed, Timeout: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	search, err := ratelimit.New(rdb, ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 40, Window: time.Minute,
		OnFailure: ratelimit.FailLocal, LocalShare: 1.0 / 20, Timeout: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	r, err := login.Allow(ctx, "user:42")
	fmt.Printf("login: allowed=%v degraded=%v err=%v\n", r.Allowed, r.Degraded, err)
	for i := 1; i <= 3; i++ {
		r, _ := search.Allow(ctx, "user:42")
		fmt.Printf("search %d: allowed=%v degraded=%v limit=%d\n", i, r.Allowed, r.Degraded, r.Limit)
	}
	// Output:
	// login: allowed=false degraded=true err=<nil>
	// search 1: allowed=true degraded=true limit=2
	// search 2: allowed=true degraded=true limit=2
	// search 3: allowed=false degraded=true limit=2
}
