package gcra_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/gcra"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }

var ctx = context.Background()

func TestConformance(t *testing.T) {
	conformance.RunBackends(t, conformance.Subject{ExactRetry: true, UsesBurst: true}, gcra.New, gcra.NewLocal)
}

func TestDifferential(t *testing.T) {
	// an allowed reply too large for one integer comes back as a table
	conformance.DifferentialOf(t, gcra.New, gcra.NewLocal,
		strategy.Limit{Limit: 1, Window: time.Hour, Burst: 1 << 20})
}

// backends runs f over the Redis strategy on miniredis and on a real Redis,
// and over the local twin, all on a manual clock.
func backends(t *testing.T, lim strategy.Limit, f func(t *testing.T, st strategy.Strategy, clock *conformance.Clock)) {
	t.Helper()
	conformance.OnBackends(t, lim, gcra.New, gcra.NewLocal, f)
}

func mustAllowN(t *testing.T, st strategy.Strategy, key string, n int64) strategy.Result {
	t.Helper()
	r, err := st.AllowN(ctx, key, n)
	if err != nil {
		t.Fatalf("AllowN(%q, %d): %v", key, n, err)
	}
	return r
}

func TestEmissionInterval(t *testing.T) {
	// 4 per second, burst 6: one unit every 250 ms, up to 6 at once.
	backends(t, strategy.Limit{Limit: 4, Window: time.Second, Burst: 6}, func(t *testing.T, st strategy.Strategy, clock *conformance.Clock) {
		if r := mustAllowN(t, st, "k", 6); !r.Allowed || r.Remaining != 0 || r.ResetAfter != 1500*time.Millisecond {
			t.Fatalf("AllowN(6) on an idle subject = %+v, want allowed, Remaining 0, ResetAfter 1.5s", r)
		}
		clock.Advance(249 * time.Millisecond)
		if r := mustAllowN(t, st, "k", 1); r.Allowed || r.RetryAfter != time.Millisecond || r.ResetAfter != 1251*time.Millisecond {
			t.Fatalf("at 249ms: %+v, want denied with RetryAfter 1ms, ResetAfter 1251ms", r)
		}
		clock.Advance(time.Millisecond)
		if r := mustAllowN(t, st, "k", 1); !r.Allowed || r.Remaining != 0 {
			t.Fatalf("at 250ms: %+v, want allowed with Remaining 0", r)
		}
		if r := mustAllowN(t, st, "k", 3); r.Allowed || r.RetryAfter != 750*time.Millisecond {
			t.Fatalf("AllowN(3) at 250ms: %+v, want denied with RetryAfter 750ms", r)
		}
		clock.Advance(10 * time.Second)
		if r := mustAllowN(t, st, "k", 0); !r.Allowed || r.Remaining != 6 || r.ResetAfter != 0 {
			t.Fatalf("after 10s idle: %+v, want full capacity (Remaining 6, ResetAfter 0), never more", r)
		}
	})
}

