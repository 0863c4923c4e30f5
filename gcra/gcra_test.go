package gcra_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/gcra"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

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
					if r := conformance.Allow(t, st, "user:42", n); !r.Allowed {
						t.Fatalf("%s: AllowN(%d) denied: %+v", backend, n, r)
					}
				}
				if got, err := rdb.Get(t.Context(), st.Key("user:42")).Result(); err != nil || got != c.want {
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
	conformance.Allow(t, fractional, "k", 2) // ms and a remainder digit: read by whole as ten times the ms
	r := conformance.Allow(t, whole, "k", 0)
	if r.Remaining < 0 || r.ResetAfter > time.Minute || r.RetryAfter > 600*time.Millisecond {
		t.Fatalf("Peek under the new limit = %+v, want at worst an exhausted subject (ResetAfter <= 1m, RetryAfter <= 600ms)", r)
	}
	mr.FlushAll()
	conformance.Allow(t, whole, "k", 100) // read by fractional as a tenth of its ms: long passed
	if r := conformance.Allow(t, fractional, "k", 0); r.Remaining != 3 {
		t.Fatalf("Peek under the new limit = %+v, want an idle subject", r)
	}
}

// TestSpec runs the checks every algorithm shares with the numbers of a
// bucket. Memory: 24 (dict entry) + 32 (the 17-byte key name) + 16 (object
// header), the least any key of this name costs on Redis 7.0 with jemalloc.
func TestSpec(t *testing.T) {
	conformance.RunSpec(t, conformance.BucketSpec(gcra.New, gcra.NewLocal, "gc",
		conformance.Memory{Lim: strategy.PerMinute(100), Requests: 100, Cost: 1, Encodings: []string{"int"}, MaxBytes: 72}))
}

func BenchmarkLocal(b *testing.B)    { conformance.BenchmarkLocal(b, gcra.NewLocal) }
func BenchmarkRefund(b *testing.B)   { conformance.BenchRefund(b, gcra.New) }
func BenchmarkOverride(b *testing.B) { conformance.BenchOverride(b, gcra.New, gcra.NewLocal, 1<<30) }

// TestTierOfSameRateRefund: a tier with the strategy's rate and another
// burst writes TAT in the strategy's own scale (the script records a scale
// only for another rate), so a refund after a decision under it gives the
// units back, on Redis and in the twin alike.
func TestTierOfSameRateRefund(t *testing.T) {
	lim := strategy.Limit{Limit: 10, Window: time.Second, Burst: 10}
	tier := strategy.Limit{Limit: 10, Window: time.Second, Burst: 20}
	_, rdb := conformance.Miniredis(t)
	clock := conformance.NewClock(conformance.Epoch)
	st, err := gcra.New(rdb, lim, strategy.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	tw, err := gcra.NewLocal(lim, strategy.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]interface {
		strategy.LimitOverrider
		strategy.Refunder
	}{"redis": st, "local": tw} {
		if r, err := s.AllowNWith(t.Context(), "user:1", 5, tier); err != nil || !r.Allowed {
			t.Fatalf("%s: AllowNWith(5) under the tier = %+v, %v; want allowed", name, r, err)
		}
		r, err := s.RefundN(t.Context(), "user:1", 5)
		if err != nil || r.Remaining != 10 {
			t.Errorf("%s: RefundN(5) after it: Remaining %d (%v), want 10: the 5 units back", name, r.Remaining, err)
		}
	}
}
