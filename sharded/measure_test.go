package sharded

import (
	"context"
	"fmt"
	"hash/maphash"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// counting wraps a strategy and counts the decisions that reach it: each is
// one round trip on Redis.
type counting struct {
	strategy.Strategy
	calls *atomic.Int64
}

// Shard counts the decisions of the wrapped strategy's shard view.
func (c counting) Shard(i int) strategy.Strategy {
	return counting{c.Strategy.(engine.Sharder).Shard(i), c.calls}
}

func (c counting) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	c.calls.Add(1)
	return c.Strategy.AllowN(ctx, key, n)
}

// variant is one way of picking and probing shards.
type variant struct {
	name   string
	mode   pickMode
	probes int // 0: not sharded, for reference
}

var variants = []variant{
	{"unsharded", pickRoundRobin, 0},
	{"random, 1 probe", pickRandom, 1},
	{"random, 2 probes", pickRandom, 2},
	{"random, all probes", pickRandom, 6},
	{"round robin, 1 probe", pickRoundRobin, 1},
	{"round robin, 2 probes (default)", pickRoundRobin, 2},
	{"round robin, all probes", pickRoundRobin, 6},
}

// hosts builds h Limiters ("app hosts") over the same shard strategies, 6
// shards, sliding-log twins on clock, counting decisions into calls.
func (v variant) hosts(t *testing.T, h int, lim strategy.Limit, clock strategy.Clock, calls *atomic.Int64) []*Limiter {
	t.Helper()
	shards, probes := 6, v.probes
	if probes == 0 {
		shards, probes = 1, 1
	}
	built := map[strategy.Limit]strategy.Strategy{}
	var out []*Limiter
	for range h {
		l, err := New(shards, lim, func(sl strategy.Limit) (strategy.Strategy, error) {
			if st, ok := built[sl]; ok {
				return st, nil
			}
			st, err := slidinglog.NewLocal(sl, strategy.WithClock(clock))
			built[sl] = counting{Strategy: st, calls: calls}
			return built[sl], err
		}, WithProbes(probes))
		if err != nil {
			t.Fatal(err)
		}
		l.pick = v.mode
		out = append(out, l)
	}
	return out
}

// outcome is what a scenario measured: units allowed and sent, requests
// sent, decisions (round trips) made.
type outcome struct{ allowed, sent, requests, trips int64 }

func (o *outcome) add(p outcome) {
	o.allowed += p.allowed
	o.sent += p.sent
	o.requests += p.requests
	o.trips += p.trips
}

// scenario drives one variant and reports what it allowed; limit is the
// subject's limit, for the never-above check of bursts (0: not checked).
type scenario struct {
	name  string
	limit int64
	floor float64 // the least the default variant must allow
	run   func(t *testing.T, v variant) outcome
}

const measureLimit = 300

var measureLim = strategy.Limit{Limit: measureLimit, Window: time.Minute}

