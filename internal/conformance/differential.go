package conformance

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// Pair builds, for lim, a Redis strategy and its local twin, both reading
// clock.
type Pair func(t *testing.T, lim strategy.Limit, clock *Clock) (redis, local strategy.Strategy)

// Differential drives a Redis strategy and its local twin with the same
// random sequence of (time step, subject, cost n, operation) over several
// limits, then the extra ones, and checks that every Result is identical.
// The seed is printed on failure; RATELIMIT_DIFF_SEED replays one,
// RATELIMIT_DIFF_OPS sets the number of operations per limit (default 400).
func Differential(t *testing.T, pair Pair, extra ...strategy.Limit) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RATELIMIT_DIFF_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	ops := 400
	if s := os.Getenv("RATELIMIT_DIFF_OPS"); s != "" {
		ops, _ = strconv.Atoi(s)
	}
	limits := []strategy.Limit{
		{Limit: 1, Window: time.Second},
		{Limit: 5, Window: 1500 * time.Millisecond},
		{Limit: 10, Window: time.Second, Burst: 15},
		{Limit: 7, Window: 333 * time.Millisecond, Burst: 3},
		{Limit: 100, Window: time.Minute},
	}
	for _, lim := range append(limits, extra...) {
		t.Run(lim.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			clock := NewClock(Epoch.Add(time.Duration(rng.IntN(1000)) * time.Millisecond))
			r, l := pair(t, lim, clock)
			subjects := []string{"a", "b", "user:{42}", "c#1"}
			step := lim.Window.Milliseconds()/5 + 1
			for i := 0; i < ops; i++ {
				switch d := rng.IntN(10); {
				case d < 5:
					clock.Advance(time.Duration(rng.Int64N(step)) * time.Millisecond)
				case d < 6:
					clock.Advance(time.Duration(rng.Int64N(3*lim.Window.Milliseconds())) * time.Millisecond)
				}
				key := subjects[rng.IntN(len(subjects))]
				var what string
				var rr, lr strategy.Result
				var rerr, lerr error
				switch op := rng.IntN(20); {
				case op == 0:
					what = "Reset"
					rerr, lerr = r.Reset(ctx, key), l.Reset(ctx, key)
				case op < 4:
					what = "Peek"
					rr, rerr = r.Peek(ctx, key)
					lr, lerr = l.Peek(ctx, key)
				default:
					// costs up to half the capacity, at most 100 (a sliding
					// log records one entry per unit)
					n := rng.Int64N(min(max(lim.Capacity()/2, 1), 100)+2) + int64(rng.IntN(2))
					what = fmt.Sprintf("AllowN(%d)", n)
					rr, rerr = r.AllowN(ctx, key, n)
					lr, lerr = l.AllowN(ctx, key, n)
				}
				if rerr != nil || lerr != nil {
					t.Fatalf("seed %d, op %d %s(%q): errors redis=%v local=%v", seed, i, what, key, rerr, lerr)
				}
				if rr != lr {
					t.Fatalf("seed %d, op %d at %s: %s(%q):\n redis %+v\n local %+v",
						seed, i, clock.Now().Format("15:04:05.000"), what, key, rr, lr)
				}
			}
		})
	}
}
