package propertytests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/sharded"
	"github.com/ratekit/ratelimit/strategy"
)

func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }

var ctx = context.Background()

// backend is where a strategy keeps its state during a property run.
type backend struct {
	name    string
	windows []time.Duration // the windows cases pick from
	redis   bool            // Redis-backed (keys and TTLs can be inspected)
	// open prepares what the property run shares (a server, clients) and
	// returns the builder of one case's environment.
	open func(t *testing.T) envBuilder
}

// envBuilder builds a fresh environment for one case: subject s under lim
// with the clock at start. twin also builds the local twin on the same
// clock.
type envBuilder func(s subject, lim strategy.Limit, start time.Time, twin bool) (*env, error)

var (
	// Windows that most limits do not divide, so that rates are fractions
	// of a unit per millisecond and rounding shows.
	shortWindows = []time.Duration{1000 * time.Millisecond, 1500 * time.Millisecond, 250 * time.Millisecond, 61 * time.Millisecond}
	// On a real Redis TTLs run in real time while the client clock jumps
	// and stands still during a batch. Windows of minutes make every TTL a
	// script sets (a window, or the time one unit takes to refill) far
	// longer than a case lasts, so no key expires while its state matters;
	// fixed windows, whose TTL is what is left of the window, also get a
	// guard (see env.guard).
	longWindows = []time.Duration{300001 * time.Millisecond, 450 * time.Second, 600007 * time.Millisecond}
)

var (
	backendMiniredis = backend{name: "miniredis", windows: shortWindows, redis: true, open: openMiniredis(false, false)}
	backendMiniTime  = backend{name: "miniredis-time", windows: shortWindows, redis: true, open: openMiniredis(true, false)}
	// "redis": a real Redis, each host on a client with
	// ContextTimeoutEnabled, its strategies batched by default.
	backendRedis = backend{name: "redis", windows: longWindows, redis: true, open: openRedis(false)}
	backendLocal = backend{name: "local", windows: shortWindows, open: openLocal}
	// The Redis backends again, each host's client wrapped in a
	// batch.Client with one pipeline in flight, so that a host's concurrent
	// requests share pipelines.
	backendMiniBatched  = backend{name: "miniredis-batched", windows: shortWindows, redis: true, open: openMiniredis(false, true)}
	backendRedisBatched = backend{name: "redis-batched", windows: longWindows, redis: true, open: openRedis(true)}
	// A real Redis with one replica, every strategy in the durability
	// mode (strategy.WithReplicas(1, ...)), direct and batched.
	backendDurable        = backend{name: "redis-durable", windows: longWindows, redis: true, open: openDurable(false)}
	backendDurableBatched = backend{name: "redis-durable-batched", windows: longWindows, redis: true, open: openDurable(true)}
	allBackends           = []backend{backendMiniredis, backendMiniTime, backendRedis, backendLocal, backendMiniBatched, backendRedisBatched,
		backendDurable, backendDurableBatched}
)

// hostClient is the client a host's strategies use: c itself, or c behind a
// batch.Client (closed when t ends) whose calls all go through its queue.
func hostClient(t *testing.T, c redis.Scripter, batched bool) redis.Scripter {
	if !batched {
		return c
	}
	return conformance.Batched(t, c, batch.WithMaxInFlight(1))
}

// stats counts what a property run exercised, so that a run that never
// denies (or never allows) anything fails instead of passing vacuously.
type stats struct {
	cases, calls, allowed, denied, never atomic.Int64
	local                                atomic.Int64 // decisions the lease subjects' leases made in process
}

func (st *stats) String() string {
	s := fmt.Sprintf("%d cases, %d calls: %d allowed, %d denied (%d never)",
		st.cases.Load(), st.calls.Load(), st.allowed.Load(), st.denied.Load(), st.never.Load())
	if n := st.local.Load(); n > 0 {
		s += fmt.Sprintf(", %d decided by leases in process", n)
	}
	return s
}

