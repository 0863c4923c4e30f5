package ratelimit_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/internal/testredis"
)

// BenchmarkDefaultBatching is a Limiter from New, batching (the default)
// and WithoutBatching, on a client with and without ContextTimeoutEnabled,
// at 1, 8 and 64 concurrent callers on 10,000 subjects of a real
// redis-server; ns/op is the whole process's time per decision (Redis
// shares the machine). Compare as ratios within one run:
//
//	go test -run '^$' -bench BenchmarkDefaultBatching -benchtime 2s .
func BenchmarkDefaultBatching(b *testing.B) {
	s := testredis.Shared(b)
	for _, cte := range []bool{false, true} {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: cte, PoolSize: 300})
		b.Cleanup(func() { rdb.Close() })
		for _, conc := range []int{1, 8, 64} {
			for _, mode := range []struct {
				name string
				opts []ratelimit.Option
			}{{"default", nil}, {"WithoutBatching", []ratelimit.Option{ratelimit.WithoutBatching()}}} {
				name := mode.name + "/ContextTimeoutEnabled=" + strconv.FormatBool(cte) + "/c=" + strconv.Itoa(conc)
				b.Run(name, func(b *testing.B) {
					l, err := ratelimit.New(rdb, ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Minute,
						Prefix: testredis.Prefix(b), Timeout: time.Second}, mode.opts...)
					if err != nil {
						b.Fatal(err)
					}
					allow := func(i int) bool {
						r, err := l.Allow(context.Background(), "u"+strconv.Itoa(i%10000))
						if err != nil || r.Degraded {
							b.Errorf("Allow = %+v, %v", r, err)
						}
						return err == nil && !r.Degraded
					}
					b.ReportAllocs()
					if conc == 1 { // RunParallel runs at least GOMAXPROCS callers
						for i := range b.N {
							if !allow(i) {
								return
							}
						}
						return
					}
					b.SetParallelism(max(1, conc/runtime.GOMAXPROCS(0)))
					var seq atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						for i := int(seq.Add(1)) * 7919; pb.Next(); i++ {
							if !allow(i) {
								return
							}
						}
					})
				})
			}
		}
	}
}
