package batch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }

// echo returns its argument and counts its calls per key, so that a test
// sees both which reply each caller got and how often each call ran.
var echo = redis.NewScript(`redis.call('INCR', KEYS[1]) return ARGV[1]`)

// pipes counts what a client sends: single commands and pipelines, and the
// commands of each kind.
type pipes struct {
	singles, pipelines, piped atomic.Int64
	evals, loads, evalshas    atomic.Int64
}

func (p *pipes) count(cmd redis.Cmder) {
	switch strings.ToLower(cmd.Name()) {
	case "eval":
		p.evals.Add(1)
	case "evalsha":
		p.evalshas.Add(1)
	case "script":
		p.loads.Add(1)
	}
}

func (p *pipes) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *pipes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		p.singles.Add(1)
		p.count(cmd)
		return next(ctx, cmd)
	}
}

func (p *pipes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.pipelines.Add(1)
		p.piped.Add(int64(len(cmds)))
		for _, c := range cmds {
			p.count(c)
		}
		return next(ctx, cmds)
	}
}

// hammer makes workers x each calls of echo through rdb, each with its own
// key and argument, and fails t on any reply that is not the caller's own.
func hammer(t *testing.T, rdb redis.Scripter, prefix string, workers, each int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("%s{w%d}:%d", prefix, w, i%7)
				want := strconv.Itoa(w*1_000_000 + i)
				got, err := echo.Run(context.Background(), rdb, []string{key}, want).Text()
				if err != nil {
					errs <- fmt.Errorf("worker %d call %d: %w", w, i, err)
					return
				}
				if got != want {
					errs <- fmt.Errorf("worker %d call %d: got reply %q, want %q", w, i, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// ranOnce checks that each call of hammer ran exactly once.
func ranOnce(t *testing.T, admin redis.Cmdable, prefix string, workers, each int) {
	t.Helper()
	ctx := context.Background()
	for w := range workers {
		var sum int64
		for k := range 7 {
			n, err := admin.Get(ctx, fmt.Sprintf("%s{w%d}:%d", prefix, w, k)).Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			sum += n
		}
		if sum != int64(each) {
			t.Errorf("worker %d: its calls ran %d times, want %d", w, sum, each)
		}
	}
}

func newClient(t *testing.T, rdb redis.Scripter, opts ...batch.Option) *batch.Client {
	t.Helper()
	c, err := batch.New(rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRepliesRoutedAndPipelined(t *testing.T) {
	s := testredis.Shared(t)
	for _, inline := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", inline), func(t *testing.T) {
			raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: inline, PoolSize: 80})
			t.Cleanup(func() { raw.Close() })
			var p pipes
			raw.AddHook(&p)
			rdb := newClient(t, raw, batch.WithMaxInFlight(2))
			prefix := testredis.Prefix(t)
			const workers, each = 64, 200
			hammer(t, rdb, prefix, workers, each)
			ranOnce(t, raw, prefix, workers, each)
			sent := p.singles.Load() + p.piped.Load()
			if sent < workers*each {
				t.Errorf("sent %d commands for %d calls", sent, workers*each)
			}
			// 64 callers on 2 slots: most calls must share a pipeline.
			if trips := p.singles.Load() + p.pipelines.Load(); trips*2 > workers*each {
				t.Errorf("%d round trips for %d calls: want fewer than half, pipelines not formed (%d pipelines of %d commands)",
					trips, workers*each, p.pipelines.Load(), p.piped.Load())
			}
		})
	}
}

func TestLoneCallerSentAtOnce(t *testing.T) {
	raw := redis.NewClient(&redis.Options{Addr: testredis.Shared(t).Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { raw.Close() })
	var p pipes
	raw.AddHook(&p)
	rdb := newClient(t, raw)
	prefix := testredis.Prefix(t)
	hammer(t, rdb, prefix, 1, 1) // connects (go-redis pipelines its handshake)
	p.pipelines.Store(0)
	hammer(t, rdb, prefix+"a", 1, 50)
	ranOnce(t, raw, prefix+"a", 1, 50)
	if p.pipelines.Load() != 0 {
		t.Errorf("a lone caller went through %d pipelines, want none: sent at once", p.pipelines.Load())
	}
}

func TestNoScriptResendsOnlyWhatGotIt(t *testing.T) {
	s := testredis.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, PoolSize: 80})
	t.Cleanup(func() { raw.Close() })
	var p pipes
	raw.AddHook(&p)
	rdb := newClient(t, raw, batch.WithMaxInFlight(2))
	prefix := testredis.Prefix(t)
	const workers, each = 64, 100
	ctx := context.Background()
	hammer(t, rdb, prefix+"a:", workers, each) // learns the script
	ranOnce(t, raw, prefix+"a:", workers, each)

	// Flush the script cache again and again under load: every pipeline
	// in flight gets NOSCRIPT for some of its calls.
	stop := make(chan struct{})
	var flushes atomic.Int64
	flusher := sync.WaitGroup{}
	flusher.Go(func() {
		admin := redis.NewClient(&redis.Options{Addr: s.Addr})
		defer admin.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := admin.ScriptFlush(ctx).Err(); err != nil {
				t.Error(err)
				return
			}
			flushes.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	})
	p.evals.Store(0)
	hammer(t, rdb, prefix+"b:", workers, each)
	close(stop)
	flusher.Wait()
	// Every call ran exactly once: none that may have run was re-sent.
	ranOnce(t, raw, prefix+"b:", workers, each)
	if flushes.Load() == 0 {
		t.Fatal("no SCRIPT FLUSH ran")
	}
	// The script's text crossed the wire in a SCRIPT LOAD per pipeline that
	// met NOSCRIPT (2 in flight), and in an EVAL only when flushed again
	// between the load and the re-send; never in an EVAL per caller (about
	// 64 per flush, every call in flight).
	texts := p.evals.Load() + p.loads.Load()
	if p.loads.Load() == 0 || texts > 16*flushes.Load() {
		t.Errorf("%d flushes: %d SCRIPT LOAD and %d EVAL sent; want at least one load and at most 16 texts per flush",
			flushes.Load(), p.loads.Load(), p.evals.Load())
	}
}

