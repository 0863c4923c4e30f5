package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// A sharded strategy (package sharded, Subject.Shards > 1) spreads each
// subject over shards that each decide alone on their share of the limit.
// Two things of the single-key contract then change, by design: the
// Remaining of AllowN is an estimate for the subject (Peek, which reads
// every shard, stays exact), and a cost above one shard's share can never
// pass. The cases below replace the ones that assume otherwise; they keep
// every other promise, exactly: with every shard tried before a denial,
// single units are allowed up to the capacity and no further, Peek is
// exact, RetryAfter and ResetAfter are honest, denials record nothing.

// window is the limits' window in the cases that move the manual clock.
// A real Redis expires keys on its own clock, whatever clock the strategy
// reads: a key written with a TTL of one second of manual time lives one
// second of real time, which a loaded machine can spend between two calls
// of one case (and the case then sees a subject it thinks full come back
// empty). A minute keeps every key alive through a case; the clock moves
// in fractions of it.
const window = time.Minute

// perWindow is a limit of n units per window.
func perWindow(n int64) strategy.Limit { return strategy.Limit{Limit: n, Window: window} }

// hammerStep is how far the clock moves between two denied requests of a
// client hammering until retry has passed, waited into it: a hundredth of
// retry (at least 1 ms), and a last step to 1 ms before retry, so the edge
// is hit. Stepping 1 ms at a time would cost a real Redis up to a thousand
// round trips per second of retry, enough on a loaded machine for the
// key's TTL, which runs on the server's own clock, to expire mid-test.
func hammerStep(waited, retry time.Duration) time.Duration {
	return min(max(time.Millisecond, retry/100), max(retry-time.Millisecond-waited, time.Millisecond))
}

// wholeSubject names the cases that a sharded strategy skips: each has a
// counterpart in shardedCases.
var wholeSubject = map[string]bool{
	"allows exactly the capacity at one instant": true,
	"cost n counts n units":                      true,
	"denied requests are not recorded":           true,
	"RetryAfter is honest for n=1 and n>1":       true,
	"Peek and n=0 consume nothing":               true,
	"Remaining is what is then allowed":          true,
	"ResetAfter brings back full capacity":       true,
	"Reset forgets the subject only":             true,
}

// shares returns the smallest and the largest share of capacity units over
// s.Shards shards (fewer when capacity is smaller).
func shares(s Subject, capacity int64) (small, large int64) {
	n := min(int64(s.Shards), capacity)
	return capacity / n, (capacity + n - 1) / n
}

