package lease_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/gcra"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/lease"
	"github.com/ratekit/ratelimit/slidingcounter"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

type builder func(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error)

type algorithm struct {
	name  string
	build builder
}

var algorithms = []algorithm{
	{"slidinglog", func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
		return slidinglog.New(rdb, lim, o...)
	}},
	{"fixedwindow", func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
		return fixedwindow.New(rdb, lim, o...)
	}},
	{"tokenbucket", func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
		return tokenbucket.New(rdb, lim, o...)
	}},
	{"gcra", func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
		return gcra.New(rdb, lim, o...)
	}},
	{"compactlog", func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
		return compactlog.New(rdb, lim, o...)
	}},
	{"slidingcounter", func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
		return slidingcounter.New(rdb, lim, o...)
	}},
}

// aligned returns, for the algorithms of aligned windows, how many
// windows before the end an allowed decision's ResetAfter reaches the
// window the decision counts in: the fixed window's is its own, the
// sliding counter's the next one's; 0 for the others.
func aligned(name string) int64 {
	switch name {
	case "fixedwindow":
		return 1
	case "slidingcounter":
		return 2
	}
	return 0
}

// outcome is what one process of a shared run was allowed: the Unix ms of
// each allowed unit, and its stats.
type outcome struct {
	allowed []int64
	asked   int64
	stats   lease.Stats
}

// share runs len(demand) processes (each its own client and limiter) on one
// subject for d; process i asks demand[i] units per Window, one at a time,
// paced by the real clock.
func share(t *testing.T, a algorithm, lim strategy.Limit, demand []float64, d time.Duration) []outcome {
	return run(t, a, lim, demand, d, false)
}

