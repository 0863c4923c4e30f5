package sharded

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/gcra"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/slidingcounter"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

// Every Redis strategy of the module plans its Peek and Reset as calls,
// and decides a shard on a view of its own.
var (
	_ engine.Planner = (*compactlog.Limiter)(nil)
	_ engine.Planner = (*fixedwindow.Limiter)(nil)
	_ engine.Planner = (*gcra.Limiter)(nil)
	_ engine.Planner = (*slidingcounter.Limiter)(nil)
	_ engine.Planner = (*slidinglog.Limiter)(nil)
	_ engine.Planner = (*tokenbucket.Limiter)(nil)
	_ engine.Sharder = (*compactlog.Limiter)(nil)
	_ engine.Sharder = (*fixedwindow.Limiter)(nil)
	_ engine.Sharder = (*gcra.Limiter)(nil)
	_ engine.Sharder = (*slidingcounter.Limiter)(nil)
	_ engine.Sharder = (*slidinglog.Limiter)(nil)
	_ engine.Sharder = (*tokenbucket.Limiter)(nil)
)

// roundTrips is a go-redis hook that counts script calls sent alone and
// pipelines that carry script calls.
type roundTrips struct {
	alone, pipelines, scripts atomic.Int64
}

func isScript(c redis.Cmder) bool { return c.Name() == "evalsha" || c.Name() == "eval" }

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			r.alone.Add(1)
			r.scripts.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := int64(0)
		for _, c := range cmds {
			if isScript(c) {
				n++
			}
		}
		if n > 0 {
			r.pipelines.Add(1)
			r.scripts.Add(n)
		}
		return next(ctx, cmds)
	}
}

func (r *roundTrips) reset() { r.alone.Store(0); r.pipelines.Store(0); r.scripts.Store(0) }

// Peek and Reset of a sharded subject send one pipeline per node, not one
// round trip per shard, for every Redis strategy; the results are those of
// the shards read one by one.
func TestPeekAndResetPipelined(t *testing.T) {
	const shards = 8
	builders := map[string]func(redis.Scripter, strategy.Limit, ...strategy.Option) (strategy.Strategy, error){
		"compactlog": func(r redis.Scripter, l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return compactlog.New(r, l, o...)
		},
		"fixedwindow": func(r redis.Scripter, l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return fixedwindow.New(r, l, o...)
		},
		"gcra": func(r redis.Scripter, l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return gcra.New(r, l, o...)
		},
		"slidingcounter": func(r redis.Scripter, l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return slidingcounter.New(r, l, o...)
		},
		"slidinglog": func(r redis.Scripter, l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return slidinglog.New(r, l, o...)
		},
		"tokenbucket": func(r redis.Scripter, l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return tokenbucket.New(r, l, o...)
		},
	}
	for _, backend := range []string{"redis", "cluster"} {
		var trips roundTrips
		var rdb redis.Scripter
		var flush func() error
		maxPipelines := int64(1)
		switch backend {
		case "redis":
			c := redis.NewClient(&redis.Options{Addr: testredis.Shared(t).Addr})
			c.AddHook(&trips)
			t.Cleanup(func() { c.Close() })
			rdb = c
			flush = func() error { return c.ScriptFlush(ctx).Err() }
		case "cluster":
			cl := testredis.SharedCluster(t)
			cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), NewClient: func(o *redis.Options) *redis.Client {
				c := redis.NewClient(o)
				c.AddHook(&trips) // counts what each node receives
				return c
			}})
			t.Cleanup(func() { cc.Close() })
			rdb = cc
			flush = func() error {
				return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.ScriptFlush(ctx).Err() })
			}
			maxPipelines = int64(len(cl.Nodes))
		}
		for name, mk := range builders {
			t.Run(backend+"/"+name, func(t *testing.T) {
				clock := conformance.NewClock(conformance.Epoch)
				opts := []strategy.Option{strategy.WithClock(clock), strategy.WithPrefix(testredis.Prefix(t))}
				l := mustNew(t, shards, strategy.PerMinute(80), func(lim strategy.Limit) (strategy.Strategy, error) {
					return mk(rdb, lim, opts...)
				}, WithProbes(shards))
				if err := l.Reset(ctx, "hot"); err != nil { // loads the DEL script, the first time
					t.Fatal(err)
				}
				for range 30 {
					if _, err := l.AllowN(ctx, "hot", 1); err != nil {
						t.Fatal(err)
					}
				}
				// the subject as a whole, read shard by shard
				all := make([]int, shards)
				res := make([]strategy.Result, shards)
				for i := range shards {
					all[i] = i
					var err error
					if res[i], err = l.call(ctx, i, "hot", peek); err != nil {
						t.Fatal(err)
					}
				}
				want := l.combine(all, res)
				if want.Allowed {
					want.RetryAfter = 0
				}
				if _, err := l.Peek(ctx, "hot"); err != nil { // loads the script for many requests
					t.Fatal(err)
				}
				trips.reset()
				got, err := l.Peek(ctx, "hot")
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("Peek = %+v, want %+v (the shards read one by one)", got, want)
				}
				// one script call per node for many shards (a cluster: per hash tag)
				if a, p, s := trips.alone.Load(), trips.pipelines.Load(), trips.scripts.Load(); a+p < 1 || a+p > maxPipelines || s < 1 || s > shards || backend == "redis" && s != 1 {
					t.Errorf("Peek of %d shards: %d scripts alone, %d in %d pipelines; want 1 to %d round trips of at most %d scripts (one on a single node)",
						shards, a, s, p, maxPipelines, shards)
				}
				trips.reset()
				if err := l.Reset(ctx, "hot"); err != nil {
					t.Fatal(err)
				}
				if a, p, s := trips.alone.Load(), trips.pipelines.Load(), trips.scripts.Load(); a != 0 || p < 1 || p > maxPipelines || s != shards {
					t.Errorf("Reset of %d shards: %d scripts alone, %d in %d pipelines; want none alone, %d in 1 to %d pipelines",
						shards, a, s, p, shards, maxPipelines)
				}
				if r, err := l.Peek(ctx, "hot"); err != nil || r.Remaining != 80 {
					t.Errorf("Peek after Reset = %+v, %v; want Remaining 80", r, err)
				}
				// after the script cache is lost, a NOSCRIPT reply in the
				// pipeline is answered by loading the script and sending
				// only that call again
				l.AllowN(ctx, "hot", 1)
				if err := flush(); err != nil {
					t.Fatal(err)
				}
				if r, err := l.Peek(ctx, "hot"); err != nil || r.Remaining != 79 {
					t.Errorf("Peek after SCRIPT FLUSH = %+v, %v; want Remaining 79", r, err)
				}
			})
		}
	}
}

// MaxShards bounds the shards of New.
func TestMaxShards(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	if _, err := New(MaxShards+1, strategy.PerMinute(1<<20), localLog(clock)); !errors.Is(err, strategy.ErrInvalidOption) ||
		!strings.Contains(err.Error(), fmt.Sprintf("shards must be <= %d (MaxShards), got %d", MaxShards, MaxShards+1)) {
		t.Fatalf("New(MaxShards+1) = %v; want an error naming shards and MaxShards", err)
	}
	if _, err := New(1_000_000, strategy.PerMinute(1<<20), localLog(clock)); err == nil {
		t.Fatal("New(1,000,000 shards): no error")
	}
	l, err := New(MaxShards, strategy.PerMinute(1<<20), localLog(clock))
	if err != nil || l.Shards() != MaxShards {
		t.Fatalf("New(MaxShards) = %v, %v; want %d shards", l, err, MaxShards)
	}
	_ = time.Second
}
