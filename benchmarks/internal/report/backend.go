package report

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/benchmarks/internal/targets"
)

// backend is the Redis the speed and memory runs use.
type backend struct {
	kind    string // BackendMiniredis, BackendRedis or BackendCluster
	mr      *miniredis.Miniredis
	work    redis.UniversalClient // decisions only; round trips counted by a hook
	admin   redis.UniversalClient // INFO, SCAN, MEMORY USAGE, cleanup
	rts     atomic.Int64          // round trips made by work
	version string
	masters []*redis.Client // a cluster's masters, for INFO and SCAN
	// batched: a client like work but with ContextTimeoutEnabled, as the
	// batch package recommends (a lone call is then sent on the caller's
	// goroutine), its round trips counted too: the constructors batch it
	// by default; batch wraps it for the floor, and auto is its go-redis
	// AutoPipeline (evaluated by targets.Evaluations' rows)
	batched    redis.UniversalClient
	batch      *batch.Client
	autoClient *redis.Client
	auto       *redis.AutoPipeliner
}

// openBatching opens b.batched, b.batch and (on a single server) b.auto.
func (b *backend) openBatching() error {
	switch w := b.work.(type) {
	case *redis.Client:
		o := w.Options()
		c := redis.NewClient(&redis.Options{Addr: o.Addr, PoolSize: o.PoolSize, ReadTimeout: o.ReadTimeout,
			WriteTimeout: o.WriteTimeout, ContextTimeoutEnabled: true})
		c.AddHook(counter{&b.rts})
		b.batched = c
		// go-redis's AutoPipeline gets a client of its own: its engine
		// keeps goroutines and connections that must not slow the
		// batched rows down.
		ac := redis.NewClient(&redis.Options{Addr: o.Addr, PoolSize: o.PoolSize, ReadTimeout: o.ReadTimeout,
			WriteTimeout: o.WriteTimeout, ContextTimeoutEnabled: true})
		ac.AddHook(counter{&b.rts})
		b.autoClient = ac
		if ap, err := ac.AutoPipeline(); err == nil {
			b.auto = ap
		}
	case *redis.ClusterClient:
		o := w.Options()
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: o.Addrs, PoolSize: o.PoolSize, ContextTimeoutEnabled: true})
		c.OnNewNode(func(c *redis.Client) { c.AddHook(counter{&b.rts}) })
		b.batched = c
	default:
		return fmt.Errorf("report: cannot batch a %T", b.work)
	}
	c, err := batch.New(b.batched)
	if err != nil {
		return err
	}
	b.batch = c
	return nil
}

// env is the targets' environment on b.
func (b *backend) env(o Options, prefix string) targets.Env {
	e := targets.Env{RDB: b.work, Limit: o.Limit, Prefix: prefix}
	if b.batch != nil {
		e.Batch = b.batch
		e.Default = b.batched
	}
	if b.auto != nil {
		e.AutoPipe = b.auto
	}
	if b.real() {
		switch c := b.work.(type) {
		case *redis.Client:
			e.Addrs = []string{c.Options().Addr}
		case *redis.ClusterClient:
			e.Addrs = c.Options().Addrs
		}
	}
	return e
}

// closeDecider closes d when it holds a client of its own.
func closeDecider(d targets.Decider) {
	if c, ok := d.(io.Closer); ok {
		c.Close()
	}
}

// counter counts round trips: one per command or pipeline sent to a node.
type counter struct{ n *atomic.Int64 }

