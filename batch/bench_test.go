package batch_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// BenchmarkSerial compares one goroutine's decisions sent directly and
// through a Client, on a real redis-server: with nothing else in flight
// the Client sends each call at once, so the two should be level.
func BenchmarkSerial(b *testing.B) {
	s := testredis.Shared(b)
	raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { raw.Close() })
	bc, err := batch.New(raw)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bc.Close() })
	for _, tc := range []struct {
		name string
		rdb  redis.Scripter
	}{{"direct", raw}, {"batched", bc}} {
		b.Run(tc.name, func(b *testing.B) {
			st, err := fixedwindow.New(tc.rdb, strategy.PerMinute(100), strategy.WithPrefix(testredis.Prefix(b)))
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := st.AllowN(ctx, "u"+strconv.Itoa(i%10000), 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
