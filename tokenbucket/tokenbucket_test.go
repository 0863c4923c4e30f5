package tokenbucket_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

func TestStoredState(t *testing.T) {
	// 10 per second: one token is 100 units, a millisecond refills 1.
	mr, rdb := conformance.Miniredis(t)
	clock := conformance.NewClock(conformance.Epoch)
	st, _ := tokenbucket.New(rdb, strategy.Limit{Limit: 10, Window: time.Second, Burst: 20}, strategy.WithClock(clock))
	conformance.Allow(t, st, "user:42", 3)
	clock.Advance(55 * time.Millisecond)
	conformance.Allow(t, st, "user:42", 1)
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

// TestSpec runs the checks every algorithm shares with the numbers of a
// bucket. Memory: a hash of two small fields in the compact listpack.
func TestSpec(t *testing.T) {
	conformance.RunSpec(t, conformance.BucketSpec(tokenbucket.New, tokenbucket.NewLocal, "tb",
		conformance.Memory{Lim: strategy.PerMinute(100), Requests: 100, Cost: 1, Encodings: []string{"listpack", "ziplist"}, MaxBytes: 128}))
}

func BenchmarkLocal(b *testing.B)  { conformance.BenchmarkLocal(b, tokenbucket.NewLocal) }
func BenchmarkRefund(b *testing.B) { conformance.BenchRefund(b, tokenbucket.New) }
func BenchmarkOverride(b *testing.B) {
	conformance.BenchOverride(b, tokenbucket.New, tokenbucket.NewLocal, 1<<30)
}
