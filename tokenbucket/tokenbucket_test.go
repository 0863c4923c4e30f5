package tokenbucket_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }

var ctx = context.Background()

func TestConformance(t *testing.T) {
	conformance.RunBackends(t, conformance.Subject{ExactRetry: true, UsesBurst: true}, tokenbucket.New, tokenbucket.NewLocal)
}

func TestDifferential(t *testing.T) {
	// an allowed reply too large for one integer comes back as a table
	conformance.DifferentialOf(t, tokenbucket.New, tokenbucket.NewLocal,
		strategy.Limit{Limit: 1, Window: time.Hour, Burst: 1 << 20})
}

// backends runs f over the Redis strategy on miniredis and on a real Redis,
// and over the local twin, all on a manual clock.
func backends(t *testing.T, lim strategy.Limit, f func(t *testing.T, st strategy.Strategy, clock *conformance.Clock)) {
	t.Helper()
	conformance.OnBackends(t, lim, tokenbucket.New, tokenbucket.NewLocal, f)
}

func mustAllowN(t *testing.T, st strategy.Strategy, key string, n int64) strategy.Result {
	t.Helper()
	r, err := st.AllowN(ctx, key, n)
	if err != nil {
		t.Fatalf("AllowN(%q, %d): %v", key, n, err)
	}
	return r
}

func TestRefill(t *testing.T) {
	// 4 per second, burst 6: one token every 250 ms, up to 6.
	backends(t, strategy.Limit{Limit: 4, Window: time.Second, Burst: 6}, func(t *testing.T, st strategy.Strategy, clock *conformance.Clock) {
		if r := mustAllowN(t, st, "k", 6); !r.Allowed || r.Remaining != 0 || r.ResetAfter != 1500*time.Millisecond {
			t.Fatalf("AllowN(6) on a full bucket = %+v, want allowed, Remaining 0, ResetAfter 1.5s", r)
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
			t.Fatalf("after 10s idle: %+v, want a full bucket (Remaining 6, ResetAfter 0), never more", r)
		}
	})
}

