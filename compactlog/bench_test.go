package compactlog_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

var ctx = context.Background()

// BenchmarkFullSubject is one subject kept full at its limit by a client
// at the rate (every decision lets one unit leave and records one), on a
// real redis-server: the compact log's worst case, since it reads and
// rewrites the whole string per allowed decision, beside the sliding log.
// It reports the Redis server's CPU per decision.
//
//	go test -run '^$' -bench FullSubject ./compactlog
func BenchmarkFullSubject(b *testing.B) {
	rdb := testredis.Start(b).Client(b)
	for _, limit := range []int64{100, 1000, 10000} {
		for _, alg := range []string{"compact_log", "sliding_log"} {
			b.Run(fmt.Sprintf("%s/limit=%d", alg, limit), func(b *testing.B) {
				clock := conformance.NewClock(conformance.Epoch)
				lim := strategy.PerMinute(limit)
				var st strategy.Strategy
				var err error
				if alg == "compact_log" {
					st, err = compactlog.New(rdb, lim, strategy.WithClock(clock))
				} else {
					st, err = slidinglog.New(rdb, lim, strategy.WithClock(clock))
				}
				if err != nil {
					b.Fatal(err)
				}
				step := time.Minute / time.Duration(limit)
				for range limit { // fill the window
					st.AllowN(ctx, "hot", 1)
					clock.Advance(step)
				}
				cpu0 := serverCPU(b, rdb)
				b.ResetTimer()
				for range b.N {
					if r, err := st.AllowN(ctx, "hot", 1); err != nil || !r.Allowed {
						b.Fatalf("%+v, %v", r, err)
					}
					clock.Advance(step)
				}
				b.StopTimer()
				b.ReportMetric((serverCPU(b, rdb)-cpu0)*1e6/float64(b.N), "redis-µs/op")
				st.Reset(ctx, "hot")
			})
		}
	}
}

func serverCPU(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return sum
}

// BenchmarkRedisCPU measures the Redis server's CPU per decision of the
// compact log, the sliding log and the EVALSHA floor in interleaved
// batches on one real redis-server, and reports each one's minimum over
// the batches (the least disturbed by other processes on a shared
// machine): many subjects at limit 100, and one subject kept full at
// limits 1,000 and 10,000 by a client at the rate.
//
//	go test -run '^$' -bench RedisCPU -benchtime 1x ./compactlog
func BenchmarkRedisCPU(b *testing.B) {
	rdb := testredis.Start(b).Client(b)
	floor := redis.NewScript("return 1")
	for _, c := range []struct {
		name     string
		limit    int64
		subjects int
	}{{"limit=100/subjects=500", 100, 500}, {"limit=1000/full", 1000, 1}, {"limit=10000/full", 10000, 1}} {
		b.Run(c.name, func(b *testing.B) {
			// each log on its own clock, one step per decision: a client
			// at the rate, allowed (almost) every time
			cc, sc := conformance.NewClock(conformance.Epoch), conformance.NewClock(conformance.Epoch)
			lim := strategy.PerMinute(c.limit)
			cl, _ := compactlog.New(rdb, lim, strategy.WithClock(cc))
			sl, _ := slidinglog.New(rdb, lim, strategy.WithClock(sc))
			step := time.Minute / time.Duration(c.limit) / time.Duration(c.subjects)
			subject := func(i int) string { return fmt.Sprintf("s%d", i%c.subjects) }
			decide := map[string]func(i int){
				"compact": func(i int) { cl.AllowN(ctx, subject(i), 1); cc.Advance(step) },
				"sliding": func(i int) { sl.AllowN(ctx, subject(i), 1); sc.Advance(step) },
				"floor":   func(i int) { floor.Run(ctx, rdb, []string{subject(i)}) },
			}
			names := []string{"compact", "sliding", "floor"}
			for i := range c.limit * int64(c.subjects) { // fill the window first
				decide["compact"](int(i))
				decide["sliding"](int(i))
			}
			best := map[string]float64{}
			const batch = 1000
			for range b.N * 15 {
				for _, name := range names {
					cpu0 := serverCPU(b, rdb)
					for i := range batch {
						decide[name](i)
					}
					us := (serverCPU(b, rdb) - cpu0) * 1e6 / batch
					if v, ok := best[name]; !ok || us < v {
						best[name] = us
					}
				}
			}
			for _, name := range names {
				b.ReportMetric(best[name], name+"-µs/op")
			}
		})
	}
}
func BenchmarkRefund(b *testing.B) { conformance.BenchRefund(b, compactlog.New) }
func BenchmarkOverride(b *testing.B) {
	conformance.BenchOverride(b, compactlog.New, compactlog.NewLocal, 5000)
}