// env is the state of one case: a clock every host reads, one strategy
// instance per app host, and ways to look at the backend.
type env struct {
	sub   subject
	lim   strategy.Limit
	clock *conformance.Clock
	hosts []strategy.Strategy
	twin  strategy.Strategy // the local twin on the same clock, when asked for
	// step moves the backend's own time with the clock (miniredis TTLs and
	// TIME); nil when only the clock moves.
	step func(d time.Duration)
	// guard, when set, moves a time the clock would reach to the one it
	// reaches instead (see fixedWindowGuard).
	guard func(now int64) int64
	// keys returns the case's keys with their TTL (-1: none); nil for local.
	keys func() (map[string]time.Duration, error)
	// card returns the number of entries of a sorted-set key; nil for
	// local.
	card func(key string) (int64, error)
	// stats, when set, counts the calls
	stats *stats
	// durable, on the durability backends: the primary and its replica.
	durable *durableEnv
}

// durableEnv is where a durable strategy's state lives: a primary, whose
// WAITs are counted, and its replica.
type durableEnv struct {
	primary, replica *redis.Client
	primaryAddr      string
	prefix           string
}

// advance moves the clock ms forward (more when a guard says so) and
// returns how far it moved.
func (e *env) advance(ms int64) int64 {
	if e.guard != nil {
		ms = e.guard(e.now()+ms) - e.now()
	}
	if ms <= 0 {
		return 0
	}
	d := time.Duration(ms) * time.Millisecond
	e.clock.Advance(d)
	if e.step != nil {
		e.step(d)
	}
	return ms
}

// fixedWindowGuard keeps the clock out of the last eighth of every aligned
// window, moving it to the next window's start instead. On a real Redis a
// fixed window's key expires, in real time, when what is left of its window
// has passed, while the test's client clock stands still: a key written 1
// ms before the edge would be gone before the next request of the same
// simulated millisecond. Outside the guard that takes minutes.
func fixedWindowGuard(w int64) func(int64) int64 {
	return func(now int64) int64 {
		next := (floorDiv(now, w) + 1) * w
		if next-now < w/8 {
			return next
		}
		return now
	}
}

func (e *env) now() int64 { return e.clock.Now().UnixMilli() }

// build returns the strategy of subject s for lim over one backend,
// wrapping it in the sharded strategy when s asks for it.
func build(s subject, lim strategy.Limit, mk func(strategy.Limit) (strategy.Strategy, error)) (strategy.Strategy, error) {
	if s.sharded() {
		return sharded.New(s.shards, lim, mk)
	}
	return mk(lim)
}

func openMiniredis(serverTime, batched bool) func(t *testing.T) envBuilder {
	return func(t *testing.T) envBuilder {
		mr := miniredis.RunT(t)
		var clients []redis.Scripter
		for range hosts {
			c := redis.NewClient(&redis.Options{Addr: mr.Addr(), PoolSize: 32})
			t.Cleanup(func() { c.Close() })
			clients = append(clients, hostClient(t, c, batched))
		}
		var n atomic.Int64
		var mu sync.Mutex // miniredis time is global: one case at a time
		return func(s subject, lim strategy.Limit, start time.Time, twin bool) (*env, error) {
			prefix := fmt.Sprintf("c%d:", n.Add(1))
			e := &env{sub: s, lim: lim, clock: conformance.NewClock(start)}
			opts := []strategy.Option{strategy.WithPrefix(prefix)}
			if serverTime {
				mu.Lock()
				mr.SetTime(start)
				mu.Unlock()
				e.step = func(d time.Duration) {
					mr.SetTime(e.clock.Now())
					mr.FastForward(d)
				}
			} else {
				opts = append(opts, strategy.WithClock(e.clock))
				e.step = func(d time.Duration) { mr.FastForward(d) }
			}
			for _, c := range clients {
				st, err := build(s, lim, func(l strategy.Limit) (strategy.Strategy, error) { return s.newRedis(c, l, opts...) })
				if err != nil {
					return nil, err
				}
				e.hosts = append(e.hosts, st)
			}
			e.card = func(key string) (int64, error) {
				if !mr.Exists(key) {
					return 0, nil
				}
				m, err := mr.ZMembers(key)
				return int64(len(m)), err
			}
			e.keys = func() (map[string]time.Duration, error) {
				out := map[string]time.Duration{}
				for _, k := range mr.Keys() {
					if strings.HasPrefix(k, prefix) {
						ttl := mr.TTL(k)
						if ttl <= 0 {
							ttl = -1
						}
						out[k] = ttl
					}
				}
				return out, nil
			}
			return e, e.addTwin(twin)
		}
	}
}

