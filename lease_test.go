package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/multilimit"
	"github.com/ratekit/ratelimit/strategy"
)

// TestLeaseConfig: "lease" is read and written by a policy document, off
// when absent, and refused, naming the field, where a lease cannot keep
// the policy's promise.
func TestLeaseConfig(t *testing.T) {
	for _, c := range []struct {
		name, policy, field, says string
	}{
		{"multi", `"algorithm": "multi", "rules": [{"algorithm": "sliding_log", "limit": 5, "window": "1m"}], "lease": true`, "lease",
			`lease needs algorithm "sliding_log", "compact_log", "fixed_window", "sliding_counter", "token_bucket", "gcra", got "multi"`},
		{"shards", `"algorithm": "gcra", "limit": 100, "window": "1s", "shards": 4, "lease": true`, "lease", "lease needs shards 0 or 1, got 4"},
		{"tiers", `"algorithm": "token_bucket", "limit": 100, "window": "1s", "tiers": {"pro": {"limit": 1000}}, "lease": true`, "lease", "lease needs no tiers"},
		{"not a bool", `"algorithm": "gcra", "limit": 100, "window": "1s", "lease": "yes"`, "lease", `want true or false, got "yes"`},
		{"in a candidate", `"algorithm": "fixed_window", "limit": 5, "window": "1m", "candidate": {"algorithm": "sliding_log", "limit": 5, "window": "1m", "lease": true}`, "candidate.lease", "lease must be empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := fmt.Sprintf(`{"api": {%s}}`, c.policy)
			p, err := parsePolicies([]byte(doc))
			if err == nil {
				t.Fatalf("UnmarshalJSON(%s) = %+v; want an error", doc, p)
			}
			var fe *ratelimit.FieldError
			if !errors.As(err, &fe) || fe.JSON != c.field || !errors.Is(err, strategy.ErrInvalidOption) {
				t.Fatalf("err = %q; want a *FieldError of %q wrapping ErrInvalidOption", err, c.field)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("err = %q; want it to say %q", err, c.says)
			}
		})
	}

	t.Run("round trip", func(t *testing.T) {
		p, err := parsePolicies([]byte(`{"api": {"algorithm": "gcra", "limit": 100, "window": "1s", "lease": true},
			"login": {"algorithm": "sliding_log", "limit": 5, "window": "1m"}}`))
		if err != nil {
			t.Fatal(err)
		}
		if !p["api"].Lease || p["login"].Lease {
			t.Errorf("Lease read: api %v, login %v; want true, false (off by default)", p["api"].Lease, p["login"].Lease)
		}
		out, err := p.MarshalJSON()
		if err != nil || strings.Count(string(out), `"lease":true`) != 1 || strings.Contains(string(out), `"lease":false`) {
			t.Errorf("MarshalJSON = %s, %v; want \"lease\":true once, for api only", out, err)
		}
		again, err := parsePolicies(out)
		if err != nil || !again["api"].Lease || again["login"].Lease {
			t.Errorf("read back: %+v, %v", again, err)
		}
	})

	t.Run("Go names", func(t *testing.T) {
		rules := []multilimit.Rule{{Algorithm: ratelimit.SlidingLog, Limit: ratelimit.Limit{Limit: 5, Window: time.Minute}}}
		_, err := ratelimit.New(nil, ratelimit.Config{Algorithm: ratelimit.Multi, Rules: rules, Lease: true})
		var fe *ratelimit.FieldError
		if !errors.As(err, &fe) || fe.Field != "Lease" || !strings.Contains(err.Error(), "Lease needs Algorithm") {
			t.Errorf("New(multi, Lease) err = %v; want a *FieldError of Lease in Go names", err)
		}
		// an unknown algorithm is Algorithm's error, whatever Lease says
		_, err = ratelimit.New(nil, ratelimit.Config{Algorithm: "nope", Limit: 5, Window: time.Minute, Lease: true})
		if !errors.As(err, &fe) || fe.Field != "Algorithm" {
			t.Errorf("New(unknown, Lease) err = %v; want a *FieldError of Algorithm", err)
		}
		st, err := ratelimit.New(nil, ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Minute, Lease: true})
		if err != nil {
			t.Fatalf("New(nil, fixed window, Lease) = %v; want a Limiter (in process: no lease)", err)
		}
		if _, err := ratelimit.Wrap(st, ratelimit.Config{Lease: true}); !errors.As(err, &fe) || fe.Field != "Lease" {
			t.Errorf("Wrap(Lease) err = %v; want a *FieldError of Lease (wrap a lease.Limiter instead)", err)
		}
	})
}

