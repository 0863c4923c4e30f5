package strategy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// commandLog records the name of every command a go-redis client sends,
// alone or in a pipeline.
type commandLog struct {
	mu    sync.Mutex
	names []string
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.add(cmd)
		return next(ctx, cmd)
	}
}

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			l.add(c)
		}
		return next(ctx, cmds)
	}
}

func (l *commandLog) add(cmd redis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	name := cmd.Name()
	if args := cmd.Args(); name == "script" && len(args) > 1 {
		name = fmt.Sprintf("script %v", args[1])
	}
	l.names = append(l.names, strings.ToLower(name))
}

func (l *commandLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.names
	l.names = nil
	return n
}

// TestBatchedByDefault checks that every Redis constructor sends its
// calls through the batching client shared by default on a client with
// ContextTimeoutEnabled, and alone with WithoutBatching or on a client
// without it. What tells them apart is NOSCRIPT recovery, one decision
// after SCRIPT FLUSH: batching loads the script (SCRIPT LOAD) and sends
// EVALSHA again, a direct call falls back to EVAL. The server is its own:
// another test's script loaded between the flush and the call would hide
// the difference.
func TestBatchedByDefault(t *testing.T) {
	srv := testredis.Start(t)
	admin := srv.Client(t)
	ctx := context.Background()
	for _, c := range constructors {
		if strings.Contains(c.name, "twin") {
			continue
		}
		for _, tc := range []struct {
			name    string
			cte     bool
			opts    []strategy.Option
			batched bool
		}{
			{"ContextTimeoutEnabled", true, nil, true},
			{"ContextTimeoutEnabled/WithoutBatching", true, []strategy.Option{strategy.WithoutBatching()}, false},
			{"without ContextTimeoutEnabled", false, nil, false},
		} {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				log := &commandLog{}
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: tc.cte})
				t.Cleanup(func() { rdb.Close() })
				rdb.AddHook(log)
				st, err := c.new(rdb, strategy.PerMinute(5), append([]strategy.Option{strategy.WithPrefix(testredis.Prefix(t))}, tc.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				if err := admin.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				if r, err := st.AllowN(ctx, "subject", 1); err != nil || !r.Allowed {
					t.Fatalf("AllowN = %+v, %v", r, err)
				}
				got := log.take()
				loaded, evaled := slices.Contains(got, "script load"), slices.Contains(got, "eval")
				if tc.batched && (!loaded || evaled) {
					t.Fatalf("commands %q: want SCRIPT LOAD and no EVAL (the shared batching client)", got)
				}
				if !tc.batched && (loaded || !evaled) {
					t.Fatalf("commands %q: want EVAL and no SCRIPT LOAD (each call alone)", got)
				}
			})
		}
	}
}
