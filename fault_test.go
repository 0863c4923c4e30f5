package ratelimit_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// Fault tests: a real redis-server, started by the test, is killed, paused,
// flushed, poisoned or filled while 64 goroutines make decisions.

const (
	faultWorkers  = 64
	faultLimit    = 20 // per minute: no unit leaves the window during a run
	faultShare    = 0.25
	faultLocalCap = 5 // ceil(faultLimit * faultShare)
	// faultMargin is how late a decision may return after its Timeout: a
	// goroutine woken by the deadline may wait for a CPU while 64 others
	// run under the race detector on a shared 2-core machine.
	faultMargin = 2 * time.Second
)

// sample is one decision made under load.
type sample struct {
	key        string
	start, end time.Time
	r          ratelimit.Result
	err        error
	cause      error // Decision.Cause
}

// fault is one way Redis fails: inject starts it, restore ends it.
type fault struct {
	name    string
	timeout time.Duration // Config.Timeout for the run
	// settle: after the fault ends, how long decisions may still fail
	// because of it, besides the first decision that succeeds
	settle time.Duration
	// hold: how long the fault lasts; 0 means until the breaker has
	// opened and probed at least once
	hold    time.Duration
	inject  func(t *testing.T, s *testredis.Server, admin *redis.Client, l *ratelimit.Limiter)
	restore func(t *testing.T, s *testredis.Server, admin *redis.Client, l *ratelimit.Limiter)
	// dataLost: Redis's state is gone after the fault (a restart), or, for
	// the hot subject only (hotLost), replaced by the fault.
	dataLost, hotLost bool
	// degradedKeys: which subjects the fault degrades; nil means all.
	degradedKeys func(key string) bool
	// noDegraded: the fault must be invisible to callers.
	noDegraded bool
	// mayDegrade: the fault may or may not degrade decisions (Redis decides
	// per script); those it degrades must have a cause that satisfies it.
	mayDegrade func(cause error) bool
	// clientOpts adjusts the client (e.g. ContextTimeoutEnabled).
	clientOpts func(*redis.Options)
}

func hotKey(l *ratelimit.Limiter) string {
	return ratelimit.StrategyOf(l).(interface{ Key(string) string }).Key("hot")
}

var faults = []fault{
	{
		name: "kill and restart", timeout: 150 * time.Millisecond, dataLost: true,
		// go-redis stops dialing a server that refused PoolSize dials and
		// retries once a second; dials begun before the restart can trip
		// that again just after it
		settle: time.Second + 200*time.Millisecond,
		inject: func(t *testing.T, s *testredis.Server, _ *redis.Client, _ *ratelimit.Limiter) { s.Stop() },
		restore: func(t *testing.T, s *testredis.Server, _ *redis.Client, _ *ratelimit.Limiter) {
			if err := s.Restart(); err != nil {
				t.Error(err)
			}
		},
	},
	{
		name: "pause (SIGSTOP)", timeout: 150 * time.Millisecond,
		inject: func(t *testing.T, s *testredis.Server, _ *redis.Client, _ *ratelimit.Limiter) {
			if err := s.Signal(syscall.SIGSTOP); err != nil {
				t.Error(err)
			}
		},
		restore: func(t *testing.T, s *testredis.Server, _ *redis.Client, _ *ratelimit.Limiter) {
			if err := s.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		},
	},
	{
		name: "SCRIPT FLUSH mid-load", timeout: 2 * time.Second, noDegraded: true, hold: time.Millisecond,
		inject: func(t *testing.T, _ *testredis.Server, admin *redis.Client, _ *ratelimit.Limiter) {
			for i := 0; i < 10; i++ {
				if err := admin.ScriptFlush(context.Background()).Err(); err != nil {
					t.Error(err)
				}
				time.Sleep(30 * time.Millisecond)
			}
		},
		restore: func(*testing.T, *testredis.Server, *redis.Client, *ratelimit.Limiter) {},
	},
	{
		name: "WRONGTYPE on a subject's key", timeout: 2 * time.Second, hotLost: true, hold: 300 * time.Millisecond,
		degradedKeys: func(key string) bool { return key == "hot" },
		inject: func(t *testing.T, _ *testredis.Server, admin *redis.Client, l *ratelimit.Limiter) {
			if err := admin.Set(context.Background(), hotKey(l), "planted", 0).Err(); err != nil {
				t.Error(err)
			}
		},
		restore: func(t *testing.T, _ *testredis.Server, admin *redis.Client, l *ratelimit.Limiter) {
			if err := admin.Del(context.Background(), hotKey(l)).Err(); err != nil {
				t.Error(err)
			}
		},
	},
	{
		// Redis refuses a script's first write that may grow memory (OOM),
		// but lets the rest of a script that has written run: the sliding
		// log, whose script starts by trimming, keeps deciding; a script
		// that starts with HSET (token bucket) is refused.
		name: "maxmemory reached", timeout: 2 * time.Second, hold: 300 * time.Millisecond,
		mayDegrade: func(cause error) bool { return redis.HasErrorPrefix(cause, "OOM") },
		inject: func(t *testing.T, _ *testredis.Server, admin *redis.Client, _ *ratelimit.Limiter) {
			fillMemory(t, admin)
		},
		restore: func(t *testing.T, _ *testredis.Server, admin *redis.Client, _ *ratelimit.Limiter) {
			if err := admin.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
				t.Error(err)
			}
		},
	},
	{
		name: "pause with ContextTimeoutEnabled", timeout: 150 * time.Millisecond,
		clientOpts: func(o *redis.Options) { o.ContextTimeoutEnabled = true },
		inject: func(t *testing.T, s *testredis.Server, _ *redis.Client, _ *ratelimit.Limiter) {
			if err := s.Signal(syscall.SIGSTOP); err != nil {
				t.Error(err)
			}
		},
		restore: func(t *testing.T, s *testredis.Server, _ *redis.Client, _ *ratelimit.Limiter) {
			if err := s.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		},
	},
}

