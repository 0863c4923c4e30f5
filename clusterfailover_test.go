package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// TestClusterFailover fails over, by CLUSTER FAILOVER, the master of the
// hot subject of a cluster with a replica per master, while every
// algorithm, direct and batched, as is and in the durability mode
// (Replicas 1), decides on the hot and many cold subjects (FailClosed).
// It asserts that no call errs or stays stuck, that every limiter's
// decisions are Redis's again after the failover, on the new master
// whose script cache was empty (it answered NOSCRIPT, and the executor
// loaded the scripts), and that nothing was lost: a coordinated failover
// waits for the replica to catch up, so every unit allowed is held by the
// new master. It logs per limiter the decisions under the failure policy.
func TestClusterFailover(t *testing.T) { testClusterFailover(t, false, strategy.Algorithms()) }

// TestClusterMasterKilled kills the hot subject's master outright
// (SIGKILL) under the same load: its replica takes its slots after the
// cluster's node timeout, and the killed node, restarted empty, rejoins as
// the new master's replica. It asserts what TestClusterFailover does, but
// measures the units lost rather than asserting none (what the replica
// had not received is lost), except for the durable limiters: none lost,
// none above the limit. Two algorithms keep it short.
func TestClusterMasterKilled(t *testing.T) {
	testClusterFailover(t, true, []strategy.Algorithm{ratelimit.SlidingCounter, ratelimit.CompactLog})
}

func testClusterFailover(t *testing.T, kill bool, algs []strategy.Algorithm) {
	t.Parallel() // its own topology; it mostly waits on Sentinel or the cluster
	fault := "CLUSTER FAILOVER"
	if kill {
		fault = "SIGKILL"
	}
	rc := testredis.StartReplicatedCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs(), ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { cc.Close() })
	ctx := context.Background()
	prefix := testredis.Prefix(t)

	var runs []*failoverRun
	for _, durable := range []bool{false, true} {
		for _, batched := range []bool{false, true} {
			for _, a := range algs {
				var sc redis.Scripter = cc
				name := string(a) + "/direct"
				if batched {
					bc, err := batch.New(cc)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { bc.Close() })
					sc, name = bc, string(a)+"/batched"
				}
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
	// The hot subject's master, and its replica: the next master.
	hotMaster, err := cc.MasterForKey(ctx, strategy.KeyFor("", "", "hot", strategy.NoShard))
	if err != nil {
		t.Fatal(err)
	}
	m := -1
	for i, n := range rc.Nodes {
		if n.Addr == hotMaster.Options().Addr {
			m = i
		}
	}
	if m < 0 {
		t.Fatalf("the hot subject's master %s is none of the cluster's", hotMaster.Options().Addr)
	}
	next := rc.Replicas[m]
	for _, run := range runs {
		r, err := run.l.Allow(ctx, "hot") // warm up: each script cached on the hot master
		if err != nil || r.Degraded {
			t.Fatalf("%s: no decision by Redis before the failover: %+v, %v", run.name, r, err)
		}
		run.out = append(run.out, failoverSample{hot: true, key: "hot", r: r})
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, run := range runs {
		for w := range failoverWorkers {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(failoverPause):
					}
					sm := failoverSample{hot: rng.IntN(2) == 0, key: "hot"}
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
			})
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

	time.Sleep(time.Second / 2) // steady load
	tFail := time.Now()
	var tPromoted time.Time
	if kill {
		if err := rc.Kill(ctx, m); err != nil {
			t.Fatal(err)
		}
		tPromoted = time.Now()
		if err := rc.Rejoin(ctx, m); err != nil {
			t.Fatal(err)
		}
	} else if err := rc.Failover(ctx, m); err != nil {
		t.Fatal(err)
	}
	tDone := time.Now()
	if !kill {
		tPromoted = tDone
	}
	recovered := func(run *failoverRun) bool {
		run.mu.Lock()
		defer run.mu.Unlock()
		_, ok := run.firstRedis(tPromoted)
		return ok
	}
	for _, run := range runs {
		for !recovered(run) && time.Since(tDone) < failoverRecover {
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(time.Second / 2) // and stay Redis's
	stopLoad()
	noscript, err := testredis.InfoField(ctx, next.Addr, "errorstats", "errorstat_NOSCRIPT")
	if err != nil {
		t.Fatal(err)
	}
	// (After a kill, the executor may have loaded the scripts on the new
	// master before its first EVALSHA there: the calls it redirected while
	// the slots had no master. Only the liveness below is asserted.)
	if noscript == "" && !kill {
		t.Errorf("the new master %s never answered NOSCRIPT: its script cache was not empty, the test checks nothing of the recovery", next.Addr)
	}
	t.Logf("%s of master %d (the hot subject's): its replica the master for every node %v after it, the old master an in-sync replica %v after it; new master's NOSCRIPT replies: %s",
		fault, m, tPromoted.Sub(tFail).Round(time.Millisecond), tDone.Sub(tFail).Round(time.Millisecond), noscript)

	var table []string
	for _, run := range runs {
		var total, degraded, errs, hotAllowed, lost, aboveCold int
		var slowest time.Duration
		allowed := map[string]int{}
		for _, sm := range run.out {
			total++
			slowest = max(slowest, sm.end.Sub(sm.start))
			switch {
			case sm.err != nil:
				if errs++; errs <= 3 {
					t.Errorf("%s: Allow(%q) at %+v after %s: %v; want a decision", run.name, sm.key, sm.start.Sub(tFail), fault, sm.err)
				}
			case sm.r.Degraded:
				degraded++
			case sm.r.Allowed:
				allowed[sm.key]++
				if sm.hot {
					hotAllowed++
				}
			}
		}
		for key, n := range allowed {
			if strings.HasPrefix(key, "cold") {
				aboveCold += max(0, n-failoverLimit)
			}
			// a durable limiter's breaker may still be open from the time
			// its replica was away: Peek until Redis answers
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
		if (!kill || run.durable) && (lost > 0 || hotAllowed > failoverLimit || aboveCold > 0) {
			t.Errorf("%s: %d units lost (%s), hot subject allowed %d (limit %d), cold subjects %d above; want none lost, none above",
				run.name, lost, fault, hotAllowed, failoverLimit, aboveCold)
		}
		first, ok := run.firstRedis(tPromoted)
		if !ok {
			t.Errorf("%s: no decision by Redis within %v of the failover", run.name, failoverRecover)
			continue
		}
		table = append(table, fmt.Sprintf("%-32s %9v %9d %6d %11s %5d %8v", run.name, first.Sub(tFail).Round(10*time.Millisecond),
			degraded, total, fmt.Sprintf("%d (%+d)", hotAllowed, hotAllowed-failoverLimit), lost, slowest.Round(time.Millisecond)))
	}
	sort.Strings(table)
	t.Logf("per limiter (FailClosed, limit %d per %v, Timeout %v, durable: Replicas 1, ReplicaTimeout %v), times after %s:\n%-32s %9s %9s %6s %11s %5s %8s\n%s",
		failoverLimit, failoverWindow, failoverTimeout, failoverReplicaTimeout, fault,
		"limiter", "redis at", "degraded", "total", "hot allowed", "lost", "slowest", strings.Join(table, "\n"))
}