func TestServerTime(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		st, err := gcra.New(conformance.RealRedis(t), strategy.PerMinute(2), strategy.WithPrefix(testredis.Prefix(t)))
		if err != nil {
			t.Fatal(err)
		}
		mustAllowN(t, st, "k", 2)
		r := mustAllowN(t, st, "k", 1)
		if r.Allowed || r.RetryAfter <= 25*time.Second || r.RetryAfter > 30*time.Second {
			t.Fatalf("third request of 2/min by the server's TIME: %+v, want denied with RetryAfter in (25s, 30s]", r)
		}
	})
	mr, rdb := conformance.Miniredis(t)
	st, err := gcra.New(rdb, strategy.Limit{Limit: 3, Window: time.Second, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	mr.SetTime(conformance.Epoch)
	if r, _ := st.AllowN(ctx, "k", 1); !r.Allowed {
		t.Fatal("first request denied")
	}
	mr.SetTime(conformance.Epoch.Add(333 * time.Millisecond))
	if r, _ := st.AllowN(ctx, "k", 1); r.Allowed || r.RetryAfter != time.Millisecond {
		t.Fatalf("at +333ms by the server's TIME: %+v, want denied with RetryAfter 1ms (the interval is 333.3ms)", r)
	}
	mr.SetTime(conformance.Epoch.Add(334 * time.Millisecond))
	if r, _ := st.AllowN(ctx, "k", 1); !r.Allowed {
		t.Fatalf("at +334ms by the server's TIME: %+v, want allowed", r)
	}
}

func TestTTL(t *testing.T) {
	lim := strategy.Limit{Limit: 5, Window: time.Minute, Burst: 10} // a unit every 12s
	t.Run("miniredis", func(t *testing.T) {
		mr, rdb := conformance.Miniredis(t)
		st, _ := gcra.New(rdb, lim)
		mr.SetTime(conformance.Epoch)
		r, _ := st.AllowN(ctx, "k", 3)
		if ttl := mr.TTL(st.Key("k")); ttl != 36*time.Second || ttl != r.ResetAfter {
			t.Fatalf("TTL after 3 units = %v, ResetAfter %v, want both 36s (3 intervals of 12s)", ttl, r.ResetAfter)
		}
		mr.FastForward(36*time.Second - time.Millisecond)
		if !mr.Exists(st.Key("k")) {
			t.Fatal("key gone before its TAT")
		}
		mr.FastForward(time.Millisecond)
		if mr.Exists(st.Key("k")) {
			t.Fatal("key still exists at its TAT")
		}
	})
	t.Run("redis", func(t *testing.T) {
		rdb := conformance.RealRedis(t)
		st, _ := gcra.New(rdb, lim, strategy.WithPrefix(testredis.Prefix(t)))
		r, _ := st.AllowN(ctx, "k", 3)
		if ttl := rdb.PTTL(ctx, st.Key("k")).Val(); ttl <= 30*time.Second || ttl > r.ResetAfter || r.ResetAfter != 36*time.Second {
			t.Fatalf("PTTL after 3 units = %v, ResetAfter %v, want ResetAfter 36s and PTTL in (30s, 36s]", ttl, r.ResetAfter)
		}
		if err := st.Reset(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if n := rdb.Exists(ctx, st.Key("k")).Val(); n != 0 {
			t.Fatal("key exists after Reset")
		}
	})
}

func TestPeekAndDenialWriteNothing(t *testing.T) {
	mr, rdb := conformance.Miniredis(t)
	clock := conformance.NewClock(conformance.Epoch)
	st, _ := gcra.New(rdb, strategy.PerMinute(5), strategy.WithClock(clock))
	if _, err := st.Peek(ctx, "never-seen"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AllowN(ctx, "never-seen", 6); err != nil { // denied: more than capacity
		t.Fatal(err)
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Fatalf("Peek and a denial of an unknown subject created keys %v", keys)
	}
	mustAllowN(t, st, "k", 5)
	state := func() string {
		v, _ := mr.Get(st.Key("k"))
		return fmt.Sprint(v, " ", mr.TTL(st.Key("k")))
	}
	before := state()
	clock.Advance(5 * time.Second)
	for _, n := range []int64{0, 1, 2} { // 5s is 5/12 of an interval: not one unit yet
		if r := mustAllowN(t, st, "k", n); r.Allowed || r.Remaining != 0 {
			t.Fatalf("AllowN(%d) with no capacity left = %+v, want denied with Remaining 0", n, r)
		}
	}
	if after := state(); after != before {
		t.Fatalf("Peek and denials changed the key: before %s, after %s", before, after)
	}
}

// TestStoredValue: the key holds TAT as an integer, whole ms then, when
// the emission interval is fractional, the remainder in 1/lp ms.
func TestStoredValue(t *testing.T) {
	epoch := conformance.Epoch.UnixMilli()
	for _, c := range []struct {
		lim  strategy.Limit
		n    []int64
		want string
	}{
		{strategy.PerMinute(100), []int64{1}, fmt.Sprint(epoch + 600)},
		{strategy.PerMinute(100), []int64{1, 2}, fmt.Sprint(epoch + 1800)},
		{strategy.PerSecond(3), []int64{1}, fmt.Sprintf("%d1", epoch+333)},                                   // 333 1/3 ms
		{strategy.PerSecond(3), []int64{1, 1}, fmt.Sprintf("%d2", epoch+666)},                                // 666 2/3 ms
		{strategy.PerSecond(3), []int64{3}, fmt.Sprintf("%d0", epoch+1000)},                                  // 1000 ms, remainder 0
		{strategy.Limit{Limit: 7, Window: 333 * time.Millisecond}, []int64{2}, fmt.Sprintf("%d1", epoch+95)}, // 666/7 = 95 1/7 ms
		{strategy.Limit{Limit: 1000003, Window: time.Second}, []int64{1}, fmt.Sprint(epoch) + "0001000"},     // 1000/1000003 ms
	} {
		t.Run(fmt.Sprint(c.lim, c.n), func(t *testing.T) {
			for _, backend := range []string{"miniredis", "redis"} {
				var rdb *redis.Client
				opts := []strategy.Option{strategy.WithClock(conformance.NewClock(conformance.Epoch))}
				if backend == "miniredis" {
					_, rdb = conformance.Miniredis(t)
				} else {
					rdb = conformance.RealRedis(t)
					opts = append(opts, strategy.WithPrefix(testredis.Prefix(t)))
				}
				st, _ := gcra.New(rdb, c.lim, opts...)
				for _, n := range c.n {
					if r := mustAllowN(t, st, "user:42", n); !r.Allowed {
						t.Fatalf("%s: AllowN(%d) denied: %+v", backend, n, r)
					}
				}
				if got, err := rdb.Get(ctx, st.Key("user:42")).Result(); err != nil || got != c.want {
					t.Fatalf("%s: GET %s = %q (%v), want %q", backend, st.Key("user:42"), got, err, c.want)
				}
			}
		})
	}
}

// TestLimitChange: a key written under one limit and read under another
// (with another encoding of TAT) never errs and never makes a subject wait
// longer than its full capacity takes to come back.
func TestLimitChange(t *testing.T) {
	mr, rdb := conformance.Miniredis(t)
	clock := conformance.NewClock(conformance.Epoch)
	fractional, _ := gcra.New(rdb, strategy.PerSecond(3), strategy.WithClock(clock))
	whole, _ := gcra.New(rdb, strategy.PerMinute(100), strategy.WithClock(clock))
	mustAllowN(t, fractional, "k", 2) // ms and a remainder digit: read by whole as ten times the ms
	r := mustAllowN(t, whole, "k", 0)
	if r.Remaining < 0 || r.ResetAfter > time.Minute || r.RetryAfter > 600*time.Millisecond {
		t.Fatalf("Peek under the new limit = %+v, want at worst an exhausted subject (ResetAfter <= 1m, RetryAfter <= 600ms)", r)
	}
	mr.FlushAll()
	mustAllowN(t, whole, "k", 100) // read by fractional as a tenth of its ms: long passed
	if r := mustAllowN(t, fractional, "k", 0); r.Remaining != 3 {
		t.Fatalf("Peek under the new limit = %+v, want an idle subject", r)
	}
}

// TestMemoryUsage measures what one subject costs on a real Redis.
func TestMemoryUsage(t *testing.T) {
	rdb := conformance.RealRedis(t)
	st, _ := gcra.New(rdb, strategy.PerMinute(100))
	key := st.Key("user:42")
	if err := st.Reset(ctx, "user:42"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Reset(ctx, "user:42") })
	for i := 0; i < 100; i++ {
		mustAllowN(t, st, "user:42", 1)
	}
	bytes, err := rdb.MemoryUsage(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	enc := rdb.ObjectEncoding(ctx, key).Val()
	t.Logf("MEMORY USAGE %s after 100 requests = %d bytes (encoding %s)", key, bytes, enc)
	if enc != "int" {
		t.Errorf("encoding %q, want int", enc)
	}
	// 24 (dict entry) + 32 (the 17-byte key name) + 16 (object header): the
	// least any key of this name costs on Redis 7.0 with jemalloc
	if bytes > 72 {
		t.Errorf("MEMORY USAGE = %d bytes, want <= 72", bytes)
	}
}

func TestKeyLayout(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	st, _ := gcra.New(rdb, strategy.PerMinute(5), strategy.WithPrefix("app:"))
	for subject, want := range map[string]string{
		"user:42":   "app:gc:{user:42}",
		"{x}":       "app:gc:{%7Bx%7D}",
		"a#1":       "app:gc:{a%231}",
		"100%":      "app:gc:{100%25}",
		"ключ":      "app:gc:{ключ}",
		"nul\x00in": "app:gc:{nul\x00in}",
	} {
		if got := st.Key(subject); got != want {
			t.Errorf("Key(%q) = %q, want %q", subject, got, want)
		}
	}
}

func TestInvalidConfig(t *testing.T) {
	conformance.InvalidConfig(t, gcra.New, gcra.NewLocal,
		conformance.ConfigCase{Name: "burst too large to be exact", Lim: strategy.Limit{Limit: 1, Window: strategy.MaxWindow, Burst: 1 << 20}, Field: "Burst"},
		conformance.ConfigCase{Name: "limit too large to be exact", Lim: strategy.Limit{Limit: 1<<40 - 1, Window: 8192 * time.Millisecond}, Field: "Limit"},
	)
	// the largest exact limits are accepted
	for _, lim := range []strategy.Limit{
		{Limit: strategy.MaxUnits, Window: time.Second, Burst: strategy.MaxUnits},
		{Limit: 1 << 20, Window: time.Second, Burst: 1 << 30},
		{Limit: 7, Window: 24 * time.Hour, Burst: 1e6},
	} {
		if _, err := gcra.NewLocal(lim); err != nil {
			t.Errorf("NewLocal(%v): %v, want accepted", lim, err)
		}
	}
}

func TestBurstIgnoredAtLimitZero(t *testing.T) {
	conformance.BurstIgnoredAtLimitZero(t, gcra.New, gcra.NewLocal)
}

func TestSteadyClientNeverDenied(t *testing.T) {
	conformance.SteadyClientNeverDenied(t, gcra.New, gcra.NewLocal)
}

func TestNeverAboveRate(t *testing.T) {
	conformance.NeverAboveRate(t, gcra.New, gcra.NewLocal)
}

// TestExactAgainstRationals: 10,000 calls with tiny irregular time steps
// give exactly the Results of the rational-number token bucket: no unit is
// ever gained or lost to rounding the emission interval.
func TestExactAgainstRationals(t *testing.T) {
	conformance.ExactAgainstRationals(t, gcra.New, gcra.NewLocal)
}

// TestConcurrentExactlyCapacity: 64 goroutines over 4 clients hit one
// subject at one instant; exactly the capacity is allowed.
func TestConcurrentExactlyCapacity(t *testing.T) {
	conformance.ConcurrentExactlyCapacity(t, gcra.New, gcra.NewLocal)
}

func TestLocalDropsIdleSubjects(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	st, _ := gcra.NewLocal(strategy.PerSecond(5), strategy.WithClock(clock))
	for i := 0; i < 1000; i++ {
		st.AllowN(ctx, fmt.Sprint("subject-", i), 1)
	}
	if n := st.Subjects(); n != 1000 {
		t.Fatalf("%d subjects stored after 1000 requests, want 1000", n)
	}
	st.Peek(ctx, "peeked")
	if n := st.Subjects(); n != 1000 {
		t.Fatalf("Peek of a fresh subject stored it: %d subjects", n)
	}
	clock.Advance(2 * time.Second) // every TAT has passed
	for i := 0; i < 5000; i++ {    // touch every stripe (64 of them) with near certainty
		st.Peek(ctx, fmt.Sprint("p", i))
	}
	if n := st.Subjects(); n != 0 {
		t.Fatalf("%d subjects still stored once their TAT passed, want 0", n)
	}
}

func TestLocalAllocations(t *testing.T) {
	st, _ := gcra.NewLocal(strategy.PerSecond(1000))
	st.AllowN(ctx, "warm", 1)
	if a := testing.AllocsPerRun(1000, func() { st.AllowN(ctx, "warm", 1) }); a != 0 {
		t.Errorf("AllowN on a warm subject: %v allocations, want 0", a)
	}
}

func BenchmarkLocal(b *testing.B) {
	st, _ := gcra.NewLocal(strategy.Limit{Limit: 1 << 30, Window: time.Second})
	b.ReportAllocs()
	b.Run("warm", func(b *testing.B) {
		for b.Loop() {
			st.AllowN(ctx, "warm", 1)
		}
	})
	b.Run("warm-cheap-clock", func(b *testing.B) { // the decision alone, without time.Now
		now := conformance.Epoch
		st, _ := gcra.NewLocal(strategy.Limit{Limit: 1 << 30, Window: time.Second}, strategy.WithClock(strategy.ClockFunc(func() time.Time { return now })))
		for b.Loop() {
			st.AllowN(ctx, "warm", 1)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = fmt.Sprint("user:", i)
		}
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				st.AllowN(ctx, keys[i%len(keys)], 1)
				i++
			}
		})
	})
}