// fillMemory makes the server refuse writes that may grow memory: a 2 MiB
// value, then maxmemory 1 MiB with noeviction.
func fillMemory(t *testing.T, admin *redis.Client) {
	ctx := context.Background()
	for _, err := range []error{
		admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(),
		admin.Set(ctx, "filler", strings.Repeat("x", 2<<20), 0).Err(),
		admin.ConfigSet(ctx, "maxmemory", "1mb").Err(),
	} {
		if err != nil {
			t.Error(err)
		}
	}
	if err := admin.Set(ctx, "probe", "x", 0).Err(); !redis.HasErrorPrefix(err, "OOM") {
		t.Errorf("SET with maxmemory reached: %v, want OOM", err)
	}
}

func TestFaults(t *testing.T) {
	for _, f := range faults {
		for _, p := range failurePolicies {
			t.Run(fmt.Sprintf("%s/%s", f.name, p), func(t *testing.T) { runFault(t, f, p, false) })
		}
	}
}

// TestFaultsBatched runs every fault with the decisions sent through a
// batch.Client, each fault under one policy in turn.
func TestFaultsBatched(t *testing.T) {
	for i, f := range faults {
		p := failurePolicies[i%len(failurePolicies)]
		t.Run(fmt.Sprintf("%s/%s", f.name, p), func(t *testing.T) { runFault(t, f, p, true) })
	}
}