// redisCalls returns the script calls srv has served since its stats
// were last reset (EVALSHA, and EVAL after a NOSCRIPT).
func redisCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		v, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		n += v
	}
	return n
}

// TestLeaseHotSubject: on a real redis-server, a leased policy decides
// one hot subject, asked by 8 callers far beyond its limit, with at most
// one script call per 50 decisions, and never allows more than the
// algorithm's bound within the window. The limiter's clock moves 1ms per
// 100 decisions, within one aligned window.
func TestLeaseHotSubject(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	const callers, each = 8, 2500
	for _, a := range []strategy.Algorithm{ratelimit.SlidingLog, ratelimit.CompactLog, ratelimit.FixedWindow, ratelimit.SlidingCounter, ratelimit.TokenBucket, ratelimit.GCRA} {
		t.Run(string(a), func(t *testing.T) {
			start := conformance.Epoch
			clock := conformance.NewClock(start)
			cfg := ratelimit.Config{Algorithm: a, Limit: 1000, Window: time.Minute, Lease: true, Timeout: 10 * time.Second}
			l, err := ratelimit.New(rdb, cfg, ratelimit.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			var allowed, decided atomic.Int64
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for range each {
						r, err := l.Allow(ctx, "tenant:hot")
						if err != nil || r.Degraded {
							t.Errorf("Allow = %+v, %v", r, err)
							return
						}
						if r.Allowed {
							allowed.Add(1)
						}
						if decided.Add(1)%100 == 0 {
							clock.Advance(time.Millisecond)
						}
					}
				})
			}
			wg.Wait()
			elapsed := clock.Now().Sub(start)
			calls := redisCalls(t, rdb)
			bound := cfg.Limit // the logs and the windows, within one window
			if a == ratelimit.TokenBucket || a == ratelimit.GCRA {
				bound += (cfg.Limit*elapsed.Milliseconds() + cfg.Window.Milliseconds() - 1) / cfg.Window.Milliseconds()
			}
			n := decided.Load()
			t.Logf("%d decisions in %s of the limiter's clock: %d allowed (bound %d), %d script calls", n, elapsed, allowed.Load(), bound, calls)
			if got := allowed.Load(); got > bound {
				t.Errorf("allowed %d within one window, want at most %d", got, bound)
			}
			if got := allowed.Load(); got < cfg.Limit/2 {
				t.Errorf("allowed %d of a limit of %d: the leases lost too much", got, cfg.Limit)
			}
			if calls == 0 || calls*50 > n {
				t.Errorf("%d script calls for %d decisions; want at least 1 and at most one per 50", calls, n)
			}
			if _, err := l.RefundN(ctx, "tenant:hot", 1); !errors.Is(err, strategy.ErrInvalidOption) {
				t.Errorf("RefundN on a leased policy = %v; want an error wrapping ErrInvalidOption", err)
			}
		})
	}
}

// TestLeaseReload: replacing a leased policy (Set.Update) leaves the old
// Limiter, never closed, with no goroutine behind it.
func TestLeaseReload(t *testing.T) {
	srv := testredis.Shared(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	policy := func(limit int64) ratelimit.Policies {
		return ratelimit.Policies{"api": {Algorithm: ratelimit.TokenBucket, Limit: limit, Window: time.Second,
			Prefix: testredis.Prefix(t), Lease: true, Timeout: 5 * time.Second}}
	}
	set, err := ratelimit.NewSet(rdb, policy(1000))
	if err != nil {
		t.Fatal(err)
	}
	use := func() {
		l, err := set.Get("api")
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			if _, err := l.Allow(ctx, "tenant:hot"); err != nil {
				t.Fatal(err)
			}
		}
	}
	use() // the client's connections, before counting
	before := runtime.NumGoroutine()
	for i := range 30 {
		if err := set.Update(policy(int64(1001 + i))); err != nil {
			t.Fatal(err)
		}
		use()
	}
	after := runtime.NumGoroutine()
	for i := 0; after > before && i < 200; i++ {
		time.Sleep(10 * time.Millisecond) // settle: a call's worker goroutine may still be ending
		after = runtime.NumGoroutine()
	}
	if after > before {
		t.Errorf("%d goroutines before 30 reloads of a leased policy, %d after; want no more", before, after)
	}
}