func TestFirstUseLearnsScript(t *testing.T) {
	s := testredis.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { raw.Close() })
	var p pipes
	raw.AddHook(&p)
	rdb := newClient(t, raw)
	prefix := testredis.Prefix(t)
	hammer(t, rdb, prefix, 1, 3)
	ranOnce(t, raw, prefix, 1, 3)
	// EVALSHA (NOSCRIPT), then Eval sent as EVALSHA (NOSCRIPT), SCRIPT
	// LOAD and EVALSHA; then EVALSHA alone.
	if n := p.evals.Load(); n != 0 {
		t.Errorf("%d EVAL sent, want 0", n)
	}
	if n := p.loads.Load(); n != 1 {
		t.Errorf("%d SCRIPT LOAD sent, want 1", n)
	}
}

// slow blocks Redis for about ms milliseconds.
var slow = redis.NewScript(`
local t = redis.call('TIME')
local start = t[1] * 1000 + math.floor(t[2] / 1000)
repeat
  t = redis.call('TIME')
until t[1] * 1000 + math.floor(t[2] / 1000) - start >= tonumber(ARGV[1])
return 1`)

func TestCanceledCallerLeavesAtOnceAndIsDropped(t *testing.T) {
	for _, inline := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", inline), func(t *testing.T) {
			s := testredis.Start(t)
			raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: inline, ReadTimeout: 10 * time.Second})
			t.Cleanup(func() { raw.Close() })
			rdb := newClient(t, raw, batch.WithMaxInFlight(1))
			ctx := context.Background()
			if err := slow.Load(ctx, raw).Err(); err != nil {
				t.Fatal(err)
			}
			if err := echo.Load(ctx, raw).Err(); err != nil {
				t.Fatal(err)
			}
			// One slow call holds the only in-flight slot for 1.5s.
			var blockerDone atomic.Bool
			blocker := make(chan error, 1)
			go func() {
				err := slow.Run(ctx, rdb, []string{"slow"}, 1500).Err()
				blockerDone.Store(true)
				blocker <- err
			}()
			// Wait until the slow script runs (Redis answers nothing else).
			waitSlow(t, s.Addr)
			cctx, cancel := context.WithCancel(ctx)
			got := make(chan error, 1)
			go func() { got <- echo.Run(cctx, rdb, []string{"dropped"}, "x").Err() }()
			cancel()
			err := <-got
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("canceled caller: got %v, want context.Canceled", err)
			}
			if blockerDone.Load() {
				t.Fatal("the canceled caller returned only after the pipeline ahead of it")
			}
			if err := <-blocker; err != nil {
				t.Fatal(err)
			}
			// Its call was never sent.
			n, err := raw.Exists(ctx, "dropped").Result()
			if err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Error("the canceled caller's queued call was sent")
			}
		})
	}
}

