package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// refunder is a Strategy that gives units back.
type refunder interface {
	strategy.Strategy
	strategy.Refunder
}

// asRefunder fails t unless st implements strategy.Refunder.
func asRefunder(t *testing.T, st strategy.Strategy) refunder {
	t.Helper()
	r, ok := st.(refunder)
	if !ok {
		t.Fatalf("%T does not implement strategy.Refunder", st)
	}
	return r
}

// Refunds runs the refund rules every Refunder keeps, on every backend of
// BackendNames: invalid input is an error with one "ratelimit: " prefix
// and touches nothing; n = 0 is Peek; a refund returns what Peek then
// reports; a subject that spent its whole capacity at one instant gets
// back exactly the units refunded, and can spend them again; a refund
// never lifts a subject above its capacity, nor gives back what it did not
// spend. lim's capacity must be at least 4.
func Refunds[R, L strategy.Strategy](t *testing.T, lim strategy.Limit, newRedis NewRedis[R], newLocal NewLocal[L]) {
	t.Helper()
	refunds(t, lim, newRedis, newLocal, false)
}

// RefundsSharded is Refunds for a strategy that spreads a subject over
// shards: units are spent one at a time (a shard holds a share of the
// capacity), and the units given back are checked by Peek, not by spending
// them again (a request may land on a shard that got nothing back).
func RefundsSharded[R, L strategy.Strategy](t *testing.T, lim strategy.Limit, newRedis NewRedis[R], newLocal NewLocal[L]) {
	t.Helper()
	refunds(t, lim, newRedis, newLocal, true)
}

func refunds[R, L strategy.Strategy](t *testing.T, lim strategy.Limit, newRedis NewRedis[R], newLocal NewLocal[L], sharded bool) {
	t.Helper()
	capacity := lim.Capacity()
	// spend spends n units of key at one instant
	spend := func(t *testing.T, st strategy.Strategy, key string, n int64) {
		t.Helper()
		if !sharded {
			if r := allowN(t, st, key, n); !r.Allowed {
				t.Fatalf("AllowN(%q, %d) denied: %+v", key, n, r)
			}
			return
		}
		for got := int64(0); got < n; {
			if r := allowN(t, st, key, 1); r.Allowed {
				got++
			} else if r.RetryAfter == strategy.Never || peek(t, st, key).Remaining == 0 {
				t.Fatalf("spent %d of %d units of %q: %+v", got, n, key, r)
			}
		}
	}
	OnBackends(t, lim, newRedis, newLocal, func(t *testing.T, st strategy.Strategy, clock *Clock) {
		rf := asRefunder(t, st)
		clock.Advance(7 * time.Millisecond) // not on a window edge
		t.Run("invalid input touches nothing", func(t *testing.T) {
			spend(t, st, "v", 2)
			before := peek(t, st, "v")
			for _, c := range []struct {
				key  string
				n    int64
				want error
			}{
				{"", 1, strategy.ErrInvalidKey},
				{strings.Repeat("k", strategy.MaxKeyLen+1), 1, strategy.ErrInvalidKey},
				{"v", -1, strategy.ErrInvalidCost},
				{"v", strategy.MaxUnits + 1, strategy.ErrInvalidCost},
			} {
				_, err := rf.RefundN(ctx, c.key, c.n)
				if !errors.Is(err, c.want) {
					t.Errorf("RefundN(key of %d bytes, %d) error = %v, want %v", len(c.key), c.n, err, c.want)
					continue
				}
				if got := strings.Count(err.Error(), "ratelimit: "); got != 1 {
					t.Errorf("RefundN(key of %d bytes, %d) error %q has %d \"ratelimit: \" prefixes, want 1", len(c.key), c.n, err, got)
				}
			}
			if after := peek(t, st, "v"); after != before {
				t.Errorf("after invalid refunds Peek = %+v, want %+v as before", after, before)
			}
		})
		t.Run("zero is peek", func(t *testing.T) {
			spend(t, st, "z", 1)
			got, err := rf.RefundN(ctx, "z", 0)
			if err != nil {
				t.Fatal(err)
			}
			if want := peek(t, st, "z"); got != want {
				t.Errorf("RefundN(0) = %+v, want Peek %+v", got, want)
			}
		})
		t.Run("exact at one instant", func(t *testing.T) {
			spend(t, st, "x", capacity)
			got, err := rf.RefundN(ctx, "x", 3)
			if err != nil {
				t.Fatal(err)
			}
			if got.Remaining != 3 || !got.Allowed || got.RetryAfter != 0 {
				t.Errorf("RefundN(3) after spending %d = %+v, want Allowed with Remaining 3", capacity, got)
			}
			if want := peek(t, st, "x"); got != want {
				t.Errorf("RefundN(3) = %+v, but Peek then = %+v", got, want)
			}
			if sharded {
				return
			}
			if r := allowN(t, st, "x", 4); r.Allowed {
				t.Errorf("AllowN(4) after a refund of 3 allowed: %+v", r)
			}
			if r := allowN(t, st, "x", 3); !r.Allowed || r.Remaining != 0 {
				t.Errorf("AllowN(3) after a refund of 3 = %+v, want Allowed, Remaining 0", r)
			}
		})
		t.Run("never above capacity", func(t *testing.T) {
			fresh := peek(t, st, "c")
			got, err := rf.RefundN(ctx, "c", strategy.MaxUnits)
			if err != nil {
				t.Fatal(err)
			}
			if got != fresh {
				t.Errorf("RefundN(MaxUnits) of a fresh subject = %+v, want the fresh state %+v", got, fresh)
			}
			spend(t, st, "c", 2)
			clock.Advance(time.Millisecond)
			spend(t, st, "c", 1)
			if got, err = rf.RefundN(ctx, "c", 10); err != nil {
				t.Fatal(err)
			}
			if got.Remaining != capacity || got.Remaining > got.Limit {
				t.Errorf("RefundN(10) after spending 3 = %+v, want Remaining %d (the capacity)", got, capacity)
			}
			if sharded {
				return
			}
			// the units given back are all there is: capacity + 1 is denied
			if r := allowN(t, st, "c", capacity); !r.Allowed {
				t.Errorf("AllowN(capacity) after the refund = %+v, want allowed", r)
			}
			if r := allowN(t, st, "c", 1); r.Allowed {
				t.Errorf("AllowN(1) beyond the capacity after a refund = %+v, want denied", r)
			}
		})
	})
}