// TestLeaseMaxSubjects: Config.MaxSubjects bounds the subjects holding a
// lease: beyond it a subject is decided by Redis, one script call each.
func TestLeaseMaxSubjects(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	cfg := ratelimit.Config{Algorithm: ratelimit.TokenBucket, Limit: 1000, Window: time.Minute, Lease: true, MaxSubjects: 2, Timeout: 10 * time.Second}
	l, err := ratelimit.New(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		for range 50 {
			if _, err := l.Allow(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	if calls := redisCalls(t, rdb); calls >= 50 {
		t.Fatalf("%d script calls for 100 decisions of two subjects: they did not lease", calls)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if r, err := l.Allow(ctx, "c"); err != nil || !r.Allowed {
			t.Fatalf("Allow(c) = %+v, %v", r, err)
		}
	}
	if calls := redisCalls(t, rdb); calls != 50 {
		t.Errorf("%d script calls for 50 decisions of a third subject, want 50: MaxSubjects 2 did not bound the leases", calls)
	}
}

// TestLeaseFailLocal: with Redis down, a leased policy serves what its
// lease holds, as Redis decided it; then FailLocal's twin decides, with
// the policy's local share, as it does without leases.
func TestLeaseFailLocal(t *testing.T) {
	srv := testredis.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	cfg := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 80, Window: time.Minute, Lease: true,
		OnFailure: ratelimit.FailLocal, LocalShare: 0.25, Timeout: 10 * time.Second}
	l, err := ratelimit.New(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var held int64
	for i := 0; i < 20 || (held == 0 && i < 40); i++ {
		r, err := l.Allow(ctx, "k")
		if err != nil || !r.Allowed || r.Degraded {
			t.Fatalf("Redis up: %+v, %v; want allowed by Redis's lease", r, err)
		}
		held = r.Remaining
	}
	if held == 0 {
		t.Fatal("the lease holds nothing; the test needs some")
	}
	srv.Stop()
	for i := range held {
		if r, err := l.Allow(ctx, "k"); err != nil || !r.Allowed || r.Degraded {
			t.Fatalf("Redis down, unit %d of the %d the lease holds: %+v, %v; want allowed from the lease", i, held, r, err)
		}
	}
	var local int64
	for range 40 {
		r, err := l.Allow(ctx, "k")
		if err != nil || !r.Degraded {
			t.Fatalf("Redis down, the lease spent: %+v, %v; want FailLocal's decision", r, err)
		}
		if r.Allowed {
			local++
		}
	}
	if want := cfg.Limit / 4; local != want {
		t.Errorf("FailLocal's twin allowed %d, want its share %d", local, want)
	}
}

// TestLeaseReplicas: a leased policy in the durability mode sends one
// WAIT per lease taken (not per decision), and a lease whose WAIT comes
// back short is not served: the failure policy decides.
func TestLeaseReplicas(t *testing.T) {
	p := testredis.StartPair(t)
	rdb := p.Primary.Client(t)
	ctx := context.Background()
	cfg := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1000, Window: time.Minute, Lease: true,
		Replicas: 1, ReplicaTimeout: time.Second, OnFailure: ratelimit.FailClosed, Timeout: 10 * time.Second}
	causes := &lastCause{}
	l, err := ratelimit.New(rdb, cfg, ratelimit.WithObserver(causes))
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		if r, err := l.Allow(ctx, "k"); err != nil || !r.Allowed || r.Degraded {
			t.Fatalf("replica in sync: %+v, %v; want allowed", r, err)
		}
	}
	waits, err := testredis.Calls(ctx, p.Primary.Addr, "wait")
	if err != nil {
		t.Fatal(err)
	}
	if calls := redisCalls(t, rdb); waits != calls || calls == 0 || calls > 200/4 {
		t.Errorf("200 decisions: %d script calls and %d WAITs; want one WAIT per lease, a few leases", calls, waits)
	}
	// the replica paused: the lease in hand (replicated) is spent, and the
	// next one, not replicated, is never served
	if err := p.Replica.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Replica.Signal(syscall.SIGCONT) })
	for i := range 300 {
		r, err := l.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if r.Degraded {
			if c := causes.last(); r.Allowed || !errors.Is(c, strategy.ErrNotReplicated) {
				t.Errorf("replica paused, decision %d: %+v (cause %v); want FailClosed's denial caused by ErrNotReplicated", i, r, c)
			}
			return
		}
	}
	t.Error("replica paused: 300 decisions, none degraded; want the first lease taken after the pause refused")
}

