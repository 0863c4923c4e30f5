package denycache

import (
	"github.com/ratekit/ratelimit/strategy"

	"strconv"
	"testing"
	"time"
)

// BenchmarkDenyCachePut measures one new denial put in the cache: below its
// bound, and at its bound, where each put evicts the least recently used
// subject. Every put is of a subject the cache does not hold. Run it with
//
//	go test -run '^$' -bench BenchmarkDenyCachePut -benchtime 1000000x -benchmem .
//
// (at most 1,000,000 puts, the keys prepared beforehand).
func BenchmarkDenyCachePut(b *testing.B) {
	keys := make([]string, 2<<20)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	r := strategy.Result{Limit: 10, RetryAfter: time.Hour, ResetAfter: time.Hour} // nothing expires during the run
	for _, c := range []struct {
		name     string
		capacity int
		prefill  int
	}{
		{"below the bound", 2 << 20, 0},
		{"at the bound of 100k", 100_000, 100_000},
		{"at the bound of 1M", 1 << 20, 1 << 20},
	} {
		b.Run(c.name, func(b *testing.B) {
			d := New(c.capacity, nil, time.Hour, nil)
			gen, start := d.Begin()
			for _, k := range keys[:c.prefill] {
				d.Put(k, 1, r, gen, start)
			}
			next := c.prefill
			b.ReportAllocs()
			for b.Loop() {
				if next == len(keys) {
					b.Fatal("out of keys: run with -benchtime 1000000x")
				}
				d.Put(keys[next], 1, r, gen, start)
				next++
			}
			b.StopTimer()
			if n := d.Len(); n > c.capacity {
				b.Fatalf("cache holds %d, above %d", n, c.capacity)
			}
		})
	}
}
