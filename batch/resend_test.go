package batch_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/testredis"
)

// A queued caller leaves when its own context ends, whatever the Client
// and the pipeline ahead of it do, and its call is never sent.
func TestQueuedCallerLeavesOnItsOwnContext(t *testing.T) {
	canceled := func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }
	deadline := func() (context.Context, context.CancelFunc) {
		// long enough for the caller to be queued first on a loaded machine
		return context.WithTimeout(context.Background(), time.Second)
	}
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"canceled", canceled, context.Canceled},
		{"deadline", deadline, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, raw, rdb, p := hung(t, true, batch.WithMaxInFlight(1))
			resume := pause(t, s)
			blocker := make(chan error, 1)
			go func() { blocker <- echo.Run(context.Background(), rdb, []string{"blocker"}, "x").Err() }()
			sent(t, p, 1) // the blocker holds the only slot: the next call is queued
			ctx, cancel := tc.ctx()
			defer cancel()
			got := make(chan error, 1)
			go func() { got <- echo.Run(ctx, rdb, []string{"left"}, "x").Err() }()
			queued(t, rdb, 1)
			if tc.want == context.Canceled {
				cancel()
			}
			if err := waitErr(t, "the queued caller whose context ended", got); !errors.Is(err, tc.want) {
				t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
			}
			resume()
			if err := waitErr(t, "the blocker after Redis resumed", blocker); err != nil {
				t.Fatal(err)
			}
			hammer(t, rdb, testredis.Prefix(t), 1, 2) // a pipeline after it, if any, has gone
			if n, err := raw.Exists(context.Background(), "left").Result(); err != nil || n != 0 {
				t.Errorf("%s: the call of the caller that left was sent (EXISTS = %d, %v)", tc.name, n, err)
			}
		})
	}
}

// scriptA and scriptB return which script and which caller ran them, and
// count their runs per key.
var (
	scriptA = redis.NewScript(`redis.call('INCR', KEYS[1]) return 'A:' .. ARGV[1]`)
	scriptB = redis.NewScript(`redis.call('INCR', KEYS[1]) return 'B:' .. ARGV[1]`)
)

// When only some calls of a pipeline get NOSCRIPT, only those are re-sent,
// and each caller gets its own reply.
func TestNoScriptInPartOfAPipeline(t *testing.T) {
	s := testredis.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, ReadTimeout: -1, PoolSize: 64})
	t.Cleanup(func() { raw.Close() })
	var p pipes
	raw.AddHook(&p)
	rdb := newClient(t, raw, batch.WithMaxInFlight(1))
	ctx := context.Background()
	// The Client knows both scripts; Redis has only A.
	for _, sc := range []*redis.Script{scriptA, scriptB} {
		if err := sc.Load(ctx, rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := raw.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := scriptA.Load(ctx, raw).Err(); err != nil {
		t.Fatal(err)
	}
	if err := raw.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	singles := p.singles.Load()
	resume := pause(t, s)
	blocker := make(chan error, 1)
	go func() { blocker <- scriptA.Run(ctx, rdb, []string{"blocker"}, "x").Err() }()
	eventually(t, "the blocker was not sent", func() bool { return p.singles.Load() > singles })
	// Queued in this order, sent as one pipeline: A B A B A B A B.
	type result struct {
		i    int
		got  string
		want string
		err  error
	}
	const n = 8
	results := make(chan result, n)
	for i := range n {
		sc, name := scriptA, "A"
		if i%2 == 1 {
			sc, name = scriptB, "B"
		}
		arg := strconv.Itoa(i)
		go func() {
			got, err := sc.Run(ctx, rdb, []string{"k" + arg}, arg).Text()
			results <- result{i, got, name + ":" + arg, err}
		}()
		queued(t, rdb, i+1)
	}
	p.pipelines.Store(0)
	p.loads.Store(0)
	resume()
	if err := waitErr(t, "the blocker", blocker); err != nil {
		t.Fatal(err)
	}
	for range n {
		var r result
		select {
		case r = <-results:
		case <-time.After(patience):
			t.Fatal("a caller is still blocked")
		}
		if r.err != nil || r.got != r.want {
			t.Errorf("caller %d: got %q, %v; want %q", r.i, r.got, r.err, r.want)
		}
	}
	for i := range n {
		if runs, err := raw.Get(ctx, "k"+strconv.Itoa(i)).Int(); err != nil || runs != 1 {
			t.Errorf("caller %d: its call ran %d times (%v), want once", i, runs, err)
		}
	}
	if p.pipelines.Load() == 0 || p.loads.Load() == 0 {
		t.Errorf("%d pipelines, %d SCRIPT LOAD: want the calls in a pipeline that met NOSCRIPT", p.pipelines.Load(), p.loads.Load())
	}
}
