package unitlog

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAgainstNaive drives a Log and a plain slice of units with the same
// random records (the time moving back and forth), evictions and queries,
// wrapping the ring and growing and shrinking it; from an empty Log, and
// from one whose running count starts just below 2^64, so that the counts
// wrap (as a subject's would after 2^64 units, or the script's after 2^41):
// the live count and the k-th unit are differences of running counts,
// exact modulo the wrap.
func TestAgainstNaive(t *testing.T) {
	for _, c := range []struct {
		name string
		base uint64
	}{
		{"from zero", 0},
		{"across the wrap", math.MaxUint64 - 3},
		{"across the wrap by a large cost", math.MaxUint64 - 1<<39},
	} {
		t.Run(c.name, func(t *testing.T) { againstNaive(t, c.name, c.base) })
	}
}

// againstNaive is TestAgainstNaive from a Log whose running count starts
// at base (until every entry has left).
func againstNaive(t *testing.T, name string, base uint64) {
	type rec struct{ t, n int64 }
	for seed := uint64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		g := Log{base: base}
		var naive []rec
		now := int64(1_000_000)
		for op := 0; op < 3000; op++ {
			now += rng.Int64N(40) - 15
			floor := now - 200
			switch rng.IntN(4) {
			case 0:
				g.Evict(floor)
				kept := naive[:0]
				for _, r := range naive {
					if r.t > floor {
						kept = append(kept, r)
					}
				}
				naive = kept
			default:
				n := rng.Int64N(5) + 1
				if rng.IntN(50) == 0 {
					n = 1 << 40
				}
				at := now
				if len(naive) > 0 {
					at = max(at, naive[len(naive)-1].t)
				}
				if got := g.Record(now, n); got != at {
					t.Fatalf("%s: seed %d op %d: Record(%d) at %d, want %d", name, seed, op, now, got, at)
				}
				naive = append(naive, rec{at, n})
			}
			var count int64
			for _, r := range naive {
				if r.t > floor {
					count += r.n
				}
			}
			if got := g.Count(floor); got != count {
				t.Fatalf("%s: seed %d op %d: Count = %d, want %d", name, seed, op, got, count)
			}
			if count > 0 {
				k := rng.Int64N(count) + 1
				var want int64
				left := k
				for _, r := range naive {
					if r.t > floor {
						if left -= r.n; left <= 0 {
							want = r.t
							break
						}
					}
				}
				if got := g.Leaves(floor, k); got != want {
					t.Fatalf("%s: seed %d op %d: Leaves(%d) = %d, want %d", name, seed, op, k, got, want)
				}
			}
			if g.Len() > len(naive) {
				t.Fatalf("%s: seed %d op %d: %d entries for %d records", name, seed, op, g.Len(), len(naive))
			}
		}
	}
}
