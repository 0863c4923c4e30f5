package ratelimit_test

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/multilimit"
	"github.com/ratekit/ratelimit/strategy"
)

// stackClient is a Redis client that records, at each script call, the
// packages of this module on the caller's stack, outermost first.
type stackClient struct {
	*redis.Client
	mu    sync.Mutex
	paths [][]string
}

const module = "github.com/ratekit/ratelimit"

func (c *stackClient) record() {
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	var path []string
	for {
		f, more := frames.Next()
		if pkg := packageOf(f.Function); strings.HasPrefix(pkg, module) && !strings.HasSuffix(pkg, "_test") {
			if len(path) == 0 || path[len(path)-1] != pkg {
				path = append(path, pkg)
			}
		}
		if !more {
			break
		}
	}
	slices.Reverse(path)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paths = append(c.paths, path)
}

// packageOf returns the import path of a function's package from its
// runtime name ("github.com/x/y/pkg.(*T[...]).M").
func packageOf(fn string) string {
	slash := strings.LastIndex(fn, "/")
	dot := strings.Index(fn[slash+1:], ".")
	if dot < 0 {
		return fn
	}
	return fn[:slash+1+dot]
}

func (c *stackClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	c.record()
	return c.Client.EvalSha(ctx, sha, keys, args...)
}

func (c *stackClient) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	c.record()
	return c.Client.Eval(ctx, script, keys, args...)
}

// TestDecisionPath checks that a decision goes down from the facade to
// Redis without going back into a package it has left: on the stack at the
// script call, no package of this module appears twice, and the facade,
// the guard and the engine come in that order. The client honours its
// context, so the guard calls the strategy on the caller's goroutine and
// the whole path is on one stack.
func TestDecisionPath(t *testing.T) {
	mr := miniredis.RunT(t)
	lim := strategy.Limit{Limit: 10, Window: time.Minute}
	cases := map[string]ratelimit.Config{
		"sharded":   {Algorithm: strategy.FixedWindow, Limit: 10, Window: time.Minute, Shards: 2},
		"candidate": {Algorithm: strategy.SlidingLog, Limit: 10, Window: time.Minute, Candidate: &ratelimit.Config{Algorithm: strategy.GCRA, Limit: 10, Window: time.Minute}},
		"multi": {Algorithm: ratelimit.Multi, Rules: []multilimit.Rule{
			{Algorithm: strategy.SlidingLog, Limit: lim}, {Algorithm: strategy.FixedWindow, Limit: strategy.PerHour(100)}}},
	}
	for _, a := range strategy.Algorithms() {
		cases[string(a)] = ratelimit.Config{Algorithm: a, Limit: 10, Window: time.Minute}
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			rdb := &stackClient{Client: redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})}
			t.Cleanup(func() { rdb.Close() })
			cfg.Prefix = "rl:" + name + ":"
			l, err := ratelimit.New(rdb, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.AllowN(context.Background(), "user:1", 1); err != nil {
				t.Fatal(err)
			}
			rdb.mu.Lock()
			defer rdb.mu.Unlock()
			if len(rdb.paths) == 0 {
				t.Fatal("no script call recorded")
			}
			for _, path := range rdb.paths {
				if path[0] == module+"/compare" {
					// a candidate's comparison in the background: its own
					// goroutine, from compare down
					path = append([]string{module, module + "/internal/guard"}, path...)
				}
				seen := map[string]bool{}
				for _, p := range path {
					if seen[p] {
						t.Errorf("the decision went back into %s: %v", p, path)
					}
					seen[p] = true
				}
				if i, j, k := slices.Index(path, module), slices.Index(path, module+"/internal/guard"), slices.Index(path, module+"/internal/engine"); i != 0 || j <= i || k <= j {
					t.Errorf("path %v: want the facade, then internal/guard, then internal/engine", path)
				}
			}
		})
	}
}
