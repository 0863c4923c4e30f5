package slidinglog_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }

var ctx = context.Background()

func TestConformance(t *testing.T) {
	conformance.RunBackends(t, conformance.Subject{ExactRetry: true}, slidinglog.New, slidinglog.NewLocal)
}

// TestExactLog runs the window edges every exact log shares.
func TestExactLog(t *testing.T) { conformance.ExactLog(t, slidinglog.New, slidinglog.NewLocal) }

func TestDifferential(t *testing.T) {
	// an allowed reply too large for one integer comes back as a table
	conformance.DifferentialOf(t, slidinglog.New, slidinglog.NewLocal,
		strategy.Limit{Limit: strategy.MaxUnits, Window: time.Hour})
}

// TestSameMillisecondBurst has 8 clients (standing for 8 app hosts) with 8
// goroutines each hit one subject in the same millisecond; exactly the limit
// is allowed, and the requests of that millisecond are merged into one
// entry (next to the base entry): two entries, not one per unit.
func TestSameMillisecondBurst(t *testing.T) {
	const limit, clients, goroutines, perG = 1000, 8, 8, 20 // 1280 requests
	run := func(t *testing.T, newClient func() redis.Scripter, zcard func(key string) int64, opts ...strategy.Option) {
		lim := strategy.Limit{Limit: limit, Window: time.Minute}
		var allowed atomic.Int64
		var wg sync.WaitGroup
		var key string
		for c := 0; c < clients; c++ {
			st, err := slidinglog.New(newClient(), lim, opts...)
			if err != nil {
				t.Fatal(err)
			}
			key = st.Key("burst")
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < perG; i++ {
						r, err := st.AllowN(ctx, "burst", 1)
						if err != nil {
							t.Error(err)
							return
						}
						if r.Allowed {
							allowed.Add(1)
						}
					}
				}()
			}
		}
		wg.Wait()
		if got := allowed.Load(); got != limit {
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
	conformance.RunSpec(t, conformance.Spec[*slidinglog.Limiter, *slidinglog.Local]{
		New: slidinglog.New, NewLocal: slidinglog.NewLocal, Tag: "sl",
		ServerTime: conformance.ServerTime{
			Lim: strategy.Limit{Limit: 1, Window: time.Second},
			Steps: []conformance.TimeStep{
				{At: 0, N: 1, Allowed: true},
				{At: 999 * time.Millisecond, N: 1, RetryAfter: time.Millisecond},
				{At: time.Second, N: 1, Allowed: true},
			},
			Real: strategy.PerMinute(2), RealRetry: time.Minute,
		},
		TTL:   conformance.TTL{Lim: strategy.PerMinute(5), N: 1, Want: time.Minute},
		Still: 5 * time.Second,
		Idle:  3 * time.Second,
		Memory: []conformance.Memory{
			{Lim: strategy.PerMinute(100), Requests: 100, Cost: 1, Step: 37 * time.Millisecond, Encodings: []string{"listpack"}, MaxBytes: 1700},
			{Lim: strategy.PerMinute(100_000), Requests: 100, Cost: 1000, Step: 37 * time.Millisecond, Encodings: []string{"listpack"}, MaxBytes: 1700},
		},
		OnMemory: func(t *testing.T, rdb *redis.Client, m conformance.Memory, ours int64) {
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
		},
	})
}