func runFault(t *testing.T, f fault, p ratelimit.FailurePolicy, batched bool) {
	const cooldown = 200 * time.Millisecond
	ctx := context.Background()
	srv := testredis.Start(t)
	admin := srv.Client(t)
	if err := admin.Ping(ctx).Err(); err != nil { // its connection is made
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()

	opt := &redis.Options{Addr: srv.Addr}
	if f.clientOpts != nil {
		f.clientOpts(opt)
	}
	rdb := redis.NewClient(opt)
	var sc redis.Scripter = rdb
	var bc *batch.Client
	if batched {
		var err error
		if bc, err = batch.New(rdb); err != nil {
			t.Fatal(err)
		}
		sc = bc
	}
	br := mustBreaker(t, 3, cooldown)
	l, err := ratelimit.New(sc, ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: faultLimit, Window: time.Minute,
		OnFailure: p, LocalShare: faultShare, Timeout: f.timeout}, ratelimit.WithBreaker(br), ratelimit.WithObserver(causeObserver{}))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := l.Allow(ctx, "warm-up"); err != nil || r.Degraded { // the script is cached
		t.Fatalf("warm-up: %+v, %v", r, err)
	}

	// Load: 64 goroutines, a quarter of the requests on one hot subject.
	var (
		stop      atomic.Bool
		wg        sync.WaitGroup
		mu        sync.Mutex
		samples   []sample
		restored  atomic.Int64 // UnixNano of the end of restore, 0 before
		recovered atomic.Bool  // a decision started after restore was Redis's
	)
	for w := 0; w < faultWorkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var mine []sample
			for !stop.Load() {
				key := "hot"
				if rng.IntN(4) != 0 {
					key = fmt.Sprint("k", rng.IntN(256))
				}
				s := sample{key: key, start: time.Now()}
				var cause causeSlot
				s.r, s.err = l.Allow(context.WithValue(ctx, causeSlot{}, &cause), key)
				s.end, s.cause = time.Now(), cause.err
				if r := restored.Load(); r != 0 && s.start.UnixNano() > r && !s.r.Degraded && (f.degradedKeys == nil || f.degradedKeys(key)) {
					recovered.Store(true)
				}
				mine = append(mine, s)
				// A service's request goroutines do other work between
				// decisions; spinning on microsecond decisions with the
				// breaker open would only starve the timers under test.
				time.Sleep(time.Millisecond)
			}
			mu.Lock()
			samples = append(samples, mine...)
			mu.Unlock()
		}(w)
	}

	time.Sleep(150 * time.Millisecond)
	tFault := time.Now()
	f.inject(t, srv, admin, l)
	injected := time.Now()
	if f.hold == 0 {
		time.Sleep(cooldown + f.timeout + 100*time.Millisecond)
	} else {
		time.Sleep(f.hold)
	}
	tRestore := time.Now()
	f.restore(t, srv, admin, l)
	restored.Store(time.Now().UnixNano())

	// Enforcement must resume by itself: go-redis redials a dead server
	// once a second, then the breaker's next probe closes it.
	bound := time.Second + cooldown + f.timeout + faultMargin
	deadline := time.Now().Add(bound)
	for !recovered.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	recoveredBy := time.Now()
	time.Sleep(200 * time.Millisecond) // and stay enforced
	stop.Store(true)
	wg.Wait()
	if !recovered.Load() {
		t.Fatalf("no decision made by Redis within %v of the fault's end", bound)
	}

	// Every decision: no error, returned in time, the policy applied.
	settled := time.Unix(0, restored.Load()).Add(f.settle)
	var (
		maxTook               time.Duration
		degraded, slow, total int
		localAllowed          = map[string]int{}
		redisAllowed          = map[[2]any]int{}
		healthyDeg            int
		// a decision overlapping the fault may be degraded by it
		faultEnd = recoveredBy.Add(100 * time.Millisecond)
		inFault  = func(s sample) bool {
			return !s.end.Before(tFault) && (s.start.Before(faultEnd) || s.start.Before(settled))
		}
	)
	for _, s := range samples {
		total++
		if s.err != nil {
			t.Fatalf("Allow(%q) at +%v: error %v; want a decision", s.key, s.start.Sub(tFault), s.err)
		}
		took := s.end.Sub(s.start)
		maxTook = max(maxTook, took)
		if took > f.timeout+faultMargin {
			t.Errorf("Allow(%q) at +%v took %v, want <= Timeout %v + %v", s.key, s.start.Sub(tFault), took, f.timeout, faultMargin)
		}
		r := s.r
		if !r.Degraded {
			if r.Allowed {
				// Count per life of the subject's key in Redis; a decision
				// that straddles the moment the key was lost could belong
				// to either life and is left out.
				epoch := 0
				if f.dataLost || f.hotLost && s.key == "hot" {
					switch {
					case s.start.After(injected):
						epoch = 1
					case !s.end.Before(tFault):
						epoch = -1
					}
				}
				if epoch >= 0 {
					redisAllowed[[2]any{s.key, epoch}]++
				}
			}
			continue
		}
		degraded++
		switch {
		case f.mayDegrade != nil && inFault(s) && !f.mayDegrade(s.cause) && !loadCaused(s.cause):
			t.Errorf("Allow(%q) at +%v degraded by %v, not by the fault", s.key, s.start.Sub(tFault), s.cause)
		case !f.noDegraded && inFault(s):
		case loadCaused(s.cause):
			// Outside the fault, only a machine too slow for the Timeout
			// may degrade a decision (and the breaker that opens on it).
			slow++
		default:
			t.Errorf("Allow(%q) at +%v degraded outside the fault by %v", s.key, s.start.Sub(tFault), s.cause)
		}
		if f.degradedKeys != nil && !f.degradedKeys(s.key) && !loadCaused(s.cause) {
			t.Errorf("Allow(%q) degraded by a fault on another subject: %+v, %v", s.key, r, s.cause)
		}
		switch p {
		case ratelimit.FailOpen:
			if !r.Allowed || r.Remaining != faultLimit {
				t.Fatalf("fail open: %+v, want allowed", r)
			}
		case ratelimit.FailClosed:
			if r.Allowed || r.RetryAfter <= 0 {
				t.Fatalf("fail closed: %+v, want denied with RetryAfter > 0", r)
			}
		case ratelimit.FailLocal:
			if r.Limit != faultLocalCap {
				t.Fatalf("fail local: %+v, want Limit %d", r, faultLocalCap)
			}
			if r.Allowed {
				localAllowed[s.key]++
			}
		}
		if inFault(s) && !f.noDegraded {
			healthyDeg++
		}
	}
	for k, n := range localAllowed {
		if n > faultLocalCap {
			t.Errorf("fail local: %q allowed %d times by the twin, want <= %d", k, n, faultLocalCap)
		}
	}
	for k, n := range redisAllowed {
		if n > faultLimit {
			t.Errorf("Redis allowed %v %d times, want <= %d", k, n, faultLimit)
		}
	}
	if !f.noDegraded && f.mayDegrade == nil && healthyDeg == 0 {
		t.Errorf("no decision degraded during the fault, out of %d: the fault did not bite", total)
	}
	t.Logf("causes of degraded decisions: %v", causeCounts(samples))
	t.Logf("%d decisions, %d degraded (%d outside the fault, by a slow machine); slowest %v (Timeout %v); Redis back %v after the fault ended",
		total, degraded, slow, maxTook, f.timeout, recoveredBy.Sub(tRestore))

	// Without load, Redis enforces again: the breaker closes and a fresh
	// subject gets exactly the limit.
	for deadline := time.Now().Add(cooldown + faultMargin); br.State() != breaker.Closed && time.Now().Before(deadline); {
		l.Peek(ctx, "hot")
		time.Sleep(10 * time.Millisecond)
	}
	for i := 0; i <= faultLimit; i++ {
		r, err := l.Allow(ctx, "after")
		if err != nil || r.Degraded || r.Allowed != (i < faultLimit) {
			t.Fatalf("after the fault, Allow %d = %+v, %v; want Redis's decision, the first %d allowed (breaker %v)", i+1, r, err, faultLimit, br.State())
		}
	}
	if r, err := l.Peek(ctx, "hot"); err != nil || r.Degraded {
		t.Fatalf("after the fault, Peek(hot) = %+v, %v; want Redis's answer", r, err)
	}

	// No goroutine outlives the client.
	if bc != nil {
		bc.Close()
	}
	rdb.Close()
	settleGoroutines(t, base, 3*time.Second)
}