func openRedis(batched bool) func(t *testing.T) envBuilder {
	return func(t *testing.T) envBuilder { return openRedisOn(t, batched) }
}

func openRedisOn(t *testing.T, batched bool) envBuilder {
	return openRedisAt(t, testredis.Shared(t), batched, nil)
}

// openDurable opens the durability backends: a shared primary with one
// replica, every strategy with strategy.WithReplicas(1, 5s).
func openDurable(batched bool) func(t *testing.T) envBuilder {
	return func(t *testing.T) envBuilder {
		p := testredis.SharedPair(t)
		replica := redis.NewClient(&redis.Options{Addr: p.Replica.Addr})
		t.Cleanup(func() { replica.Close() })
		return openRedisAt(t, p.Primary, batched, &durableEnv{replica: replica, primaryAddr: p.Primary.Addr})
	}
}

// openRedisAt opens a real Redis backend on srv; with d, the strategies
// are durable and d's replica is srv's.
func openRedisAt(t *testing.T, srv *testredis.Server, batched bool, d *durableEnv) envBuilder {
	var clients []*redis.Client
	var scripters []redis.Scripter
	for range hosts {
		// The plain backend's hosts have ContextTimeoutEnabled, so their
		// strategies are what the constructors make by default: on the
		// batching client each host's strategies share. The durable
		// backend's are without it, each call sent alone.
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 32, ContextTimeoutEnabled: d == nil && !batched})
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
		scripters = append(scripters, hostClient(t, c, batched))
	}
	base := testredis.Prefix(t)
	var n atomic.Int64
	return func(s subject, lim strategy.Limit, start time.Time, twin bool) (*env, error) {
		prefix := fmt.Sprintf("%sc%d:", base, n.Add(1))
		e := &env{sub: s, lim: lim, clock: conformance.NewClock(start)}
		if s.kind == fixedWindow {
			e.guard = fixedWindowGuard(lim.Window.Milliseconds())
			e.clock.Set(time.UnixMilli(e.guard(e.now())))
		}
		opts := []strategy.Option{strategy.WithPrefix(prefix), strategy.WithClock(e.clock)}
		if d != nil {
			opts = append(opts, strategy.WithReplicas(1, 5*time.Second))
			de := *d
			de.primary, de.prefix = clients[0], prefix
			e.durable = &de
		}
		for _, c := range scripters {
			st, err := build(s, lim, func(l strategy.Limit) (strategy.Strategy, error) { return s.newRedis(c, l, opts...) })
			if err != nil {
				return nil, err
			}
			e.hosts = append(e.hosts, st)
		}
		e.card = func(key string) (int64, error) { return clients[0].ZCard(ctx, key).Result() }
		e.keys = func() (map[string]time.Duration, error) {
			out := map[string]time.Duration{}
			iter := clients[0].Scan(ctx, 0, globEscape(prefix)+"*", 100).Iterator()
			for iter.Next(ctx) {
				k := iter.Val()
				ttl, err := clients[0].PTTL(ctx, k).Result()
				if err != nil {
					return nil, err
				}
				if ttl == -2*time.Nanosecond || ttl == -2*time.Millisecond { // gone meanwhile
					continue
				}
				if ttl <= 0 {
					ttl = -1
				}
				out[k] = ttl
			}
			return out, iter.Err()
		}
		return e, e.addTwin(twin)
	}
}