// RefundDifferential drives a Redis strategy (on miniredis, and on a real
// Redis with each limit's Window times 1000) and its local twin with the same random schedule of time steps,
// AllowN, RefundN and Peek, and checks every Result is identical. The seed
// is printed on failure; RATELIMIT_DIFF_SEED replays one,
// RATELIMIT_DIFF_OPS sets the number of operations per limit (default 400).
func RefundDifferential[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L], limits ...strategy.Limit) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RATELIMIT_DIFF_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	ops := 400
	if s := os.Getenv("RATELIMIT_DIFF_OPS"); s != "" {
		ops, _ = strconv.Atoi(s)
	}
	for _, backend := range []string{"miniredis", "redis"} {
		for _, lim := range limits {
			if backend == "redis" {
				// a real Redis expires keys by its own clock: windows long
				// enough that no key expires while the test runs
				lim.Window *= 1000
			}
			t.Run(backend+"/"+lim.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				clock := NewClock(Epoch.Add(time.Duration(rng.IntN(1000)) * time.Millisecond))
				r := asRefunder(t, Backend(t, backend, lim, clock, newRedis, newLocal))
				l := asRefunder(t, Backend(t, "local", lim, clock, newRedis, newLocal))
				subjects := []string{"a", "b", "user:{42}"}
				step := lim.Window.Milliseconds()/5 + 1
				for i := 0; i < ops; i++ {
					switch d := rng.IntN(10); {
					case d < 5:
						clock.Advance(time.Duration(rng.Int64N(step)) * time.Millisecond)
					case d < 6:
						clock.Advance(time.Duration(rng.Int64N(2*lim.Window.Milliseconds())) * time.Millisecond)
					}
					key := subjects[rng.IntN(len(subjects))]
					n := rng.Int64N(min(max(lim.Capacity()/2, 1), 50)+2) + int64(rng.IntN(2))
					var what string
					var rr, lr strategy.Result
					var rerr, lerr error
					switch op := rng.IntN(10); {
					case op < 4:
						what = fmt.Sprintf("RefundN(%d)", n)
						rr, rerr = r.RefundN(ctx, key, n)
						lr, lerr = l.RefundN(ctx, key, n)
					case op < 5:
						what = "Peek"
						rr, rerr = r.Peek(ctx, key)
						lr, lerr = l.Peek(ctx, key)
					default:
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
					if rr.Remaining > rr.Limit {
						t.Fatalf("seed %d, op %d: %s(%q) = %+v: Remaining above the capacity", seed, i, what, key, rr)
					}
				}
			})
		}
	}
}