// loadCaused reports whether a degraded decision's cause is the Timeout (or
// the read deadline go-redis derives from it), or
// the breaker opened by timeouts: what a machine too busy to run the test's
// goroutines in time produces on a healthy Redis.
func loadCaused(cause error) bool {
	var ne net.Error
	return errors.Is(cause, breaker.ErrOpen) ||
		errors.Is(cause, context.DeadlineExceeded) && strings.Contains(cause.Error(), "within Timeout") ||
		errors.As(cause, &ne) && ne.Timeout() // go-redis with ContextTimeoutEnabled
}

// causeSlot, put in a decision's ctx, receives its Decision.Cause from
// causeObserver.
type causeSlot struct{ err error }

type causeObserver struct{}

func (causeObserver) Observe(ctx context.Context, d ratelimit.Decision) {
	if s, ok := ctx.Value(causeSlot{}).(*causeSlot); ok {
		s.err = d.Cause
	}
}

// monitor streams the commands a Redis server runs, through MONITOR.
type monitor struct {
	mu    sync.Mutex
	lines []string
	conn  net.Conn
}

func startMonitor(t *testing.T, addr string) *monitor {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	m := &monitor{conn: c}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(c)
	if l, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(l, "+OK") {
		t.Fatalf("MONITOR: %q, %v", l, err)
	}
	go func() {
		for {
			l, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			m.mu.Lock()
			m.lines = append(m.lines, strings.TrimSpace(l))
			m.mu.Unlock()
		}
	}()
	return m
}