// waitSlow waits until a script is running on addr.
func waitSlow(t *testing.T, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 50 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	for range 400 {
		// While a script runs, Redis replies BUSY or not at all.
		err := c.Ping(context.Background()).Err()
		if err != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the slow script never ran")
}

func TestCloseLeavesNoGoroutine(t *testing.T) {
	raw := redis.NewClient(&redis.Options{Addr: testredis.Shared(t).Addr, PoolSize: 80})
	t.Cleanup(func() { raw.Close() })
	before := runtime.NumGoroutine()
	rdb, err := batch.New(raw, batch.WithMaxInFlight(4))
	if err != nil {
		t.Fatal(err)
	}
	prefix := testredis.Prefix(t)
	hammer(t, rdb, prefix, 32, 50)
	if err := rdb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.EvalSha(context.Background(), "x", []string{"k"}).Err(); !errors.Is(err, batch.ErrClosed) {
		t.Errorf("call after Close: got %v, want ErrClosed", err)
	}
	// Close waits for its flushers; go-redis's own goroutines may take a
	// moment.
	var after int
	for range 100 {
		if after = runtime.NumGoroutine(); after <= before {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("goroutines: %d before, %d after Close", before, after)
}

// TestDroppedLeavesNothing: a Client that is never closed holds no
// goroutine once its calls have returned, and is collected.
func TestDroppedLeavesNothing(t *testing.T) {
	raw := redis.NewClient(&redis.Options{Addr: testredis.Shared(t).Addr, PoolSize: 80})
	t.Cleanup(func() { raw.Close() })
	rdb, err := batch.New(raw, batch.WithMaxInFlight(4))
	if err != nil {
		t.Fatal(err)
	}
	collected := make(chan struct{})
	runtime.AddCleanup(rdb, func(ch chan struct{}) { close(ch) }, collected)
	hammer(t, rdb, testredis.Prefix(t), 32, 50)
	rdb = nil
	for range 200 {
		runtime.GC()
		select {
		case <-collected:
			if n := flushing(); n != 0 {
				t.Errorf("%d flushers left running", n)
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("a dropped Client was never collected (%d flushers running)", flushing())
}

// flushing counts the goroutines running a lane's flusher.
func flushing() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte("batch.(*lane).flush("))
}

func TestCluster(t *testing.T) {
	cluster := testredis.SharedCluster(t)
	cc := cluster.Client(t)
	var p pipes
	cc.OnNewNode(func(c *redis.Client) { c.AddHook(&p) })
	rdb := newClient(t, cc, batch.WithMaxInFlight(2))
	if rdb.HonoursContext() {
		t.Error("a cluster client's batch client claims to honour contexts; slot loading does not")
	}
	prefix := testredis.Prefix(t)
	const workers, each = 48, 100
	hammer(t, rdb, prefix, workers, each)
	ranOnce(t, cc, prefix, workers, each)
	if p.pipelines.Load() == 0 {
		t.Error("no pipeline sent to any node")
	}
}

func TestRing(t *testing.T) {
	a, b := testredis.Start(t), testredis.Start(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr, "b": b.Addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { ring.Close() })
	var p pipes
	for _, c := range ring.GetShardClients() {
		c.AddHook(&p)
	}
	rdb := newClient(t, ring, batch.WithMaxInFlight(2))
	if !rdb.HonoursContext() {
		t.Error("a ring's batch client does not claim to honour contexts")
	}
	prefix := testredis.Prefix(t)
	const workers, each = 48, 100
	hammer(t, rdb, prefix, workers, each)
	ranOnce(t, ring, prefix, workers, each)
	ctx := context.Background()
	na, _ := redis.NewClient(&redis.Options{Addr: a.Addr}).DBSize(ctx).Result()
	nb, _ := redis.NewClient(&redis.Options{Addr: b.Addr}).DBSize(ctx).Result()
	if na == 0 || nb == 0 {
		t.Errorf("keys per shard %d and %d: want both used", na, nb)
	}
	if p.pipelines.Load() == 0 {
		t.Error("no pipeline sent to any shard")
	}
}

func TestOptions(t *testing.T) {
	raw := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { raw.Close() })
	for _, tc := range []struct {
		name string
		rdb  redis.Scripter
		opt  batch.Option
		want string
	}{
		{"nil client", nil, nil, "redis client is nil"},
		{"in flight 0", raw, batch.WithMaxInFlight(0), "WithMaxInFlight: k must be in [1, 256], got 0"},
		{"in flight 257", raw, batch.WithMaxInFlight(257), "WithMaxInFlight: k must be in [1, 256], got 257"},
		{"batch 0", raw, batch.WithMaxBatch(0), "WithMaxBatch: n must be in [1, 10000], got 0"},
		{"queue -1", raw, batch.WithMaxQueue(-1), "WithMaxQueue: n must be in [1, 1048576], got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := batch.New(tc.rdb, tc.opt)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, strategy.ErrInvalidOption) {
				t.Errorf("error %v does not wrap ErrInvalidOption", err)
			}
			if !strings.HasSuffix(err.Error(), tc.want) || strings.Count(err.Error(), "ratelimit:") != 1 {
				t.Errorf("got %q, want it to end in %q with one prefix", err, tc.want)
			}
		})
	}
	if _, err := batch.New(raw, nil); err != nil {
		t.Errorf("a nil option: %v", err)
	}
}

func TestQueueBound(t *testing.T) {
	s := testredis.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { raw.Close() })
	rdb := newClient(t, raw, batch.WithMaxInFlight(1), batch.WithMaxQueue(4))
	ctx := context.Background()
	if err := slow.Load(ctx, raw).Err(); err != nil {
		t.Fatal(err)
	}
	if err := echo.Load(ctx, raw).Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- slow.Run(ctx, rdb, []string{"slow"}, 2000).Err() }()
	waitSlow(t, s.Addr)
	var wg sync.WaitGroup
	var full, ok atomic.Int64
	for i := range 10 {
		wg.Go(func() {
			err := echo.Run(ctx, rdb, []string{"q" + strconv.Itoa(i)}, "x").Err()
			switch {
			case errors.Is(err, batch.ErrQueueFull):
				full.Add(1)
			case err == nil:
				ok.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if full.Load() != 6 || ok.Load() != 4 {
		t.Errorf("10 calls behind a full slot, queue of 4: %d served, %d refused; want 4 and 6", ok.Load(), full.Load())
	}
}