// run is share, with direct: without leases (each limiter closed first,
// so that it decides through its strategy, one call per decision).
func run(t *testing.T, a algorithm, lim strategy.Limit, demand []float64, d time.Duration, direct bool) []outcome {
	t.Helper()
	srv := testredis.Shared(t)
	prefix := testredis.Prefix(t)
	out := make([]outcome, len(demand))
	ls := make([]*lease.Limiter, len(demand))
	for i := range demand {
		rdb := srv.Client(t)
		l, err := lease.New(lim, func(lim strategy.Limit) (strategy.Strategy, error) {
			return a.build(rdb, lim, strategy.WithPrefix(prefix))
		})
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	ctx := context.Background()
	if direct {
		for _, l := range ls {
			if err := l.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, dem := range demand {
		// each process has callers goroutines, as a server has requests
		for range callers {
			wg.Go(func() {
				every := time.Duration(float64(lim.Window) * callers / dem)
				for k := 0; ; k++ {
					due := start.Add(time.Duration(k) * every)
					if due.Sub(start) >= d {
						break
					}
					if w := time.Until(due); w > 0 {
						time.Sleep(w)
					}
					res, at, err := decide(ls[i])
					if err != nil {
						t.Errorf("process %d: %v", i, err)
						return
					}
					mu.Lock()
					out[i].asked++
					if res.Allowed {
						out[i].allowed = append(out[i].allowed, decidedAt(at, res, lim, aligned(a.name)))
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for i, l := range ls {
		if err := l.Close(ctx); err != nil {
			t.Error(err)
		}
		out[i].stats = l.Stats()
	}
	return out
}

// callers is the goroutines of each process.
const callers = 4

// decide asks l for one unit of the hot subject and returns when it was
// decided (Unix ns): when the lease decided, the clock's reading it
// decided at; when Redis did, the time of its reply (Redis decided
// before).
func decide(l *lease.Limiter) (strategy.Result, int64, error) {
	return l.AllowAt(context.Background(), "hot", 1)
}

// decidedAt returns the Unix ms a unit allowed by res counts at, given the
// time at that AllowAt returned. For the lease's own decisions (ResetAfter
// 0) that is at. Redis decided the others before its reply: for the
// algorithms of aligned windows (back > 0, see aligned) the unit counts in
// the window that ends back windows before ResetAfter after the reply,
// whose start is returned (the reply may come after its end); the time of
// the reply otherwise.
func decidedAt(at int64, res strategy.Result, lim strategy.Limit, back int64) int64 {
	ms := at / int64(time.Millisecond)
	if res.ResetAfter == 0 || back == 0 {
		return ms
	}
	w := lim.Window.Milliseconds()
	return ((ms+res.ResetAfter.Milliseconds())/w - back) * w
}

// maxWindow returns the most units of a (sorted Unix ms) in any window
// (t - w, t].
func maxWindow(a []int64, w int64) int64 {
	lo, most := 0, 0
	for hi := range a {
		for a[lo] <= a[hi]-w {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return int64(most)
}

// maxAligned returns the most units of a in one aligned window.
func maxAligned(a []int64, w int64) int64 {
	c := map[int64]int64{}
	var most int64
	for _, t := range a {
		c[t/w]++
		most = max(most, c[t/w])
	}
	return most
}

// maxArrival returns the largest excess over burst + rate × (b - a), in
// units × w, over the intervals [a, b] of a; <= 0 keeps the bound.
func maxArrival(a []int64, lim strategy.Limit) int64 {
	w, b := lim.Window.Milliseconds(), lim.Capacity()
	worst := int64(-1 << 62)
	for i := range a {
		for j := i; j < len(a); j++ {
			if j+1 < len(a) && a[j+1] == a[j] {
				continue
			}
			worst = max(worst, int64(j-i+1)*w-(b*w+lim.Limit*(a[j]-a[i])))
		}
	}
	return worst
}

func merged(out []outcome) []int64 {
	var all []int64
	for _, o := range out {
		all = append(all, o.allowed...)
	}
	slices.Sort(all)
	return all
}

// TestEightProcesses: 8 processes share one subject at twice the limit's
// demand: never above the algorithm's bound, at least 95 % of the limit
// used, and no process below half its fair share.
func TestEightProcesses(t *testing.T) {
	lim := strategy.Limit{Limit: 1000, Window: time.Second}
	const d = 2 * time.Second
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) {
			demand := make([]float64, 8)
			for i := range demand {
				demand[i] = 2 * float64(lim.Limit) / 8
			}
			out := share(t, a, lim, demand, d)
			all := merged(out)
			w := lim.Window.Milliseconds()
			switch a.name {
			case "slidinglog", "compactlog":
				if got := maxWindow(all, w); got > lim.Limit {
					t.Errorf("%d units in one sliding window, limit %d", got, lim.Limit)
				}
			case "fixedwindow", "slidingcounter":
				if got := maxAligned(all, w); got > lim.Limit {
					t.Errorf("%d units in one aligned window, limit %d", got, lim.Limit)
				}
				// the counter's other bound (see package slidingcounter)
				if most := lim.Limit + lim.Limit*(w-2)/w; a.name == "slidingcounter" && maxWindow(all, w) > most {
					t.Errorf("%d units in one sliding window, at most %d", maxWindow(all, w), most)
				}
			default:
				if ex := maxArrival(all, lim); ex > 0 {
					t.Errorf("burst + rate × t exceeded by %d/%d units", ex, w)
				}
			}
			// the limit's units over the run: for the bucket, its burst
			// once and the refill of the run
			want := float64(lim.Limit) * float64(d) / float64(lim.Window)
			if a.name == "tokenbucket" || a.name == "gcra" {
				want = float64(lim.Capacity()) + float64(lim.Limit)*float64(d)/float64(lim.Window)
			}
			used := float64(len(all)) / want
			var report string
			for i, o := range out {
				report += fmt.Sprintf(" p%d %d/%d (%d leases, %d stranded, %d returned);", i, len(o.allowed), o.asked, o.stats.Leases, o.stats.Stranded, o.stats.Returned)
			}
			t.Logf("%d allowed, %.1f %% of the limit's %.0f:%s", len(all), 100*used, want, report)
			if used < 0.95 {
				t.Errorf("%.1f %% of the limit used, want >= 95 %%", 100*used)
			}
			fair := float64(len(all)) / 8
			for i, o := range out {
				if float64(len(o.allowed)) < fair/2 {
					t.Errorf("process %d allowed %d, below half its fair share %.0f", i, len(o.allowed), fair)
				}
			}
		})
	}
}

// TestOneProcess: one process far above the limit stays within the bound.
func TestOneProcess(t *testing.T) {
	lim := strategy.Limit{Limit: 1000, Window: time.Second}
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) {
			out := share(t, a, lim, []float64{3000}, time.Second)
			all := merged(out)
			if ex := maxArrival(all, lim); (a.name == "tokenbucket" || a.name == "gcra") && ex > 0 {
				t.Errorf("burst + rate × t exceeded by %d/%d units", ex, lim.Window.Milliseconds())
			}
			t.Logf("%d allowed of %d; %+v", len(all), out[0].asked, out[0].stats)
		})
	}
}

// TestUnequalDemand: the fairness rule under unequal demand. Two
// processes ask 1.5 times the limit each, six ask a sixteenth of it each
// (less than an equal share). Redis serves whoever asks first, so without
// leases too the light processes get what is free when they ask; with
// leases a heavy process holds at most capacity/8 unspent and its blocks
// are all or none, so the light processes together get at least 3/4 of
// what they get without leases, and no more goes to the heavy ones.
func TestUnequalDemand(t *testing.T) {
	lim := strategy.Limit{Limit: 1000, Window: time.Second}
	const d = 2 * time.Second
	for _, a := range []algorithm{algorithms[0], algorithms[2]} { // a log and a bucket
		t.Run(a.name, func(t *testing.T) {
			demand := []float64{1500, 1500, 62.5, 62.5, 62.5, 62.5, 62.5, 62.5}
			out := share(t, a, lim, demand, d)
			base := run(t, a, lim, demand, d, true)
			var report string
			var light, lightBase int
			for i, o := range out {
				report += fmt.Sprintf(" p%d %d/%d (direct %d/%d);", i, len(o.allowed), o.asked, len(base[i].allowed), base[i].asked)
				if i >= 2 {
					light += len(o.allowed)
					lightBase += len(base[i].allowed)
				}
			}
			t.Logf("allowed/asked:%s", report)
			if 4*light < 3*lightBase {
				t.Errorf("light processes allowed %d with leases, %d without: below 3/4", light, lightBase)
			}
			for i, o := range out[2:] {
				if len(o.allowed) == 0 {
					t.Errorf("light process %d allowed nothing", i+2)
				}
			}
		})
	}
}
