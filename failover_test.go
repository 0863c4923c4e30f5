package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

const (
	// failoverLimit per failoverWindow: the window spans the whole test,
	// so every unit the hot subject gets above failoverLimit was let
	// through again after a failover lost the write that counted it.
	failoverLimit  = 50
	failoverWindow = 24 * time.Hour
	// failoverTimeout is Config.Timeout; failoverSlack is how much later
	// than it a call may return before it counts as stuck (a loaded
	// machine, the race detector).
	failoverTimeout = 300 * time.Millisecond
	failoverSlack   = 5 * time.Second
	// failoverRecover bounds the time from the kill until decisions are
	// Redis's again: liveness, not speed.
	failoverRecover = time.Minute
	failoverWorkers = 2                     // per limiter
	failoverPause   = 10 * time.Millisecond // between a worker's decisions
	// failoverReplicaTimeout is the durable limiters' ReplicaTimeout.
	failoverReplicaTimeout = 100 * time.Millisecond
	failoverCold           = 32 // cold subjects: each stays below the limit
)

// failoverRun is one limiter under load: an algorithm, direct or batched.
type failoverRun struct {
	name    string
	durable bool // Config.Replicas 1
	l       *ratelimit.Limiter
	mu      sync.Mutex
	out     []failoverSample
}

type failoverSample struct {
	hot        bool
	key        string
	start, end time.Time
	r          ratelimit.Result
	err        error
}

// TestSentinelFailover kills the primary of a Sentinel topology (kill -9)
// while every algorithm, direct and batched, decides on a hot and many
// cold subjects through a failover client, and measures per limiter how
// long decisions follow the failure policy (FailClosed), how many they are,
// and how many units above the limit the hot subject got once the replica
// took over (asynchronous replication may have lost the last writes: that
// is measured, not asserted). It asserts only that no call errs or stays
// stuck, that no degraded decision is allowed, and that decisions are
// Redis's again within failoverRecover.
//
// Each limiter runs twice: as is, and in the durability mode (Replicas 1).
// Once the replica is promoted, the old primary comes back as its replica
// (restarted empty, it syncs), without which no durable decision can be
// acknowledged. At the end, the units each subject holds on the new
// primary (Peek) are compared with the units the limiter allowed: those
// missing were lost in the failover, let through twice. The durable
// limiters must lose none and let no subject above its limit.
//
// All limiters share one failover: Sentinel will not fail the same master
// over again within twice its failover-timeout, so a failover per
// algorithm would take minutes. Each has its own prefix.
func TestSentinelFailover(t *testing.T) { testSentinelFailover(t, faultKill, strategy.Algorithms()) }

// TestSentinelFailoverLagging is TestSentinelFailover with the replica
// behind when the primary dies: it is paused (SIGSTOP) and its link cut
// (CLIENT KILL TYPE replica) half a second before the kill, and resumed
// after it, so the writes of that half second are lost. Limiters without
// the durability mode let through again the units they had allowed then
// (asserted: the measure sees it); durable ones acknowledged none of them
// (their decisions followed the failure policy) and lose nothing.
func TestSentinelFailoverLagging(t *testing.T) {
	testSentinelFailover(t, faultLagging, strategy.Algorithms())
}

// TestSentinelFailoverCommand is TestSentinelFailover with a failover by
// command (SENTINEL FAILOVER): the primary, alive, is demoted to a replica
// of the promoted one by the Sentinels. Two algorithms keep it short.
func TestSentinelFailoverCommand(t *testing.T) {
	testSentinelFailover(t, faultCommand, []strategy.Algorithm{ratelimit.SlidingLog, ratelimit.TokenBucket})
}

// TestSentinelFailoverStopped is TestSentinelFailover with the primary
// paused (SIGSTOP) until the Sentinels have promoted the replica, then
// resumed: it must come back as the new primary's replica, in sync, and
// the limiters decide by Redis again, none stuck.
func TestSentinelFailoverStopped(t *testing.T) {
	testSentinelFailover(t, faultStop, []strategy.Algorithm{ratelimit.FixedWindow, ratelimit.GCRA})
}