func TestServerTime(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		st, err := tokenbucket.New(conformance.RealRedis(t), strategy.PerMinute(2), strategy.WithPrefix(testredis.Prefix(t)))
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
	st, err := tokenbucket.New(rdb, strategy.Limit{Limit: 3, Window: time.Second, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	mr.SetTime(conformance.Epoch)
	if r, _ := st.AllowN(ctx, "k", 1); !r.Allowed {
		t.Fatal("first request denied")
	}
	mr.SetTime(conformance.Epoch.Add(333 * time.Millisecond))
	if r, _ := st.AllowN(ctx, "k", 1); r.Allowed || r.RetryAfter != time.Millisecond {
		t.Fatalf("at +333ms by the server's TIME: %+v, want denied with RetryAfter 1ms (a token takes 333.3ms)", r)
	}
	mr.SetTime(conformance.Epoch.Add(334 * time.Millisecond))
	if r, _ := st.AllowN(ctx, "k", 1); !r.Allowed {
		t.Fatalf("at +334ms by the server's TIME: %+v, want allowed", r)
	}
}

func TestTTL(t *testing.T) {
	lim := strategy.Limit{Limit: 5, Window: time.Minute, Burst: 10} // a token every 12s
	t.Run("miniredis", func(t *testing.T) {
		mr, rdb := conformance.Miniredis(t)
		st, _ := tokenbucket.New(rdb, lim)
		mr.SetTime(conformance.Epoch)
		r, _ := st.AllowN(ctx, "k", 3)
		if ttl := mr.TTL(st.Key("k")); ttl != 36*time.Second || ttl != r.ResetAfter {
			t.Fatalf("TTL after taking 3 = %v, ResetAfter %v, want both 36s (3 tokens at 12s)", ttl, r.ResetAfter)
		}
		mr.FastForward(36*time.Second - time.Millisecond)
		if !mr.Exists(st.Key("k")) {
			t.Fatal("key gone before the bucket is full")
		}
		mr.FastForward(time.Millisecond)
		if mr.Exists(st.Key("k")) {
			t.Fatal("key still exists once the bucket is full")
		}
	})
	t.Run("redis", func(t *testing.T) {
		rdb := conformance.RealRedis(t)
		st, _ := tokenbucket.New(rdb, lim, strategy.WithPrefix(testredis.Prefix(t)))
		r, _ := st.AllowN(ctx, "k", 3)
		if ttl := rdb.PTTL(ctx, st.Key("k")).Val(); ttl <= 30*time.Second || ttl > r.ResetAfter || r.ResetAfter != 36*time.Second {
			t.Fatalf("PTTL after taking 3 = %v, ResetAfter %v, want ResetAfter 36s and PTTL in (30s, 36s]", ttl, r.ResetAfter)
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
	st, _ := tokenbucket.New(rdb, strategy.PerMinute(5), strategy.WithClock(clock))
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
		return fmt.Sprint(mr.HGet(st.Key("k"), "t"), mr.HGet(st.Key("k"), "l"), mr.TTL(st.Key("k")))
	}
	before := state()
	clock.Advance(5 * time.Second)
	for _, n := range []int64{0, 1, 2} { // 5s refill 5/12 of a token: not one unit yet
		if r := mustAllowN(t, st, "k", n); r.Allowed || r.Remaining != 0 {
			t.Fatalf("AllowN(%d) on an empty bucket = %+v, want denied with Remaining 0", n, r)
		}
	}
	if after := state(); after != before {
		t.Fatalf("Peek and denials changed the hash: before %s, after %s", before, after)
	}
}

func TestStoredState(t *testing.T) {
	// 10 per second: one token is 100 units, a millisecond refills 1.
	mr, rdb := conformance.Miniredis(t)
	clock := conformance.NewClock(conformance.Epoch)
	st, _ := tokenbucket.New(rdb, strategy.Limit{Limit: 10, Window: time.Second, Burst: 20}, strategy.WithClock(clock))
	mustAllowN(t, st, "user:42", 3)
	clock.Advance(55 * time.Millisecond)
	mustAllowN(t, st, "user:42", 1)
	key := st.Key("user:42")
	if key != "rl:tb:{user:42}" {
		t.Fatalf("Key = %q", key)
	}
	wantT := fmt.Sprint((20-3)*100 + 55 - 100)
	wantL := fmt.Sprint(conformance.Epoch.Add(55 * time.Millisecond).UnixMilli())
	if got, _ := mr.HKeys(key); len(got) != 2 {
		t.Fatalf("hash fields %v, want exactly t and l", got)
	}
	if gotT, gotL := mr.HGet(key, "t"), mr.HGet(key, "l"); gotT != wantT || gotL != wantL {
		t.Fatalf("hash t=%q l=%q, want t=%q (scaled tokens) l=%q", gotT, gotL, wantT, wantL)
	}
}

// TestMemoryUsage measures what one subject costs on a real Redis.
func TestMemoryUsage(t *testing.T) {
	rdb := conformance.RealRedis(t)
	st, _ := tokenbucket.New(rdb, strategy.PerMinute(100))
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
	if enc != "listpack" && enc != "ziplist" {
		t.Errorf("encoding %q, want the compact listpack (or ziplist)", enc)
	}
	if bytes > 128 {
		t.Errorf("MEMORY USAGE = %d bytes, want <= 128", bytes)
	}
}

func TestKeyLayout(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	st, _ := tokenbucket.New(rdb, strategy.PerMinute(5), strategy.WithPrefix("app:"))
	for subject, want := range map[string]string{
		"user:42":   "app:tb:{user:42}",
		"{x}":       "app:tb:{%7Bx%7D}",
		"a#1":       "app:tb:{a%231}",
		"100%":      "app:tb:{100%25}",
		"ключ":      "app:tb:{ключ}",
		"nul\x00in": "app:tb:{nul\x00in}",
	} {
		if got := st.Key(subject); got != want {
			t.Errorf("Key(%q) = %q, want %q", subject, got, want)
		}
	}
}

func TestInvalidConfig(t *testing.T) {
	conformance.InvalidConfig(t, tokenbucket.New, tokenbucket.NewLocal,
		conformance.ConfigCase{Name: "burst too large to be exact", Lim: strategy.Limit{Limit: 1, Window: strategy.MaxWindow, Burst: 1 << 20}, Field: "Burst"},
		conformance.ConfigCase{Name: "limit too large to be exact", Lim: strategy.Limit{Limit: 1<<40 - 1, Window: 8192 * time.Millisecond}, Field: "Limit"},
	)
	// the largest exact limits are accepted
	for _, lim := range []strategy.Limit{
		{Limit: strategy.MaxUnits, Window: time.Second, Burst: strategy.MaxUnits},
		{Limit: 1 << 20, Window: time.Second, Burst: 1 << 30},
		{Limit: 7, Window: 24 * time.Hour, Burst: 1e6},
	} {
		if _, err := tokenbucket.NewLocal(lim); err != nil {
			t.Errorf("NewLocal(%v): %v, want accepted", lim, err)
		}
	}
}

func TestBurstIgnoredAtLimitZero(t *testing.T) {
	conformance.BurstIgnoredAtLimitZero(t, tokenbucket.New, tokenbucket.NewLocal)
}

func TestSteadyClientNeverDenied(t *testing.T) {
	conformance.SteadyClientNeverDenied(t, tokenbucket.New, tokenbucket.NewLocal)
}

func TestNeverAboveRate(t *testing.T) {
	conformance.NeverAboveRate(t, tokenbucket.New, tokenbucket.NewLocal)
}

// TestExactAgainstRationals: 10,000 calls with tiny irregular time steps
// give exactly the Results of the rational-number bucket: no token is ever
// gained or lost to rounding, however the refill is sliced.
func TestExactAgainstRationals(t *testing.T) {
	conformance.ExactAgainstRationals(t, tokenbucket.New, tokenbucket.NewLocal)
}

// TestConcurrentExactlyCapacity: 64 goroutines over 4 clients hit one
// subject at one instant; exactly the capacity is allowed.
func TestConcurrentExactlyCapacity(t *testing.T) {
	conformance.ConcurrentExactlyCapacity(t, tokenbucket.New, tokenbucket.NewLocal)
}

func TestLocalDropsFullBuckets(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	st, _ := tokenbucket.NewLocal(strategy.PerSecond(5), strategy.WithClock(clock))
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
	clock.Advance(2 * time.Second) // every bucket is full again
	for i := 0; i < 5000; i++ {    // touch every stripe (64 of them) with near certainty
		st.Peek(ctx, fmt.Sprint("p", i))
	}
	if n := st.Subjects(); n != 0 {
		t.Fatalf("%d subjects still stored once their buckets were full, want 0", n)
	}
}

func TestLocalAllocations(t *testing.T) {
	st, _ := tokenbucket.NewLocal(strategy.PerSecond(1000))
	st.AllowN(ctx, "warm", 1)
	if a := testing.AllocsPerRun(1000, func() { st.AllowN(ctx, "warm", 1) }); a != 0 {
		t.Errorf("AllowN on a warm subject: %v allocations, want 0", a)
	}
}

func BenchmarkLocal(b *testing.B) {
	st, _ := tokenbucket.NewLocal(strategy.Limit{Limit: 1 << 30, Window: time.Second})
	b.ReportAllocs()
	b.Run("warm", func(b *testing.B) {
		for b.Loop() {
			st.AllowN(ctx, "warm", 1)
		}
	})
	b.Run("warm-cheap-clock", func(b *testing.B) { // the decision alone, without time.Now
		now := conformance.Epoch
		st, _ := tokenbucket.NewLocal(strategy.Limit{Limit: 1 << 30, Window: time.Second}, strategy.WithClock(strategy.ClockFunc(func() time.Time { return now })))
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