var shardedCases = []testCase{
	{"sharded: allows exactly the capacity, one unit at a time", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.PerMinute(7))
		for i := int64(1); i <= 7; i++ {
			// Remaining is estimated from the shards tried: within [0, 6],
			// and 0 once every shard is full.
			r := allowN(t, st, "k", 1)
			if !r.Allowed || r.Limit != 7 || r.Remaining < 0 || r.Remaining > 6 || i == 7 && r.Remaining != 0 || r.RetryAfter != 0 {
				t.Fatalf("request %d = %+v, want allowed, Limit 7, Remaining in [0, 6], 0 for the last", i, r)
			}
			if p := peek(t, st, "k"); p.Remaining != 7-i || p.Limit != 7 {
				t.Fatalf("Peek after %d units = %+v, want exactly Remaining %d, Limit 7", i, p, 7-i)
			}
		}
		r := allowN(t, st, "k", 1)
		if r.Allowed || r.Remaining != 0 || r.RetryAfter <= 0 || r.Limit != 7 {
			t.Fatalf("request 8 = %+v, want denied, Remaining 0, RetryAfter > 0, Limit 7", r)
		}
	}},
	{"sharded: cost n counts n units, up to one shard's share", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.PerMinute(10))
		small, large := shares(s, 10)
		if r := allowN(t, st, "k", small); !r.Allowed || r.Remaining < 0 || r.Remaining > 10-small {
			t.Fatalf("AllowN(%d) = %+v, want allowed with Remaining in [0, %d]", small, r, 10-small)
		}
		if p := peek(t, st, "k"); p.Remaining != 10-small {
			t.Fatalf("Peek after AllowN(%d) = %+v, want Remaining %d", small, p, 10-small)
		}
		if large < 10 {
			if r := allowN(t, st, "k", large+1); r.Allowed || r.RetryAfter != strategy.Never {
				t.Fatalf("AllowN(%d), above every shard's share, = %+v, want denied with RetryAfter Never", large+1, r)
			}
			if p := peek(t, st, "k"); p.Remaining != 10-small {
				t.Fatalf("Peek after a denied AllowN(%d) = %+v, want Remaining %d", large+1, p, 10-small)
			}
		}
	}},
	{"sharded: denied requests are not recorded", func(t *testing.T, s Subject) {
		st, clock := build(t, s, perWindow(3))
		for i := 0; i < 3; i++ {
			if r := allowN(t, st, "k", 1); !r.Allowed {
				t.Fatalf("unit %d of 3 per window = %+v, want allowed", i+1, r)
			}
		}
		first := allowN(t, st, "k", 1)
		if first.Allowed || first.RetryAfter <= 0 {
			t.Fatalf("4th unit of 3 per window = %+v, want denied with RetryAfter > 0", first)
		}
		waited := time.Duration(0)
		for waited < first.RetryAfter {
			if r := allowN(t, st, "k", 1); r.Allowed {
				t.Fatalf("allowed %v after the denial, before RetryAfter %v", waited, first.RetryAfter)
			}
			step := hammerStep(waited, first.RetryAfter)
			clock.Advance(step)
			waited += step
		}
		if r := allowN(t, st, "k", 1); !r.Allowed {
			t.Fatalf("after hammering for RetryAfter %v: %+v, want allowed: denials must not be recorded", first.RetryAfter, r)
		}
	}},
	{"sharded: RetryAfter is honest", func(t *testing.T, s Subject) {
		small, _ := shares(s, 10)
		for _, n := range []int64{1, small} {
			t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
				st, clock := build(t, s, perWindow(10))
				for i := 0; i < 10; i++ {
					allowN(t, st, "k", 1)
					clock.Advance(window / 10)
				}
				r := allowN(t, st, "k", n)
				for r.Allowed {
					r = allowN(t, st, "k", n)
				}
				if r.RetryAfter <= 0 {
					t.Fatalf("denied %+v, want RetryAfter > 0", r)
				}
				if s.ExactRetry && n == 1 && r.RetryAfter > time.Millisecond {
					clock.Advance(r.RetryAfter - time.Millisecond)
					if p := peek(t, st, "k"); p.Allowed {
						t.Fatalf("Peek 1ms before RetryAfter %v = %+v, want not allowed", r.RetryAfter, p)
					}
					clock.Advance(time.Millisecond)
				} else {
					clock.Advance(r.RetryAfter)
				}
				if r2 := allowN(t, st, "k", n); !r2.Allowed {
					t.Fatalf("AllowN(%d) after RetryAfter %v = %+v, want allowed", n, r.RetryAfter, r2)
				}
			})
		}
	}},
	{"sharded: Peek and n=0 consume nothing", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.PerMinute(3))
		allowN(t, st, "k", 1)
		allowN(t, st, "k", 1)
		p1 := peek(t, st, "k")
		z := allowN(t, st, "k", 0)
		p2 := peek(t, st, "k")
		if p1 != p2 || p1 != z {
			t.Fatalf("Peek %+v, AllowN(0) %+v, Peek again %+v: want all equal", p1, z, p2)
		}
		if !p1.Allowed || p1.Remaining != 1 {
			t.Fatalf("Peek after 2 of 3 = %+v, want Allowed with Remaining 1", p1)
		}
		allowN(t, st, "k", 1)
		if p := peek(t, st, "k"); p.Allowed || p.Remaining != 0 || p.RetryAfter <= 0 {
			t.Fatalf("Peek when full = %+v, want not allowed, Remaining 0, RetryAfter > 0", p)
		}
	}},
	{"sharded: Peek's Remaining is what is then allowed, unit by unit", func(t *testing.T, s Subject) {
		st, clock := build(t, s, perWindow(20))
		small, _ := shares(s, 20)
		for _, step := range []struct {
			n       int64
			advance time.Duration
		}{{5, window / 100}, {9, window * 333 / 1000}, {3, window * 501 / 1000}, {6, window * 77 / 1000}} {
			allowN(t, st, "k", min(step.n, small))
			clock.Advance(step.advance)
			p := peek(t, st, "k")
			for i := int64(0); i < p.Remaining; i++ {
				if r := allowN(t, st, "k", 1); !r.Allowed {
					t.Fatalf("Peek's Remaining %d, yet unit %d = %+v", p.Remaining, i+1, r)
				}
			}
			if r := allowN(t, st, "k", 1); r.Allowed {
				t.Fatalf("Peek's Remaining %d, yet unit %d passed", p.Remaining, p.Remaining+1)
			}
		}
	}},
	{"sharded: Peek's ResetAfter brings back full capacity", func(t *testing.T, s Subject) {
		st, clock := build(t, s, perWindow(4))
		allowN(t, st, "k", 1)
		clock.Advance(window / 4)
		for i := 0; i < 3; i++ {
			if r := allowN(t, st, "k", 1); !r.Allowed || r.ResetAfter <= 0 {
				t.Fatalf("unit %d = %+v, want allowed with ResetAfter > 0", i+2, r)
			}
		}
		p := peek(t, st, "k")
		if p.ResetAfter <= 0 {
			t.Fatalf("Peek = %+v, want ResetAfter > 0", p)
		}
		clock.Advance(p.ResetAfter)
		if p2 := peek(t, st, "k"); p2.Remaining != 4 || p2.ResetAfter != 0 {
			t.Fatalf("Peek after ResetAfter %v = %+v, want Remaining 4, ResetAfter 0", p.ResetAfter, p2)
		}
	}},
	{"sharded: Reset forgets the subject only, on every shard", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.PerMinute(2))
		for _, k := range []string{"a", "a", "b", "b"} {
			allowN(t, st, k, 1)
		}
		if err := st.Reset(ctx, "a"); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		if p := peek(t, st, "a"); p.Remaining != 2 {
			t.Fatalf("Peek(a) after Reset = %+v, want Remaining 2", p)
		}
		if p := peek(t, st, "b"); p.Remaining != 0 {
			t.Fatalf("Peek(b) after Reset(a) = %+v, want Remaining 0", p)
		}
	}},
}
