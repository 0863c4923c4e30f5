package benchmarks_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/multilimit"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// BenchmarkWorstCall measures the Redis time of the worst valid sliding-log
// call, read from SLOWLOG on a real redis-server (slowlog-log-slower-than 0
// logs every command with its duration in µs): a request of n = capacity at
// Limit = MaxUnits with a 24 h window, on a fresh subject each time; and a
// denial whose RetryAfter needs the k-th unit in the middle of a log of
// 10,000 entries (the binary search). It reports redis-µs/op (the mean),
// redis-max-µs, and ping-max-µs: the slowest PING another client sent
// meanwhile (which includes this machine's scheduling noise). RATELIMIT_WORST_N sets n (default MaxUnits; the code before
// issue 11 added n members, so measure it with n = 100000 or 1000000).
//
//	go -C benchmarks test -run '^$' -bench BenchmarkWorstCall -benchtime 200x .
func BenchmarkWorstCall(b *testing.B) {
	n := int64(strategy.MaxUnits)
	if s := os.Getenv("RATELIMIT_WORST_N"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 1 || v > strategy.MaxUnits {
			b.Fatalf("RATELIMIT_WORST_N=%q: want 1 to %d", s, int64(strategy.MaxUnits))
		}
		n = v
	}
	rdb := client(b, "redis")
	ctx := context.Background()
	lim := strategy.Limit{Limit: strategy.MaxUnits, Window: 24 * time.Hour}
	b.Run(fmt.Sprintf("slidinglog/allow_n=%d", n), func(b *testing.B) {
		st, err := slidinglog.New(rdb, lim, strategy.WithPrefix("worst:sl:"))
		if err != nil {
			b.Fatal(err)
		}
		slowlog(b, rdb, func(i int) {
			if r, err := st.AllowN(ctx, "s"+strconv.Itoa(i), n); err != nil || !r.Allowed {
				b.Fatalf("AllowN(%d) = %+v, %v", n, r, err)
			}
		})
	})
	b.Run(fmt.Sprintf("multilimit/allow_n=%d", n), func(b *testing.B) {
		m, err := multilimit.New(rdb, []multilimit.Rule{{Algorithm: strategy.SlidingLog, Limit: lim}}, strategy.WithPrefix("worst:ml:"))
		if err != nil {
			b.Fatal(err)
		}
		slowlog(b, rdb, func(i int) {
			if r, err := m.AllowN(ctx, "s"+strconv.Itoa(i), n); err != nil || !r.Allowed {
				b.Fatalf("AllowN(%d) = %+v, %v", n, r, err)
			}
		})
	})
	b.Run("slidinglog/deny_k=5000_of_10000_entries", func(b *testing.B) {
		const entries = 10000
		clock := &stepClock{base: epoch, perOp: int64(time.Millisecond)}
		st, err := slidinglog.New(rdb, strategy.Limit{Limit: entries, Window: 24 * time.Hour}, strategy.WithPrefix("worst:deny:"), strategy.WithClock(clock))
		if err != nil {
			b.Fatal(err)
		}
		_ = st.Reset(ctx, "full")
		for range entries {
			clock.ops.Add(1)
			if r, err := st.AllowN(ctx, "full", 1); err != nil || !r.Allowed {
				b.Fatalf("filling: %+v, %v", r, err)
			}
		}
		clock.ops.Add(1)
		slowlog(b, rdb, func(int) {
			if r, err := st.AllowN(ctx, "full", entries/2); err != nil || r.Allowed || r.RetryAfter != 24*time.Hour-(entries/2+1)*time.Millisecond {
				b.Fatalf("AllowN(%d) of a full log = %+v, %v; want denied, RetryAfter 24h - %d ms", entries/2, r, err, entries/2+1)
			}
		})
	})
}

// slowlog runs call(i) b.N times with every command logged in SLOWLOG and
// reports the scripts' Redis time: the mean (redis-µs/op) and the largest.
func slowlog(b *testing.B, rdb *redis.Client, call func(i int)) {
	b.Helper()
	ctx := context.Background()
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "100000"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000") })
	if err := rdb.Do(ctx, "SLOWLOG", "RESET").Err(); err != nil {
		b.Fatal(err)
	}
	// another client PINGs meanwhile: what a script that blocks Redis
	// costs everyone else
	stop, pinged := make(chan struct{}), make(chan time.Duration)
	go func() {
		var worst time.Duration
		for {
			select {
			case <-stop:
				pinged <- worst
				return
			default:
			}
			start := time.Now()
			rdb.Ping(ctx)
			worst = max(worst, time.Since(start))
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		call(i)
	}
	b.StopTimer()
	close(stop)
	b.ReportMetric(float64((<-pinged).Microseconds()), "ping-max-µs")
	logs, err := rdb.SlowLogGet(ctx, 100000).Result()
	if err != nil {
		b.Fatal(err)
	}
	var ds []time.Duration
	for _, l := range logs {
		if len(l.Args) > 0 && slices.Contains([]string{"evalsha", "eval"}, strings.ToLower(l.Args[0])) {
			ds = append(ds, l.Duration)
		}
	}
	if len(ds) == 0 {
		b.Fatal("no script in SLOWLOG")
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(len(ds)), "redis-µs/op")
	b.ReportMetric(float64(slices.Max(ds).Microseconds()), "redis-max-µs")
}
