package ratelimit_test

import (
	"context"
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
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// TestRestartAOF kills (SIGKILL) a Redis that writes an append-only file
// (appendfsync everysec) while every algorithm decides on a hot and many
// cold subjects, restarts it on the same port and files, and measures per
// limiter the units it had allowed that the restarted Redis no longer
// holds. It asserts that every limiter decides by Redis again, that no
// call errs or stays stuck, and that the restarted Redis holds the
// subjects' state (what a restart without persistence would lose: every
// unit); the loss itself is measured (the kernel keeps what Redis wrote
// before the kill, fsynced or not, so a process kill loses at most what
// was still in Redis's buffer; a machine crash can lose up to a second,
// not tested here).
func TestRestartAOF(t *testing.T) {
	srv := testredis.Start(t, "--appendonly", "yes", "--appendfsync", "everysec")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	prefix := testredis.Prefix(t)
	var runs []*failoverRun
	for _, a := range strategy.Algorithms() {
		name := string(a)
		l, err := ratelimit.New(rdb, ratelimit.Config{Algorithm: a, Limit: failoverLimit, Window: failoverWindow,
			OnFailure: ratelimit.FailClosed, Timeout: failoverTimeout, Prefix: prefix + name + ":"})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, &failoverRun{name: name, l: l})
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
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopLoad()
	time.Sleep(time.Second / 2) // steady load; the hot subject halfway to its limit
	tKill := time.Now()
	if err := srv.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil { // same port, same files: it loads the AOF
		t.Fatal(err)
	}
	tUp := time.Now()
	for _, run := range runs {
		for {
			run.mu.Lock()
			_, ok := run.firstRedis(tUp)
			run.mu.Unlock()
			if ok || time.Since(tUp) > failoverRecover {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(time.Second / 2)
	stopLoad()

	var table []string
	for _, run := range runs {
		var total, degraded, errs, hotAllowed, lost, before int
		allowed := map[string]int{}
		for _, sm := range run.out {
			total++
			switch {
			case sm.err != nil:
				if errs++; errs <= 3 {
					t.Errorf("%s: Allow(%q) at %+v after the kill: %v; want a decision", run.name, sm.key, sm.start.Sub(tKill), sm.err)
				}
			case sm.r.Degraded:
				degraded++
			case sm.r.Allowed:
				allowed[sm.key]++
				if sm.end.Before(tKill) {
					before++
				}
				if sm.hot {
					hotAllowed++
				}
			}
		}
		for key, n := range allowed {
			r, err := run.l.Peek(ctx, key)
			if err != nil || r.Degraded {
				t.Errorf("%s: Peek(%q) after the restart: %+v, %v", run.name, key, r, err)
				continue
			}
			lost += max(0, n-int(r.Limit-r.Remaining))
		}
		if before > 0 && lost >= before {
			t.Errorf("%s: %d units lost of the %d allowed before the kill: the AOF was not loaded", run.name, lost, before)
		}
		run.mu.Lock()
		first, ok := run.firstRedis(tUp)
		run.mu.Unlock()
		if !ok {
			t.Errorf("%s: no decision by Redis within %v of the restart", run.name, failoverRecover)
			continue
		}
		table = append(table, fmt.Sprintf("%-16s %9v %9d %6d %11s %5d", run.name, first.Sub(tKill).Round(10*time.Millisecond),
			degraded, total, fmt.Sprintf("%d (%+d)", hotAllowed, hotAllowed-failoverLimit), lost))
	}
	sort.Strings(table)
	t.Logf("restarted %v after the kill; per limiter (FailClosed, limit %d per %v, appendfsync everysec), times after the kill:\n%-16s %9s %9s %6s %11s %5s\n%s",
		tUp.Sub(tKill).Round(time.Millisecond), failoverLimit, failoverWindow,
		"limiter", "recovered", "degraded", "total", "hot allowed", "lost", strings.Join(table, "\n"))
}