// sentinelFault is what testSentinelFailover does to the primary.
type sentinelFault int

const (
	faultKill    sentinelFault = iota // kill -9; it restarts, empty, as a replica
	faultLagging                      // kill -9, the replica half a second behind
	faultCommand                      // SENTINEL FAILOVER
	faultStop                         // SIGSTOP until a replica is promoted, then SIGCONT
)

func (f sentinelFault) String() string {
	return [...]string{"kill -9", "kill -9, replica lagging", "SENTINEL FAILOVER", "SIGSTOP until promoted, then SIGCONT"}[f]
}

func testSentinelFailover(t *testing.T, fault sentinelFault, algs []strategy.Algorithm) {
	t.Parallel() // its own topology; it mostly waits on Sentinel or the cluster
	lagging := fault == faultLagging
	s := testredis.StartSentinel(t)
	fc := s.Client(t)
	ctx := context.Background()
	prefix := testredis.Prefix(t)

	var runs []*failoverRun
	for _, durable := range []bool{false, true} {
		for _, batched := range []bool{false, true} {
			for _, a := range algs {
				var sc redis.Scripter = fc
				mode := "direct"
				if batched {
					bc, err := batch.New(fc)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { bc.Close() })
					sc, mode = bc, "batched"
				}
				name := string(a) + "/" + mode
				cfg := ratelimit.Config{Algorithm: a, Limit: failoverLimit, Window: failoverWindow,
					OnFailure: ratelimit.FailClosed, Timeout: failoverTimeout}
				if durable {
					name += "/durable"
					cfg.Replicas, cfg.ReplicaTimeout = 1, failoverReplicaTimeout
				}
				cfg.Prefix = prefix + name + ":"
				l, err := ratelimit.New(sc, cfg)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				runs = append(runs, &failoverRun{name: name, durable: durable, l: l})
			}
		}
	}
	// Warm up: each script is cached on the primary and decides.
	for _, run := range runs {
		ok := false
		for deadline := time.Now().Add(10 * time.Second); !ok && time.Now().Before(deadline); {
			r, err := run.l.Allow(ctx, "warm-up")
			ok = err == nil && !r.Degraded
			if ok {
				run.out = append(run.out, failoverSample{key: "warm-up", r: r})
			}
		}
		if !ok {
			t.Fatalf("%s: no decision by Redis before the failover", run.name)
		}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, run := range runs {
		for w := 0; w < failoverWorkers; w++ {
			wg.Add(1)
			go func(rng *rand.Rand) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(failoverPause):
					}
					sm := failoverSample{hot: rng.IntN(2) == 0}
					sm.key = "hot"
					if !sm.hot {
						sm.key = fmt.Sprint("cold", rng.IntN(failoverCold))
					}
					cctx, cancel := context.WithTimeout(ctx, failoverTimeout+failoverSlack)
					sm.start = time.Now()
					sm.r, sm.err = run.l.Allow(cctx, sm.key)
					sm.end = time.Now()
					cancel()
					run.mu.Lock()
					run.out = append(run.out, sm)
					run.mu.Unlock()
				}
			}(rand.New(rand.NewPCG(uint64(i), uint64(w))))
		}
	}
	stopped := false
	stopLoad := func() {
		if stopped {
			return
		}
		stopped = true
		close(stop)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(failoverTimeout + 2*failoverSlack):
			t.Fatalf("decisions still running %v after the load stopped: a call is stuck", failoverTimeout+2*failoverSlack)
		}
	}
	defer stopLoad()

	old := s.Servers[0]
	if lagging {
		time.Sleep(time.Second / 2) // steady load; the hot subject halfway to its limit
		if err := s.Servers[1].Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		pc := redis.NewClient(&redis.Options{Addr: old.Addr, MaxRetries: -1})
		err := pc.ClientKillByFilter(ctx, "TYPE", "replica").Err()
		pc.Close()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second / 2) // writes the replica will never see
	} else {
		time.Sleep(time.Second) // steady load; the hot subject reaches its limit
	}
	// How far behind the replica is as the fault strikes, in bytes of the
	// replication stream: what a plain limiter may lose.
	offset := func(addr, field string) int64 {
		v, _ := testredis.InfoField(ctx, addr, "replication", field)
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	// (read one after the other: about, and 0 when the primary moved on
	// between the two reads)
	behind := max(0, offset(old.Addr, "master_repl_offset")-offset(s.Servers[1].Addr, "slave_repl_offset"))
	// tKill: the fault; tDead: from then on no decision is the old
	// primary's, so a decision by Redis that starts later is the new one's.
	tKill := time.Now()
	var tDead time.Time
	switch fault {
	case faultKill, faultLagging:
		if err := old.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for old.Signal(syscall.Signal(0)) == nil && time.Since(tKill) < 5*time.Second {
			time.Sleep(time.Millisecond)
		}
		tDead = time.Now()
		if lagging {
			if err := s.Servers[1].Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		}
	case faultCommand:
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinels[0].Addr, MaxRetries: -1})
		err := sc.Failover(ctx, s.MasterName).Err()
		sc.Close()
		if err != nil {
			t.Fatal(err)
		}
	case faultStop:
		if err := old.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		tDead = tKill
	}
	newAddr, err := s.WaitNewPrimary(ctx, old.Addr)
	if err != nil {
		if fault == faultStop {
			old.Signal(syscall.SIGCONT)
		}
		t.Fatal(err)
	}
	tPromoted := time.Now()
	if fault == faultCommand {
		tDead = tPromoted // the old primary decided until it was demoted
	}
	if newAddr != s.Servers[1].Addr {
		t.Fatalf("new primary %s, want the replica %s", newAddr, s.Servers[1].Addr)
	}
	// The old primary comes back as the new one's replica (the durable
	// limiters need one): restarted empty after a kill, demoted by the
	// Sentinels otherwise.
	switch fault {
	case faultKill, faultLagging:
		if err := old.RestartAsReplicaOf(newAddr); err != nil {
			t.Fatal(err)
		}
	case faultStop:
		if err := old.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	// Script calls the old primary runs from here on, until it is a
	// replica, are decisions a split brain loses (or, after a stop,
	// calls sent before the promotion that their callers gave up on).
	scriptCalls := func() int64 {
		n, _ := testredis.Calls(ctx, old.Addr, "evalsha")
		return n
	}
	callsBefore := scriptCalls()
	syncCtx, cancel := context.WithTimeout(ctx, failoverRecover)
	defer cancel()
	if err := testredis.WaitInSync(syncCtx, old.Addr); err != nil {
		t.Fatal(err)
	}
	callsAfter := scriptCalls()
	_, newPort, _ := strings.Cut(newAddr, ":")
	if port, err := testredis.InfoField(ctx, old.Addr, "replication", "master_port"); err != nil || port != newPort {
		t.Fatalf("the old primary replicates port %q (%v); want the new primary's, %s", port, err, newPort)
	}
	tSynced := time.Now()

	// Liveness: every limiter decides by Redis again.
	recovered := func(run *failoverRun) bool {
		run.mu.Lock()
		defer run.mu.Unlock()
		_, ok := run.firstRedis(tDead)
		return ok
	}
	deadline := tKill.Add(failoverRecover)
	for _, run := range runs {
		for !recovered(run) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(time.Second) // and stay Redis's
	stopLoad()
	t.Logf("fault: %v, the replica %d bytes behind; the old primary's decisions over %v after it; Sentinels report %s as the primary %v after it; the old primary in sync as its replica %v after it, having run %d script calls since the promotion",
		fault, behind, tDead.Sub(tKill).Round(time.Millisecond), newAddr, tPromoted.Sub(tKill).Round(time.Millisecond), tSynced.Sub(tKill).Round(time.Millisecond), callsAfter-callsBefore)

	var table []string
	lostPlain := 0 // by the limiters without the durability mode
	for _, run := range runs {
		var (
			total, degraded, hotAllowed, aboveCold, stuck, errs int
			slowest, lastDegraded                               time.Duration
			allowed                                             = map[string]int{} // by Redis, per subject
		)
		for _, sm := range run.out {
			total++
			slowest = max(slowest, sm.end.Sub(sm.start))
			if sm.err != nil {
				errs++
				if errors.Is(sm.err, context.DeadlineExceeded) && sm.end.Sub(sm.start) >= failoverTimeout+failoverSlack {
					stuck++
				}
				if errs <= 3 {
					t.Errorf("%s: Allow(%q) at %+v after the kill: %v; want a decision", run.name, sm.key, sm.start.Sub(tKill), sm.err)
				}
				continue
			}
			if sm.r.Degraded {
				degraded++
				lastDegraded = max(lastDegraded, sm.start.Sub(tKill))
				if sm.r.Allowed {
					t.Errorf("%s: degraded decision allowed under FailClosed: %+v", run.name, sm.r)
				}
				continue
			}
			if !sm.r.Allowed {
				continue
			}
			allowed[sm.key]++
			if sm.hot {
				hotAllowed++
			}
		}
		// Lost: units allowed that the new primary does not hold.
		lost := 0
		for key, n := range allowed {
			if strings.HasPrefix(key, "cold") {
				aboveCold += max(0, n-failoverLimit)
			}
			// a durable limiter's breaker may still be open from the time
			// it had no replica: Peek until Redis answers
			r, err := run.l.Peek(ctx, key)
			for deadline := time.Now().Add(failoverSlack); (err != nil || r.Degraded) && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
				r, err = run.l.Peek(ctx, key)
			}
			if err != nil || r.Degraded {
				t.Errorf("%s: Peek(%q) after the failover: %+v, %v", run.name, key, r, err)
				continue
			}
			lost += max(0, n-int(r.Limit-r.Remaining))
		}
		if !run.durable {
			lostPlain += lost
		}
		if run.durable && (lost > 0 || aboveCold > 0 || hotAllowed > failoverLimit) {
			t.Errorf("%s: durable, the replica in sync: %d units lost in the failover, hot subject allowed %d (limit %d), cold subjects %d above; want none lost, none above",
				run.name, lost, hotAllowed, failoverLimit, aboveCold)
		}
		if stuck > 0 {
			t.Errorf("%s: %d calls returned only when their context ended, %v after they began: stuck", run.name, stuck, failoverTimeout+failoverSlack)
		}
		first, ok := run.firstRedis(tDead)
		if !ok {
			t.Errorf("%s: no decision by Redis within %v of the kill", run.name, failoverRecover)
			continue
		}
		table = append(table, fmt.Sprintf("%-32s %9v %13v %9d %6d %11s %10d %5d %8v", run.name, first.Sub(tKill).Round(10*time.Millisecond),
			lastDegraded.Round(10*time.Millisecond), degraded, total, fmt.Sprintf("%d (%+d)", hotAllowed, hotAllowed-failoverLimit), aboveCold, lost, slowest.Round(time.Millisecond)))
	}
	sort.Strings(table)
	if lagging && lostPlain == 0 {
		t.Errorf("the replica lagged by half a second of writes, yet the limiters without the durability mode lost no unit: the measure is blind")
	}
	t.Logf("fault: %v; per limiter (FailClosed, limit %d per %v, Timeout %v, durable: Replicas 1, ReplicaTimeout %v), times after the fault:\n%-32s %9s %13s %9s %6s %11s %10s %5s %8s\n%s",
		fault, failoverLimit, failoverWindow, failoverTimeout, failoverReplicaTimeout,
		"limiter", "recovered", "last degraded", "degraded", "total", "hot allowed", "cold above", "lost", "slowest", strings.Join(table, "\n"))
}

// firstRedis returns the start of the first decision made by Redis that
// began after t. The caller holds run.mu.
func (run *failoverRun) firstRedis(t time.Time) (time.Time, bool) {
	var first time.Time
	for _, sm := range run.out {
		if sm.err == nil && !sm.r.Degraded && sm.start.After(t) && (first.IsZero() || sm.start.Before(first)) {
			first = sm.start
		}
	}
	return first, !first.IsZero()
}