// RefundServerTime checks a refund on the Redis server's TIME (no client
// clock): on miniredis at a time set with SetTime, and on a real Redis. A
// subject spends its capacity, gets 3 units back, and Peek agrees.
func RefundServerTime[R strategy.Strategy](t *testing.T, newRedis NewRedis[R]) {
	t.Helper()
	lim := strategy.Limit{Limit: 10, Window: time.Hour}
	for _, backend := range []string{"miniredis", "redis"} {
		t.Run(backend, func(t *testing.T) {
			var st strategy.Strategy
			var err error
			if backend == "miniredis" {
				mr, rdb := Miniredis(t)
				mr.SetTime(Epoch.Add(7 * time.Millisecond))
				st, err = newRedis(rdb, lim)
			} else {
				st, err = newRedis(RealRedis(t), lim, strategy.WithPrefix(testredis.Prefix(t)))
			}
			if err != nil {
				t.Fatal(err)
			}
			rf := asRefunder(t, st)
			if r := allowN(t, st, "s", 10); !r.Allowed {
				t.Fatalf("AllowN(10) denied: %+v", r)
			}
			got, err := rf.RefundN(ctx, "s", 3)
			if err != nil {
				t.Fatal(err)
			}
			if got.Remaining != 3 || !got.Allowed {
				t.Errorf("RefundN(3) = %+v, want Allowed, Remaining 3", got)
			}
			if p := peek(t, st, "s"); p.Remaining != got.Remaining {
				t.Errorf("Peek after RefundN(3) = %+v, want Remaining %d", p, got.Remaining)
			}
		})
	}
}

// RefundCluster checks refunds on the 3-master Redis Cluster that the test
// binary shares: for subjects spread over the nodes, a subject spends its
// capacity one unit at a time, gets 3 units back, and Peek agrees; a
// refund of everything brings it back to its capacity, no further.
func RefundCluster[R strategy.Strategy](t *testing.T, lim strategy.Limit, newRedis NewRedis[R]) {
	t.Helper()
	clock := NewClock(Epoch.Add(7 * time.Millisecond))
	st, err := newRedis(testredis.SharedCluster(t).Client(t), lim, strategy.WithClock(clock), strategy.WithPrefix(testredis.Prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	rf := asRefunder(t, st)
	capacity := lim.Capacity()
	for _, key := range []string{"user:1", "user:2", "user:3", "{x}#1", "tenant:42"} {
		for got := int64(0); got < capacity; {
			if r := allowN(t, st, key, 1); r.Allowed {
				got++
			} else if peek(t, st, key).Remaining == 0 {
				t.Fatalf("%q: spent %d of %d units: %+v", key, got, capacity, r)
			}
		}
		got, err := rf.RefundN(ctx, key, 3)
		if err != nil {
			t.Fatalf("%q: RefundN(3): %v", key, err)
		}
		if got.Remaining != 3 {
			t.Errorf("%q: RefundN(3) after spending the capacity = %+v, want Remaining 3", key, got)
		}
		if p := peek(t, st, key); p != got {
			t.Errorf("%q: Peek after RefundN(3) = %+v, want %+v", key, p, got)
		}
		if got, err = rf.RefundN(ctx, key, strategy.MaxUnits); err != nil || got.Remaining != capacity {
			t.Errorf("%q: RefundN(MaxUnits) = %+v, %v, want Remaining %d", key, got, err, capacity)
		}
	}
}

// BenchRefund measures, on the real Redis the test binary shares, a
// subject that holds half its capacity: Peek alone, and a request charged
// then given back (AllowN then RefundN, which leaves the state as it was).
// A refund is one script call, so the pair should cost about two Peeks:
// compare the sub-benchmarks' ns/op as a ratio.
func BenchRefund[R strategy.Strategy](b *testing.B, newRedis NewRedis[R]) {
	st, err := newRedis(RealRedis(b), strategy.Limit{Limit: 100, Window: time.Hour}, strategy.WithPrefix(testredis.Prefix(b)))
	if err != nil {
		b.Fatal(err)
	}
	rf, ok := any(st).(strategy.Refunder)
	if !ok {
		b.Fatalf("%T does not implement strategy.Refunder", st)
	}
	for _, c := range []struct {
		name string
		op   func(key string) error
	}{
		{"Peek", func(key string) error { _, err := st.Peek(ctx, key); return err }},
		{"AllowN+RefundN", func(key string) error {
			if _, err := st.AllowN(ctx, key, 1); err != nil {
				return err
			}
			_, err := rf.RefundN(ctx, key, 1)
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			key := "bench:" + c.name
			if err := st.Reset(ctx, key); err != nil {
				b.Fatal(err)
			}
			if r, err := st.AllowN(ctx, key, 50); err != nil || !r.Allowed {
				b.Fatalf("AllowN(50) = %+v, %v", r, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := c.op(key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
