package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratekit/ratelimit"
)

// BenchmarkSetGet is what following reloads costs a decision: Get per
// decision (an atomic load and a map lookup) against a Limiter kept aside,
// on an in-process twin so that the lookup is not lost in a round trip.
func BenchmarkSetGet(b *testing.B) {
	p := ratelimit.Policies{}
	for _, n := range []string{"login", "search", "upload", "upstream", "report", "export"} {
		p[n] = ratelimit.Config{Algorithm: ratelimit.GCRA, Limit: 1 << 30, Window: time.Millisecond}
	}
	set, err := ratelimit.NewSet(nil, p)
	if err != nil {
		b.Fatal(err)
	}
	kept, err := set.Get("search")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("kept", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			kept.Allow(ctx, "user:42")
		}
	})
	b.Run("Get", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l, _ := set.Get("search")
			l.Allow(ctx, "user:42")
		}
	})
	b.Run("Get only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			set.Get("search")
		}
	})
	b.Run("Get/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l, _ := set.Get("search")
				l.Allow(ctx, "user:42")
			}
		})
	})
}