// commands returns the names of the commands seen that mention s, in order.
func (m *monitor) commands(s string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	for _, l := range m.lines {
		if !strings.Contains(l, s) || strings.Contains(l, " lua] ") { // not the script's own calls
			continue
		}
		if i := strings.Index(l, `] "`); i >= 0 {
			rest := l[i+3:]
			names = append(names, strings.ToUpper(rest[:strings.IndexByte(rest, '"')]))
		}
	}
	return names
}

// waitFor polls until cond holds or a few seconds pass.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// Script cache loss is recovered transparently, and EVAL is sent only after
// an explicit NOSCRIPT reply, never after a timeout: the timed-out EVALSHA
// may have been, and here is, applied.
func TestScriptCache(t *testing.T) {
	ctx := context.Background()
	// a second: long enough that a loaded machine does not degrade the
	// calls made with Redis up, short enough to wait out with it paused
	cfg := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Minute, Timeout: time.Second}

	for _, tc := range []struct {
		name string
		opts []ratelimit.Option
		want []string
	}{
		// batched (the default on a client with ContextTimeoutEnabled): the
		// Client loads the script (SCRIPT LOAD names no key) and sends the
		// EVALSHA again
		{"flush then decide", nil, []string{"EVALSHA", "EVALSHA"}},
		// go-redis's Script: the source once
		{"flush then decide/WithoutBatching", []ratelimit.Option{ratelimit.WithoutBatching()}, []string{"EVALSHA", "EVAL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testredis.Start(t)
			admin := srv.Client(t)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			l, err := ratelimit.New(rdb, cfg, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := l.Allow(ctx, "subject"); err != nil || !r.Allowed || r.Degraded {
				t.Fatalf("first Allow = %+v, %v", r, err)
			}
			mon := startMonitor(t, srv.Addr)
			if err := admin.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			r, err := l.Allow(ctx, "subject")
			if err != nil || !r.Allowed || r.Degraded || r.Remaining != 3 {
				t.Fatalf("Allow after SCRIPT FLUSH = %+v, %v; want Redis's decision, Remaining 3", r, err)
			}
			want := tc.want // NOSCRIPT, then the script once more
			if !waitFor(func() bool { return len(mon.commands("{subject}")) >= 2 }) || !slices.Equal(mon.commands("{subject}"), want) {
				t.Fatalf("commands after the flush: %q, want %q", mon.commands("{subject}"), want)
			}
			if r, _ := l.Allow(ctx, "subject"); r.Remaining != 2 || r.Degraded {
				t.Fatalf("third Allow = %+v", r)
			}
			if !waitFor(func() bool { return len(mon.commands("{subject}")) >= 3 }) || mon.commands("{subject}")[2] != "EVALSHA" {
				t.Fatalf("commands: %q, want EVALSHA once the script is cached again", mon.commands("{subject}"))
			}
		})
	}

	for _, cte := range []bool{false, true} {
		t.Run(fmt.Sprintf("timeout is not followed by EVAL/ContextTimeoutEnabled=%v", cte), func(t *testing.T) {
			srv := testredis.Start(t)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: cte})
			t.Cleanup(func() { rdb.Close() })
			l, err := ratelimit.New(rdb, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := l.Allow(ctx, "warm"); err != nil || r.Degraded { // the script is cached
				t.Fatalf("warm-up: %+v, %v", r, err)
			}
			mon := startMonitor(t, srv.Addr)
			if err := srv.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r, err := l.Allow(ctx, "subject")
			took := time.Since(start)
			if err != nil || !r.Degraded {
				t.Errorf("Allow with Redis paused = %+v, %v; want degraded", r, err)
			}
			if took > cfg.Timeout+faultMargin {
				t.Errorf("Allow with Redis paused took %v, want <= %v + %v", took, cfg.Timeout, faultMargin)
			}
			time.Sleep(300 * time.Millisecond) // room for any retry go-redis would make
			if err := srv.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			// what the server ran for the subject, once it has caught up
			waitFor(func() bool { return len(mon.commands("{subject}")) > 0 })
			time.Sleep(200 * time.Millisecond)
			got := mon.commands("{subject}")
			if slices.Contains(got, "EVAL") || len(got) > 1 || (!cte && len(got) != 1) {
				t.Fatalf("after a timed-out EVALSHA the server ran %q, want one EVALSHA (none possible when the client closed the connection), never EVAL", got)
			}
			if len(got) == 1 {
				// the timed-out call was applied: retrying it would count twice
				p, err := l.Peek(ctx, "subject")
				if err != nil || p.Degraded || p.Remaining != 4 {
					t.Fatalf("Peek = %+v, %v; want Remaining 4: the timed-out EVALSHA ran once", p, err)
				}
			}
			t.Logf("paused Redis: degraded after %v; the server then ran %q", took, got)
		})
	}
}