func (c counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

func openBackend(ctx context.Context, o Options) (*backend, error) {
	b := &backend{kind: o.Backend}
	pool := 8
	for _, c := range o.Concurrency {
		pool = max(pool, c+8)
	}
	switch o.Backend {
	case BackendMiniredis:
		mr, err := miniredis.Run()
		if err != nil {
			return nil, err
		}
		b.mr = mr
		b.version = "miniredis"
		// miniredis shares this process's CPUs with the clients: on a busy
		// machine a reply can take seconds, which is no failure of Redis.
		b.work = redis.NewClient(&redis.Options{Addr: mr.Addr(), PoolSize: pool, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
		b.admin = redis.NewClient(&redis.Options{Addr: mr.Addr()})
		b.work.AddHook(counter{&b.rts})
		return b, b.openBatching()
	case BackendRedis:
		if len(o.Addrs) != 1 {
			return nil, fmt.Errorf("report: backend redis needs one address, got %d", len(o.Addrs))
		}
		w := redis.NewClient(&redis.Options{Addr: o.Addrs[0], PoolSize: pool})
		w.AddHook(counter{&b.rts})
		b.work = w
		b.admin = redis.NewClient(&redis.Options{Addr: o.Addrs[0]})
	case BackendCluster:
		if len(o.Addrs) == 0 {
			return nil, fmt.Errorf("report: backend cluster needs addresses")
		}
		w := redis.NewClusterClient(&redis.ClusterOptions{Addrs: o.Addrs, PoolSize: pool})
		w.OnNewNode(func(c *redis.Client) { c.AddHook(counter{&b.rts}) })
		b.work = w
		b.admin = redis.NewClusterClient(&redis.ClusterOptions{Addrs: o.Addrs})
	default:
		return nil, fmt.Errorf("report: unknown backend %q", o.Backend)
	}
	if err := b.admin.Ping(ctx).Err(); err != nil {
		b.close()
		return nil, fmt.Errorf("report: %s: %w", strings.Join(o.Addrs, ","), err)
	}
	if err := b.openBatching(); err != nil {
		b.close()
		return nil, err
	}
	if o.Backend == BackendCluster {
		if err := b.findMasters(ctx, o); err != nil {
			b.close()
			return nil, err
		}
	}
	var v []string
	err := b.eachNode(ctx, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		v = append(v, infoFields(info)["redis_version"])
		return nil
	})
	if err != nil {
		b.close()
		return nil, fmt.Errorf("report: INFO server: %w", err)
	}
	b.version = "redis " + v[0]
	if b.kind == BackendCluster {
		b.version = fmt.Sprintf("redis %s, cluster of %d masters", v[0], len(v))
	}
	return b, nil
}

func (b *backend) real() bool { return b.mr == nil }

func (b *backend) close() {
	if b.auto != nil {
		b.auto.Close()
		b.autoClient.Close()
	}
	if b.batch != nil {
		b.batch.Close()
	}
	if b.batched != nil {
		b.batched.Close()
	}
	b.work.Close()
	b.admin.Close()
	for _, m := range b.masters {
		m.Close()
	}
	if b.mr != nil {
		b.mr.Close()
	}
}

// eachNode runs fn on the single server, or on every master of a cluster
// (one at a time, so fn needs no locking).
func (b *backend) eachNode(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	if c, ok := b.admin.(*redis.Client); ok {
		return fn(ctx, c)
	}
	for _, n := range b.masters {
		if err := fn(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// findMasters waits until the cluster's slots are all served and then
// connects to each master, so that counters are always summed over the same
// nodes (a client's view of a young cluster may still lack some).
func (b *backend) findMasters(ctx context.Context, o Options) error {
	c := b.admin.(*redis.ClusterClient)
	deadline := time.Now().Add(20 * time.Second)
	for {
		shards, err := c.ClusterShards(ctx).Result() // Redis >= 7.0; CLUSTER SLOTS is deprecated
		if err == nil {
			covered := int64(0)
			addrs := map[string]bool{}
			for _, s := range shards {
				for _, n := range s.Nodes {
					if n.Role != "master" || n.Health != "online" || len(s.Slots) == 0 {
						continue
					}
					for _, r := range s.Slots {
						covered += r.End - r.Start + 1
					}
					host := n.IP
					if host == "" {
						host = n.Endpoint
					}
					addrs[net.JoinHostPort(host, strconv.FormatInt(n.Port, 10))] = true
				}
			}
			if covered == 16384 {
				for _, a := range slices.Sorted(maps.Keys(addrs)) {
					b.masters = append(b.masters, redis.NewClient(&redis.Options{Addr: a}))
				}
				return nil
			}
			err = fmt.Errorf("%d of 16384 slots served", covered)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("report: cluster at %s: %w", strings.Join(o.Addrs, ","), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stats is a snapshot of the server's counters.
type stats struct {
	calls map[string]int64 // per command, lowercase; INFO's own calls left out
	total int64
	cpu   float64 // used_cpu_sys + used_cpu_user, seconds; real Redis only
}

func (b *backend) snapshot(ctx context.Context) (stats, error) {
	if b.mr != nil {
		// miniredis counts every command it dispatches, those a script
		// calls included; it keeps no per-command counts.
		return stats{total: int64(b.mr.CommandCount())}, nil
	}
	s := stats{calls: map[string]int64{}}
	err := b.eachNode(ctx, func(ctx context.Context, c *redis.Client) error {
		cs, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		for k, v := range infoFields(cs) {
			name, ok := strings.CutPrefix(k, "cmdstat_")
			if !ok || name == "info" {
				continue
			}
			for _, f := range strings.Split(v, ",") {
				if n, ok := strings.CutPrefix(f, "calls="); ok {
					calls, _ := strconv.ParseInt(n, 10, 64)
					s.calls[name] += calls
					s.total += calls
				}
			}
		}
		cpu, err := c.Info(ctx, "cpu").Result()
		if err != nil {
			return err
		}
		f := infoFields(cpu)
		sys, _ := strconv.ParseFloat(f["used_cpu_sys"], 64)
		user, _ := strconv.ParseFloat(f["used_cpu_user"], 64)
		s.cpu += sys + user
		return nil
	})
	return s, err
}

func infoFields(info string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

// keysMatching returns the keys that contain token, on every node.
func (b *backend) keysMatching(ctx context.Context, token string) ([]string, error) {
	var keys []string
	err := b.eachNode(ctx, func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, "*"+token+"*", 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		return it.Err()
	})
	return keys, err
}

// bytesOf returns the sum of MEMORY USAGE (every element counted) of keys.
func (b *backend) bytesOf(ctx context.Context, keys []string) (int64, error) {
	var sum int64
	for _, k := range keys {
		n, err := b.admin.MemoryUsage(ctx, k, 0).Result()
		if err != nil && err != redis.Nil {
			return 0, fmt.Errorf("MEMORY USAGE %s: %w", k, err)
		}
		sum += n
	}
	return sum, nil
}

// unlink deletes keys one by one (they may live in different slots).
func (b *backend) unlink(ctx context.Context, keys []string) error {
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 500)]
		keys = keys[len(batch):]
		_, err := b.admin.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range batch {
				p.Unlink(ctx, k)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