// burst sends requests from 16 goroutines at one frozen instant.
func burst(factor float64) scenario {
	return scenario{fmt.Sprintf("burst %.1fx", factor), measureLimit, 1, func(t *testing.T, v variant) outcome {
		var calls atomic.Int64
		frozen := strategy.ClockFunc(func() time.Time { return conformance.Epoch })
		l := v.hosts(t, 1, measureLim, frozen, &calls)[0]
		requests := int64(factor * measureLimit)
		var allowed, next atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for next.Add(1) <= requests {
					if r, err := l.AllowN(context.Background(), "hot", 1); err != nil {
						t.Error(err)
						return
					} else if r.Allowed {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return outcome{allowed.Load(), requests, requests, calls.Load()}
	}}
}

// steady sends from h hosts, in turn, costs cost(i) spaced exactly at the
// rate, over 5 windows: an unsharded sliding log allows (nearly) all of it.
func steady(name string, h int, floor float64, cost func(i int) int64) scenario {
	return scenario{name, 0, floor, func(t *testing.T, v variant) outcome {
		var calls atomic.Int64
		clock := conformance.NewClock(conformance.Epoch)
		ls := v.hosts(t, h, measureLim, clock, &calls)
		var o outcome
		step := measureLim.Window / time.Duration(measureLim.Limit)
		for i := 0; o.sent < 5*measureLimit; i++ {
			n := cost(i)
			r, err := ls[(i*5+i/3)%h].AllowN(context.Background(), "hot", n)
			if err != nil {
				t.Fatal(err)
			}
			o.sent += n
			o.requests++
			if r.Allowed {
				o.allowed += n
			}
			clock.Advance(time.Duration(n) * step)
		}
		o.trips = calls.Load()
		return o
	}}
}

// aliased has two subjects that share a round-robin counter alternate
// strictly, each at its rate: the worst case of round robin.
var aliased = scenario{"2 subjects, one counter", 0, 0.99, func(t *testing.T, v variant) outcome {
	var calls atomic.Int64
	clock := conformance.NewClock(conformance.Epoch)
	l := v.hosts(t, 1, measureLim, clock, &calls)[0]
	a, b := "a", ""
	for i := 0; ; i++ {
		if b = "b" + strconv.Itoa(i); maphash.String(l.seed, a)%rrStripes == maphash.String(l.seed, b)%rrStripes {
			break
		}
	}
	var o outcome
	for i := 0; i < 5*measureLimit; i++ {
		for _, k := range []string{a, b} {
			r, err := l.AllowN(context.Background(), k, 1)
			if err != nil {
				t.Fatal(err)
			}
			o.sent++
			o.requests++
			if r.Allowed {
				o.allowed++
			}
		}
		clock.Advance(measureLim.Window / measureLimit)
	}
	o.trips = calls.Load()
	return o
}}

var scenarios = []scenario{
	burst(1), burst(1.5), burst(3),
	steady("steady, 1 host", 1, 0.99, func(int) int64 { return 1 }),
	steady("steady, 8 hosts", 8, 0.97, func(int) int64 { return 1 }),
	steady("steady, costs 1-10", 1, 0.80, func(i int) int64 { return int64(mix(uint64(i))%10 + 1) }),
	aliased,
}

// TestPrecision measures, for each way of picking and probing shards, the
// share of the limit a sharded subject (300/min over 6 shards, sliding-log
// twins) allows and the round trips it costs, next to an unsharded one; it
// checks that no variant allows above the limit in a burst and that the
// default allows all of a burst and of a steady stream at the rate.
// RATELIMIT_SHARDED_RUNS=n averages n runs of each (default 1); run with -v
// for the table.
func TestPrecision(t *testing.T) {
	runs := 1
	if s := os.Getenv("RATELIMIT_SHARDED_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-34s", "allowed/sent, round trips/request")
	for _, sc := range scenarios {
		fmt.Fprintf(&table, " | %-23s", sc.name)
	}
	for _, v := range variants {
		fmt.Fprintf(&table, "\n%-34s", v.name)
		for _, sc := range scenarios {
			var o outcome
			for range runs {
				p := sc.run(t, v)
				if sc.limit > 0 && p.allowed > sc.limit {
					t.Errorf("%s, %s: allowed %d, above the limit %d", v.name, sc.name, p.allowed, sc.limit)
				}
				o.add(p)
			}
			ratio := float64(o.allowed) / float64(o.sent)
			if sc.limit > 0 {
				ratio = float64(o.allowed) / float64(int64(runs)*sc.limit)
			}
			fmt.Fprintf(&table, " | %5.3f, %4.2f trips      ", ratio, float64(o.trips)/float64(o.requests))
			if strings.HasSuffix(v.name, "(default)") && ratio < sc.floor {
				t.Errorf("default sharding, %s: allowed %.3f of what it should, want >= %.2f", sc.name, ratio, sc.floor)
			}
		}
	}
	t.Logf("6 shards, limit %d/min, sliding-log twins, %d run(s) each:\n%s", measureLimit, runs, table.String())
}

// mix is splitmix64's finalizer: a fixed pseudo-random cost per request.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
