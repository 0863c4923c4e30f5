package slidinglog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// TestSameMillisecondBurst has 8 clients (standing for 8 app hosts) with 8
// goroutines each hit one subject in the same millisecond; exactly the limit
// is allowed, and the requests of that millisecond are merged into one
// entry (next to the base entry): two entries, not one per unit.
func TestSameMillisecondBurst(t *testing.T) {
	const limit, clients, goroutines, perG = 1000, 8, 8, 20 // 1280 requests
	run := func(t *testing.T, newClient func() redis.Scripter, zcard func(key string) int64, opts ...strategy.Option) {
		lim := strategy.Limit{Limit: limit, Window: time.Minute}
		var key string
		sts := make([]strategy.Strategy, clients)
		for c := range sts {
			st, err := slidinglog.New(newClient(), lim, opts...)
			if err != nil {
				t.Fatal(err)
			}
			key, sts[c] = st.Key("burst"), st
		}
		if got := conformance.Hammer(t, sts, "burst", clients*goroutines, perG); got != limit {
			t.Errorf("allowed %d of %d requests, want exactly %d", got, clients*goroutines*perG, limit)
		}
		if got := zcard(key); got != 2 {
			t.Errorf("ZCARD %s = %d, want 2 entries (the base and one for the millisecond)", key, got)
		}
	}
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		mr.SetTime(conformance.Epoch) // server TIME frozen: every request in one millisecond
		run(t, func() redis.Scripter {
			c := redis.NewClient(&redis.Options{Addr: mr.Addr(), PoolSize: goroutines})
			t.Cleanup(func() { c.Close() })
			return c
		}, func(key string) int64 {
			members, err := mr.ZMembers(key)
			if err != nil {
				t.Fatal(err)
			}
			return int64(len(members))
		})
	})
	t.Run("redis", func(t *testing.T) {
		srv := testredis.Shared(t)
		clock := strategy.ClockFunc(func() time.Time { return conformance.Epoch }) // one millisecond for every host
		check := srv.Client(t)
		run(t, func() redis.Scripter {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: goroutines})
			t.Cleanup(func() { c.Close() })
			return c
		}, func(key string) int64 { return check.ZCard(ctx, key).Val() }, strategy.WithClock(clock), strategy.WithPrefix(testredis.Prefix(t)))
	})
}

// TestSpec runs the checks every algorithm shares with the sliding log's
// numbers. Memory: small integer members keep the listpack near 13 bytes an
// entry, and a request is one entry whatever its cost; 100 entries with
// the common "<ms>-<random hex>" member cost over twice as much.
func TestSpec(t *testing.T) {
	s := conformance.ExactLogSpec(slidinglog.New, slidinglog.NewLocal, "sl",
		conformance.Memory{Lim: strategy.PerMinute(100), Requests: 100, Cost: 1, Step: 37 * time.Millisecond, Encodings: []string{"listpack"}, MaxBytes: 1700},
		conformance.Memory{Lim: strategy.PerMinute(100_000), Requests: 100, Cost: 1000, Step: 37 * time.Millisecond, Encodings: []string{"listpack"}, MaxBytes: 1700})
	s.OnMemory = func(t *testing.T, rdb *redis.Client, m conformance.Memory, ours int64) {
		if m.Cost != 1 {
			return
		}
		naiveKey := "naive:{user:42}"
		for i := 0; i < m.Requests; i++ {
			ms := conformance.Epoch.UnixMilli() + int64(i)*m.Step.Milliseconds()
			member := fmt.Sprintf("%d-%016x", ms, uint64(i+1)*0x9E3779B97F4A7C15)
			rdb.ZAdd(ctx, naiveKey, redis.Z{Score: float64(ms), Member: member})
		}
		naive := rdb.MemoryUsage(ctx, naiveKey).Val()
		t.Logf("MEMORY USAGE with %d naive \"<ms>-<hex>\" members: %d bytes", m.Requests, naive)
		if naive < 2*ours {
			t.Errorf("naive members cost %d bytes, ours %d: want ours under half", naive, ours)
		}
	}
	conformance.RunSpec(t, s)
}