// lastCause is an Observer that keeps the last degraded decision's cause.
type lastCause struct {
	mu    sync.Mutex
	cause error
}

func (o *lastCause) Observe(_ context.Context, d ratelimit.Decision) {
	if d.Degraded {
		o.mu.Lock()
		o.cause = d.Cause
		o.mu.Unlock()
	}
}

func (o *lastCause) last() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cause
}

// TestLeaseTelemetry: a leased policy's Observer sees every decision, the
// ones made from a lease marked Cached, and each lease event as a
// Decision of its own: the leases taken (their units), and what ended
// leases gave back or stranded.
func TestLeaseTelemetry(t *testing.T) {
	for _, a := range []strategy.Algorithm{ratelimit.TokenBucket, ratelimit.SlidingLog} {
		t.Run(string(a), func(t *testing.T) {
			clock := conformance.NewClock(conformance.Epoch)
			_, rdb := conformance.Miniredis(t)
			obs := &decisionLog{}
			cfg := ratelimit.Config{Name: "hot", Algorithm: a, Limit: 1000, Window: time.Minute, Lease: true}
			l, err := ratelimit.New(rdb, cfg, ratelimit.WithClock(clock), ratelimit.WithObserver(obs))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			const n = 200
			for range n {
				if r, err := l.Allow(ctx, "tenant:hot"); err != nil || !r.Allowed {
					t.Fatalf("Allow = %+v, %v", r, err)
				}
			}
			clock.Advance(10 * time.Second) // the lease has ended: the next one takes its place
			if r, err := l.Allow(ctx, "tenant:hot"); err != nil || !r.Allowed {
				t.Fatalf("Allow = %+v, %v", r, err)
			}
			obs.mu.Lock()
			defer obs.mu.Unlock()
			var allows, cached, takes, taken, ended int64
			end := "lease_strand" // the log's unspent units lapse
			if a == ratelimit.TokenBucket {
				end = "lease_give_back"
			}
			for _, d := range obs.ds {
				if d.Policy != "hot" || d.Algorithm != a {
					t.Errorf("%+v: want the policy's name and algorithm", d)
				}
				switch d.Op {
				case "allow":
					allows++
					if d.Cached {
						cached++
					}
				case "lease_take":
					if d.Result.Allowed {
						takes++
						taken += d.N
					}
				case end:
					ended += d.N
				default:
					t.Errorf("%+v: an unexpected Op", d)
				}
			}
			t.Logf("%d allow decisions, %d cached; %d leases of %d units; %d units %s", allows, cached, takes, taken, ended, end)
			if allows != n+1 || takes == 0 || cached != allows-takes {
				t.Errorf("%d allow decisions, %d cached, %d leases: want %d, every one not taking a lease cached", allows, cached, takes, n+1)
			}
			if taken < n+1 || ended == 0 || ended > taken-n {
				t.Errorf("%d units leased, %d %s: want at least the %d allowed, and the first lease's leftover ended", taken, ended, end, n+1)
			}
		})
	}
}

// TestLeaseAllocs: a decision a lease makes in process, through the
// facade (no breaker, no timeout), allocates nothing.
func TestLeaseAllocs(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	clock := conformance.NewClock(conformance.Epoch)
	l, err := ratelimit.New(rdb, ratelimit.Config{Algorithm: ratelimit.TokenBucket, Limit: 1 << 30, Window: time.Minute, Lease: true},
		ratelimit.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 1000 { // demand, so that the lease holds more than the runs below spend
		if r, err := l.Allow(ctx, "tenant:hot"); err != nil || !r.Allowed {
			t.Fatalf("Allow = %+v, %v", r, err)
		}
	}
	if a := testing.AllocsPerRun(100, func() { l.Allow(ctx, "tenant:hot") }); a != 0 {
		t.Errorf("a leased Allow allocates %.1f times, want 0", a)
	}
}
