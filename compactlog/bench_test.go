package compactlog_test

import (
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
