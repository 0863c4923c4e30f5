package slidinglog_test

import (
	"context"
	"fmt"
	"os"
	"strings"
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

func TestDifferential(t *testing.T) {
	// an allowed reply too large for one integer comes back as a table
	conformance.DifferentialOf(t, slidinglog.New, slidinglog.NewLocal,
		strategy.Limit{Limit: strategy.MaxUnits, Window: time.Hour})
}

// backends runs f over the Redis strategy on miniredis and on a real Redis,
// and over the local twin, all on a manual clock.
func backends(t *testing.T, lim strategy.Limit, f func(t *testing.T, st strategy.Strategy, clock *conformance.Clock)) {
	t.Helper()
	conformance.OnBackends(t, lim, slidinglog.New, slidinglog.NewLocal, f)
}

func TestWindowEdges(t *testing.T) {
	backends(t, strategy.Limit{Limit: 2, Window: time.Second}, func(t *testing.T, st strategy.Strategy, clock *conformance.Clock) {
		mustAllow := func(want bool, what string) strategy.Result {
			t.Helper()
			r, err := st.AllowN(ctx, "edge", 1)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed != want {
				t.Fatalf("%s: Allowed = %v, want %v (%+v)", what, r.Allowed, want, r)
			}
			return r
		}
		mustAllow(true, "unit at t=0")
		clock.Advance(400 * time.Millisecond)
		mustAllow(true, "unit at t=400ms")
		clock.Advance(599 * time.Millisecond) // t=999ms: the t=0 unit still counts (999 < 1000)
		r := mustAllow(false, "at t=999ms")
		if r.RetryAfter != time.Millisecond {
			t.Fatalf("RetryAfter at t=999ms = %v, want 1ms", r.RetryAfter)
		}
		if r.ResetAfter != 401*time.Millisecond {
			t.Fatalf("ResetAfter at t=999ms = %v, want 401ms (the t=400ms unit leaves at 1400ms)", r.ResetAfter)
		}
		clock.Advance(time.Millisecond) // t=1000ms: now - 0 = Window, the unit has left
		mustAllow(true, "at t=1000ms")
		r = mustAllow(false, "again at t=1000ms")
		if r.RetryAfter != 400*time.Millisecond {
			t.Fatalf("RetryAfter at t=1000ms = %v, want 400ms", r.RetryAfter)
		}
	})
}

func TestRetryAfterForCost(t *testing.T) {
	// units at 0, 100, 200, 300, 400 ms of limit 5/s; at 500ms a request of 3
	// needs the three oldest to leave: the third leaves at 1200ms.
	backends(t, strategy.Limit{Limit: 5, Window: time.Second}, func(t *testing.T, st strategy.Strategy, clock *conformance.Clock) {
		for i := 0; i < 5; i++ {
			if r, _ := st.AllowN(ctx, "k", 1); !r.Allowed {
				t.Fatalf("unit %d denied", i)
			}
			clock.Advance(100 * time.Millisecond)
		}
		for n, want := range map[int64]time.Duration{1: 500 * time.Millisecond, 3: 700 * time.Millisecond, 5: 900 * time.Millisecond} {
			r, err := st.AllowN(ctx, "k", n)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed || r.RetryAfter != want || r.ResetAfter != 900*time.Millisecond {
				t.Errorf("AllowN(%d) at 500ms = %+v, want denied, RetryAfter %v, ResetAfter 900ms", n, r, want)
			}
		}
	})
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

func TestServerTime(t *testing.T) {
	mr, rdb := conformance.Miniredis(t)
	st, err := slidinglog.New(rdb, strategy.Limit{Limit: 1, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mr.SetTime(conformance.Epoch)
	if r, _ := st.AllowN(ctx, "k", 1); !r.Allowed {
		t.Fatal("first request denied")
	}
	mr.SetTime(conformance.Epoch.Add(999 * time.Millisecond))
	if r, _ := st.AllowN(ctx, "k", 1); r.Allowed || r.RetryAfter != time.Millisecond {
		t.Fatalf("at +999ms by the server's TIME: %+v, want denied with RetryAfter 1ms", r)
	}
	mr.SetTime(conformance.Epoch.Add(time.Second))
	if r, _ := st.AllowN(ctx, "k", 1); !r.Allowed {
		t.Fatalf("at +1s by the server's TIME: %+v, want allowed", r)
	}
}

func TestTTL(t *testing.T) {
	check := func(t *testing.T, ttl time.Duration) {
		if ttl <= 0 || ttl > time.Minute {
			t.Fatalf("TTL = %v, want in (0, 1m]", ttl)
		}
	}
	t.Run("miniredis", func(t *testing.T) {
		mr, rdb := conformance.Miniredis(t)
		st, _ := slidinglog.New(rdb, strategy.PerMinute(5))
		st.AllowN(ctx, "k", 1)
		check(t, mr.TTL(st.Key("k")))
		mr.FastForward(time.Minute)
		if mr.Exists(st.Key("k")) {
			t.Fatal("key still exists after its TTL")
		}
	})
	t.Run("redis", func(t *testing.T) {
		rdb := conformance.RealRedis(t)
		st, _ := slidinglog.New(rdb, strategy.PerMinute(5), strategy.WithPrefix(testredis.Prefix(t)))
		st.AllowN(ctx, "k", 1)
		check(t, rdb.PTTL(ctx, st.Key("k")).Val())
		if _, err := st.Peek(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if err := st.Reset(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if n := rdb.Exists(ctx, st.Key("k")).Val(); n != 0 {
			t.Fatal("key exists after Reset")
		}
	})
}

func TestPeekWritesNothing(t *testing.T) {
	mr, rdb := conformance.Miniredis(t)
	st, _ := slidinglog.New(rdb, strategy.PerMinute(5))
	if _, err := st.Peek(ctx, "never-seen"); err != nil {
		t.Fatal(err)
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Fatalf("Peek of an unknown subject created keys %v", keys)
	}
}

func TestKeyLayout(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	st, _ := slidinglog.New(rdb, strategy.PerMinute(5), strategy.WithPrefix("app:"))
	for subject, want := range map[string]string{
		"user:42":   "app:sl:{user:42}",
		"{x}":       "app:sl:{%7Bx%7D}",
		"a#1":       "app:sl:{a%231}",
		"100%":      "app:sl:{100%25}",
		"ключ":      "app:sl:{ключ}",
		"nul\x00in": "app:sl:{nul\x00in}",
	} {
		if got := st.Key(subject); got != want {
			t.Errorf("Key(%q) = %q, want %q", subject, got, want)
		}
	}
}

func TestInvalidConfig(t *testing.T) {
	conformance.InvalidConfig(t, slidinglog.New, slidinglog.NewLocal)
}

func TestLocalDropsIdleSubjects(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	st, _ := slidinglog.NewLocal(strategy.PerSecond(5), strategy.WithClock(clock))
	for i := 0; i < 1000; i++ {
		st.AllowN(ctx, "subject-"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune(i)), 1)
	}
	if n := st.Subjects(); n == 0 {
		t.Fatal("no subjects stored after 1000 requests")
	}
	clock.Advance(3 * time.Second)
	st.AllowN(ctx, "late", 1)
	for i := 0; i < 5000; i++ { // touch every stripe (64 of them) with near certainty
		st.Peek(ctx, string(rune(i)))
	}
	if n := st.Subjects(); n > 1 {
		t.Fatalf("%d subjects still stored two windows after they went idle, want only the live one", n)
	}
}

// TestMemoryUsage measures what Redis holds for a subject with 100 requests
// (default prefix) on a real redis-server, of cost 1 (limit 100/min) and of
// cost 1000 (limit 100,000/min), next to 100 entries with the common
// "<ms>-<random hex>" member. Small integer members keep the listpack near
// 13 bytes an entry, and a request is one entry whatever its cost.
func TestMemoryUsage(t *testing.T) {
	rdb := testredis.Start(t).Client(t)
	var ours [2]int64
	for i, cost := range []int64{1, 1000} {
		clock := conformance.NewClock(conformance.Epoch)
		st, err := slidinglog.New(rdb, strategy.PerMinute(100*cost), strategy.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		subject := fmt.Sprintf("user:%d", 42+i)
		for j := 0; j < 100; j++ {
			if r, err := st.AllowN(ctx, subject, cost); err != nil || !r.Allowed {
				t.Fatalf("cost %d, request %d: %+v, %v", cost, j, r, err)
			}
			clock.Advance(37 * time.Millisecond)
		}
		key := st.Key(subject)
		ours[i] = rdb.MemoryUsage(ctx, key).Val()
		enc := rdb.ObjectEncoding(ctx, key).Val()
		t.Logf("MEMORY USAGE %s with 100 requests of cost %d: %d bytes (%s, %d entries)", key, cost, ours[i], enc, rdb.ZCard(ctx, key).Val())
		if ours[i] == 0 || ours[i] > 1700 || enc != "listpack" {
			t.Errorf("cost %d: MEMORY USAGE %s = %d bytes, encoding %s; want <= 1700 bytes in a listpack", cost, key, ours[i], enc)
		}
	}
	naiveKey := "naive:{user:42}"
	for i := 0; i < 100; i++ {
		ms := conformance.Epoch.UnixMilli() + int64(i)*37
		member := fmt.Sprintf("%d-%016x", ms, uint64(i+1)*0x9E3779B97F4A7C15)
		rdb.ZAdd(ctx, naiveKey, redis.Z{Score: float64(ms), Member: member})
	}
	naive := rdb.MemoryUsage(ctx, naiveKey).Val()
	t.Logf("MEMORY USAGE with 100 naive \"<ms>-<hex>\" members: %d bytes", naive)
	if naive < 2*ours[0] {
		t.Errorf("naive members cost %d bytes, ours %d: want ours under half", naive, ours[0])
	}
}