func openLocal(t *testing.T) envBuilder {
	return func(s subject, lim strategy.Limit, start time.Time, twin bool) (*env, error) {
		e := &env{sub: s, lim: lim, clock: conformance.NewClock(start)}
		// a local twin keeps its state in its own process: every host of
		// the case shares one instance
		st, err := build(s, lim, func(l strategy.Limit) (strategy.Strategy, error) {
			return s.newLocal(l, strategy.WithClock(e.clock))
		})
		if err != nil {
			return nil, err
		}
		for range hosts {
			e.hosts = append(e.hosts, st)
		}
		return e, nil
	}
}

func (e *env) addTwin(twin bool) error {
	if !twin {
		return nil
	}
	st, err := build(e.sub, e.lim, func(l strategy.Limit) (strategy.Strategy, error) {
		return e.sub.newLocal(l, strategy.WithClock(e.clock))
	})
	e.twin = st
	return err
}

func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// event is one call and its outcome, at the time the strategy's clock read.
type event struct {
	step    int
	at      int64 // Unix ms
	host    int
	subject int
	op      int
	n       int64
	res     strategy.Result
	err     error
}

func (ev event) String() string {
	at := time.UnixMilli(ev.at).UTC().Format("15:04:05.000")
	var what string
	switch ev.op {
	case opPeek:
		what = "Peek"
	case opReset:
		what = "Reset"
	default:
		what = fmt.Sprintf("AllowN(%d)", ev.n)
	}
	if ev.err != nil {
		return fmt.Sprintf("step %d at %s h%d %s %q: error %v", ev.step, at, ev.host, what, subjects[ev.subject], ev.err)
	}
	return fmt.Sprintf("step %d at %s h%d %s %q = {Allowed:%v Remaining:%d RetryAfter:%v ResetAfter:%v}",
		ev.step, at, ev.host, what, subjects[ev.subject], ev.res.Allowed, ev.res.Remaining, ev.res.RetryAfter, ev.res.ResetAfter)
}

// call makes one request on st now.
func (e *env) call(st strategy.Strategy, step, host, subj, op int, n int64) event {
	ev := event{step: step, at: e.now(), host: host, subject: subj, op: op, n: n}
	key := subjects[subj]
	switch op {
	case opPeek:
		ev.res, ev.err = st.Peek(ctx, key)
	case opReset:
		ev.err = st.Reset(ctx, key)
	default:
		ev.res, ev.err = st.AllowN(ctx, key, n)
	}
	if e.stats != nil && op != opReset && ev.err == nil {
		e.stats.calls.Add(1)
		switch {
		case ev.res.Allowed:
			e.stats.allowed.Add(1)
		case ev.res.RetryAfter == strategy.Never:
			e.stats.never.Add(1)
			fallthrough
		default:
			e.stats.denied.Add(1)
		}
	}
	return ev
}

func (e *env) do(step int, r Req) event {
	return e.call(e.hosts[r.Host], step, r.Host, r.Subject, r.Op, r.N)
}

// runSerial runs c's schedule one request at a time. after, when not nil,
// is called after each request and may make more calls (through e); a
// non-empty return stops the run with that failure.
func (e *env) runSerial(c Case, after func(ev event) string) ([]event, string) {
	var evs []event
	for i, s := range c.Steps {
		e.advance(s.advance(e.lim, e.now()))
		for _, r := range s.Reqs {
			ev := e.do(i, r)
			evs = append(evs, ev)
			if ev.err != nil {
				return evs, ev.String()
			}
			if after != nil {
				if msg := after(ev); msg != "" {
					return evs, msg
				}
			}
		}
	}
	return evs, ""
}

// runConcurrent runs c's schedule with each batch issued at once, one
// goroutine per request, all released together. The clock does not move
// during a batch, so every request of a batch is decided at the same time.
func (e *env) runConcurrent(c Case) ([]event, string) {
	var evs []event
	for i, s := range c.Steps {
		e.advance(s.advance(e.lim, e.now()))
		out := make([]event, len(s.Reqs))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j, r := range s.Reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				out[j] = e.do(i, r)
			}()
		}
		close(start)
		wg.Wait()
		for _, ev := range out {
			if ev.err != nil {
				return evs, ev.String()
			}
		}
		evs = append(evs, out...)
	}
	return evs, ""
}