// Every algorithm under maxmemory: each decision is either Redis's (its
// script wrote before the first write that may grow memory) or made by the
// policy with OOM as the cause, the breaker stays closed (Redis answers),
// and decisions are Redis's again once memory is available.
func TestMaxmemoryEveryAlgorithm(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	admin := srv.Client(t)
	rdb := srv.Client(t)
	for _, a := range strategy.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			b := mustBreaker(t, 2, time.Hour)
			l, err := ratelimit.New(rdb, ratelimit.Config{Algorithm: a, Limit: 3, Window: time.Minute, Prefix: string(a) + ":",
				OnFailure: ratelimit.FailClosed, Timeout: 5 * time.Second}, ratelimit.WithBreaker(b), ratelimit.WithObserver(causeObserver{}))
			if err != nil {
				t.Fatal(err)
			}
			if r, err := l.Allow(ctx, "warm-up"); err != nil || r.Degraded {
				t.Fatalf("warm-up: %+v, %v", r, err)
			}
			fillMemory(t, admin)
			oom := 0
			for i := 0; i < 5; i++ {
				var cause causeSlot
				r, err := l.Allow(context.WithValue(ctx, causeSlot{}, &cause), fmt.Sprint("fresh", i))
				switch {
				case err != nil:
					t.Fatalf("Allow with maxmemory reached: %v", err)
				case r.Degraded && !redis.HasErrorPrefix(cause.err, "OOM"):
					t.Fatalf("degraded by %v, want OOM", cause.err)
				case r.Degraded && r.Allowed:
					t.Fatalf("fail closed allowed: %+v", r)
				case r.Degraded:
					oom++
				case !r.Allowed:
					t.Fatalf("Redis denied a fresh subject: %+v", r)
				}
			}
			if s := b.State(); s != breaker.Closed {
				t.Fatalf("breaker %v after OOM replies, want closed: Redis answered", s)
			}
			if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 4; i++ {
				r, err := l.Allow(ctx, "after")
				if err != nil || r.Degraded || r.Allowed != (i < 3) {
					t.Fatalf("after maxmemory is lifted, Allow %d = %+v, %v; want Redis's decision", i+1, r, err)
				}
			}
			t.Logf("%d of 5 decisions refused with OOM while maxmemory was reached", oom)
		})
	}
}

// causeCounts counts the causes of degraded decisions, cut short.
func causeCounts(ss []sample) map[string]int {
	m := map[string]int{}
	for _, s := range ss {
		if s.cause != nil {
			msg := s.cause.Error()
			if len(msg) > 120 {
				msg = msg[:120]
			}
			m[msg]++
		}
	}
	return m
}
