package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
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
)

// failoverRun is one limiter under load: an algorithm, direct or batched.
type failoverRun struct {
	name string
	l    *ratelimit.Limiter
	mu   sync.Mutex
	out  []failoverSample
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
// All limiters share one failover: Sentinel will not fail the same master
// over again within twice its failover-timeout, so a failover per
// algorithm would take minutes. Each has its own prefix.
func TestSentinelFailover(t *testing.T) {
	s := testredis.StartSentinel(t)
	fc := s.Client(t)
	ctx := context.Background()
	prefix := testredis.Prefix(t)

	var runs []*failoverRun
	for _, batched := range []bool{false, true} {
		for _, a := range strategy.Algorithms() {
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
			l, err := ratelimit.New(sc, ratelimit.Config{Algorithm: a, Limit: failoverLimit, Window: failoverWindow,
				Prefix: prefix + name + ":", OnFailure: ratelimit.FailClosed, Timeout: failoverTimeout})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			runs = append(runs, &failoverRun{name: name, l: l})
		}
	}
	// Warm up: each script is cached on the primary and decides.
	for _, run := range runs {
		ok := false
		for deadline := time.Now().Add(10 * time.Second); !ok && time.Now().Before(deadline); {
			r, err := run.l.Allow(ctx, "warm-up")
			ok = err == nil && !r.Degraded
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
						sm.key = fmt.Sprint("cold", rng.IntN(32))
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

	time.Sleep(time.Second) // steady load; the hot subject reaches its limit
	old := s.Servers[0]
	tKill := time.Now()
	if err := old.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// From here on the primary is gone: a decision started later and
	// made by Redis was made by the new primary.
	for old.Signal(syscall.Signal(0)) == nil && time.Since(tKill) < 5*time.Second {
		time.Sleep(time.Millisecond)
	}
	tDead := time.Now()
	newAddr, err := s.WaitNewPrimary(ctx, old.Addr)
	if err != nil {
		t.Fatal(err)
	}
	tPromoted := time.Now()
	if newAddr != s.Servers[1].Addr {
		t.Fatalf("new primary %s, want the replica %s", newAddr, s.Servers[1].Addr)
	}

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
	t.Logf("primary killed; dead after %v; Sentinels report %s as the primary %v after the kill",
		tDead.Sub(tKill).Round(time.Millisecond), newAddr, tPromoted.Sub(tKill).Round(time.Millisecond))

	var table []string
	for _, run := range runs {
		var (
			total, degraded, hotAllowed, aboveCold, stuck, errs int
			slowest, lastDegraded                               time.Duration
			coldAllowed                                         = map[string]int{}
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
			switch {
			case !sm.r.Allowed:
			case sm.hot:
				hotAllowed++
			case strings.HasPrefix(sm.key, "cold"):
				coldAllowed[sm.key]++
			}
		}
		for _, n := range coldAllowed {
			aboveCold += max(0, n-failoverLimit)
		}
		if stuck > 0 {
			t.Errorf("%s: %d calls returned only when their context ended, %v after they began: stuck", run.name, stuck, failoverTimeout+failoverSlack)
		}
		first, ok := run.firstRedis(tDead)
		if !ok {
			t.Errorf("%s: no decision by Redis within %v of the kill", run.name, failoverRecover)
			continue
		}
		table = append(table, fmt.Sprintf("%-24s %9v %13v %9d %6d %11s %10d %8v", run.name, first.Sub(tKill).Round(10*time.Millisecond),
			lastDegraded.Round(10*time.Millisecond), degraded, total, fmt.Sprintf("%d (%+d)", hotAllowed, hotAllowed-failoverLimit), aboveCold, slowest.Round(time.Millisecond)))
	}
	sort.Strings(table)
	t.Logf("per limiter (FailClosed, limit %d per %v, Timeout %v), times after the kill:\n%-24s %9s %13s %9s %6s %11s %10s %8s\n%s", failoverLimit, failoverWindow, failoverTimeout,
		"limiter", "recovered", "last degraded", "degraded", "total", "hot allowed", "cold above", "slowest", strings.Join(table, "\n"))
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
