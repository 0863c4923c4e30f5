package ratelimit_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/strategy"
)

// BenchmarkHeapManySubjects measures the heap that 5 M distinct subjects
// within one window leave in the process, with the default bound
// (strategy.DefaultMaxSubjects): a limiter built by NewLocal (its twin) and
// one built by New with FailLocal while Redis is down (its FailLocal twin).
// Each iteration is the whole run; run it with
//
//	go test -run '^$' -bench BenchmarkHeapManySubjects -benchtime 1x .
//
// It reports the live heap after a GC (MB-heap), the subjects held, and
// the evictions.
func BenchmarkHeapManySubjects(b *testing.B) {
	const subjects = 5_000_000
	ctx := context.Background()
	for _, mode := range []string{"NewLocal", "FailLocal"} {
		for _, a := range strategy.Algorithms() {
			b.Run(mode+"/"+string(a), func(b *testing.B) {
				cfg := ratelimit.Config{Algorithm: a, Limit: 10, Window: time.Hour}
				for b.Loop() {
					var before, after runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					var l *ratelimit.Limiter
					var held func() int
					var err error
					if mode == "NewLocal" {
						l, err = ratelimit.New(nil, cfg)
						held = func() int { return ratelimit.StrategyOf(l).(interface{ Subjects() int }).Subjects() }
					} else {
						cfg.OnFailure, cfg.Timeout = ratelimit.FailLocal, time.Second
						l, err = ratelimit.New(downClient(b), cfg)
						held = func() int { return ratelimit.FailLocalSubjects(l) }
					}
					if err != nil {
						b.Fatal(err)
					}
					buf := make([]byte, 0, 32)
					for i := range subjects {
						buf = strconv.AppendInt(append(buf[:0], "ip:"...), int64(i), 10)
						if r, err := l.Allow(ctx, string(buf)); err != nil || !r.Allowed {
							b.Fatalf("subject %d: %+v, %v", i, r, err)
						}
					}
					runtime.GC()
					runtime.ReadMemStats(&after)
					n := held()
					b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "MB-heap")
					b.ReportMetric(float64(n), "subjects")
					b.ReportMetric(float64(ratelimit.Evicted(l)), "evicted")
					runtime.KeepAlive(l)
				}
			})
		}
	}
}
