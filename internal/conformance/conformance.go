package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// Factory builds the strategy under test for lim. It must make the strategy
// read clock (strategy.WithClock(clock)) and give it keys no other test sees.
type Factory func(t *testing.T, lim strategy.Limit, clock *Clock) (strategy.Strategy, error)

// Subject is one strategy to run the suite over.
type Subject struct {
	New Factory
	// ExactRetry: waiting 1 ms less than RetryAfter does not let the same
	// request pass (true of every algorithm but the sliding counter).
	ExactRetry bool
	// UsesBurst: the capacity is Limit.Burst when set (token bucket, GCRA).
	UsesBurst bool
	// Shards > 1: the strategy spreads each subject over this many shards
	// (package sharded) and tries every shard before it denies. The cases
	// that assume one decision sees the whole subject are replaced by the
	// sharded cases (sharded.go).
	Shards int
}

// Run runs the whole suite over s, each case a subtest.
func Run(t *testing.T, s Subject) {
	t.Helper()
	for _, c := range cases {
		if s.Shards > 1 && wholeSubject[c.name] {
			continue
		}
		t.Run(c.name, func(t *testing.T) { c.fn(t, s) })
	}
	if s.Shards > 1 {
		for _, c := range shardedCases {
			t.Run(c.name, func(t *testing.T) { c.fn(t, s) })
		}
	}
}

type testCase struct {
	name string
	fn   func(t *testing.T, s Subject)
}

var ctx = context.Background()

func build(t *testing.T, s Subject, lim strategy.Limit) (strategy.Strategy, *Clock) {
	t.Helper()
	clock := NewClock(Epoch)
	st, err := s.New(t, lim, clock)
	if err != nil {
		t.Fatalf("New(%v): %v", lim, err)
	}
	return st, clock
}

func allowN(t *testing.T, st strategy.Strategy, key string, n int64) strategy.Result {
	t.Helper()
	r, err := st.AllowN(ctx, key, n)
	if err != nil {
		t.Fatalf("AllowN(%q, %d): %v", key, n, err)
	}
	return r
}

func peek(t *testing.T, st strategy.Strategy, key string) strategy.Result {
	t.Helper()
	r, err := st.Peek(ctx, key)
	if err != nil {
		t.Fatalf("Peek(%q): %v", key, err)
	}
	return r
}

var cases = []testCase{
	{"fresh subject has full capacity", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.PerMinute(10))
		want := strategy.Result{Allowed: true, Limit: 10, Remaining: 10}
		if got := peek(t, st, "fresh"); got != want {
			t.Errorf("Peek of a fresh subject = %+v, want %+v", got, want)
		}
	}},
	{"allows exactly the capacity at one instant", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.PerMinute(5))
		for i := int64(1); i <= 5; i++ {
			r := allowN(t, st, "k", 1)
			if !r.Allowed || r.Remaining != 5-i || r.RetryAfter != 0 || r.Limit != 5 {
				t.Fatalf("request %d = %+v, want allowed with Remaining %d, Limit 5", i, r, 5-i)
			}
		}
		r := allowN(t, st, "k", 1)
		if r.Allowed || r.Remaining != 0 || r.RetryAfter <= 0 {
			t.Fatalf("request 6 = %+v, want denied, Remaining 0, RetryAfter > 0", r)
		}
	}},
	{"cost n counts n units", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.PerMinute(10))
		if r := allowN(t, st, "k", 7); !r.Allowed || r.Remaining != 3 {
			t.Fatalf("AllowN(7) = %+v, want allowed with Remaining 3", r)
		}
		if r := allowN(t, st, "k", 4); r.Allowed || r.Remaining != 3 {
			t.Fatalf("AllowN(4) after 7 of 10 = %+v, want denied with Remaining 3", r)
		}
		if r := allowN(t, st, "k", 3); !r.Allowed || r.Remaining != 0 {
			t.Fatalf("AllowN(3) after 7 of 10 = %+v, want allowed with Remaining 0", r)
		}
	}},
	{"denied requests are not recorded", func(t *testing.T, s Subject) {
		st, clock := build(t, s, perWindow(3))
		allowN(t, st, "k", 3)
		first := allowN(t, st, "k", 1)
		if first.Allowed {
			t.Fatalf("4th request of 3 per window = %+v, want denied", first)
		}
		// hammer while denied until RetryAfter has passed (see hammerStep)
		waited := time.Duration(0)
		for waited < first.RetryAfter {
			r := allowN(t, st, "k", 1)
			if r.Allowed {
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
	{"RetryAfter is honest for n=1 and n>1", func(t *testing.T, s Subject) {
		for _, n := range []int64{1, 3, 10} {
			t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
				st, clock := build(t, s, perWindow(10))
				// spread 10 units over 0.9 window
				for i := 0; i < 10; i++ {
					allowN(t, st, "k", 1)
					clock.Advance(window / 10)
				}
				r := allowN(t, st, "k", n)
				for r.Allowed { // some algorithms refill meanwhile: use it up
					r = allowN(t, st, "k", n)
				}
				if r.RetryAfter <= 0 {
					t.Fatalf("denied %+v, want RetryAfter > 0", r)
				}
				if s.ExactRetry && r.RetryAfter > time.Millisecond {
					clock.Advance(r.RetryAfter - time.Millisecond)
					if r2 := peekN(t, st, "k", n); r2 {
						t.Fatalf("AllowN(%d) passed 1ms before RetryAfter %v", n, r.RetryAfter)
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
	{"n above capacity can never pass", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.PerMinute(5))
		r := allowN(t, st, "k", 6)
		if r.Allowed || r.RetryAfter != strategy.Never || r.Remaining != 5 {
			t.Fatalf("AllowN(6) of 5 = %+v, want denied with RetryAfter Never and Remaining 5", r)
		}
		if p := peek(t, st, "k"); p.Remaining != 5 {
			t.Fatalf("Peek after an impossible request = %+v, want Remaining 5", p)
		}
	}},
	{"limit 0 denies everything", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.Limit{Limit: 0, Window: time.Second})
		r := allowN(t, st, "k", 1)
		if r.Allowed || r.RetryAfter != strategy.Never {
			t.Fatalf("AllowN(1) of limit 0 = %+v, want denied, RetryAfter Never", r)
		}
	}},
	{"Peek and n=0 consume nothing", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.PerMinute(3))
		allowN(t, st, "k", 2)
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
	{"Remaining is what is then allowed", func(t *testing.T, s Subject) {
		st, clock := build(t, s, perWindow(20))
		for _, step := range []struct {
			n       int64
			advance time.Duration
		}{{5, window / 100}, {9, window * 333 / 1000}, {3, window * 501 / 1000}, {6, window * 77 / 1000}} {
			allowN(t, st, "k", step.n)
			clock.Advance(step.advance)
			p := peek(t, st, "k")
			if p.Remaining > 0 {
				if r := allowN(t, st, "k", p.Remaining+1); r.Allowed {
					t.Fatalf("Remaining %d, yet AllowN(%d) passed", p.Remaining, p.Remaining+1)
				}
				if r := allowN(t, st, "k", p.Remaining); !r.Allowed || r.Remaining != 0 {
					t.Fatalf("Remaining %d, yet AllowN(%d) = %+v", p.Remaining, p.Remaining, r)
				}
			}
		}
	}},
	{"ResetAfter brings back full capacity", func(t *testing.T, s Subject) {
		st, clock := build(t, s, perWindow(4))
		allowN(t, st, "k", 1)
		clock.Advance(window / 4)
		r := allowN(t, st, "k", 3)
		if !r.Allowed || r.ResetAfter <= 0 {
			t.Fatalf("AllowN(3) = %+v, want allowed with ResetAfter > 0", r)
		}
		clock.Advance(r.ResetAfter)
		if p := peek(t, st, "k"); p.Remaining != 4 || p.ResetAfter != 0 {
			t.Fatalf("Peek after ResetAfter %v = %+v, want Remaining 4, ResetAfter 0", r.ResetAfter, p)
		}
	}},
	{"Reset forgets the subject only", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.PerMinute(2))
		allowN(t, st, "a", 2)
		allowN(t, st, "b", 2)
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
	{"subjects with any bytes are kept apart", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.PerMinute(1))
		subjects := []string{"user:42", "user", "user:4", "42", "{user}:42", "{user:42}", "user:42}", "user#42", "user%2342", "user%23",
			"a\x00b", "a\x00", "a", "ключ", "🔑", "%7B", "{", "}", "#0", "user:42#0", " ", "\xff\xfe"}
		for _, k := range subjects {
			if r := allowN(t, st, k, 1); !r.Allowed {
				t.Fatalf("first request of subject %q denied: it shares state with another subject", k)
			}
		}
		for _, k := range subjects {
			if r := allowN(t, st, k, 1); r.Allowed {
				t.Fatalf("second request of subject %q allowed at limit 1", k)
			}
		}
	}},
	{"invalid calls return errors and touch nothing", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.PerMinute(3))
		allowN(t, st, "k", 1)
		long := string(make([]byte, strategy.MaxKeyLen+1))
		for _, c := range []struct {
			name string
			call func() error
			want error
		}{
			{"empty key", func() error { _, err := st.AllowN(ctx, "", 1); return err }, strategy.ErrInvalidKey},
			{"key too long", func() error { _, err := st.AllowN(ctx, long, 1); return err }, strategy.ErrInvalidKey},
			{"negative n", func() error { _, err := st.AllowN(ctx, "k", -1); return err }, strategy.ErrInvalidCost},
			{"huge n", func() error { _, err := st.AllowN(ctx, "k", 1<<62); return err }, strategy.ErrInvalidCost},
			{"Peek empty key", func() error { _, err := st.Peek(ctx, ""); return err }, strategy.ErrInvalidKey},
			{"Reset empty key", func() error { return st.Reset(ctx, "") }, strategy.ErrInvalidKey},
		} {
			if err := c.call(); !errors.Is(err, c.want) {
				t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			}
		}
		if p := peek(t, st, "k"); p.Remaining != 2 {
			t.Fatalf("Peek after invalid calls = %+v, want Remaining 2", p)
		}
	}},
	{"canceled context", func(t *testing.T, s Subject) {
		st, _ := build(t, s, strategy.PerMinute(3))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		// the caller's own cancellation, never a backend failure
		if _, err := st.AllowN(cctx, "k", 1); !errors.Is(err, context.Canceled) || errors.Is(err, strategy.ErrBackend) {
			t.Fatalf("AllowN with canceled ctx: err = %v, want context.Canceled, not ErrBackend", err)
		}
		if _, err := st.Peek(cctx, "k"); !errors.Is(err, context.Canceled) || errors.Is(err, strategy.ErrBackend) {
			t.Fatalf("Peek with canceled ctx: err = %v, want context.Canceled, not ErrBackend", err)
		}
		dctx, cancel2 := context.WithDeadline(ctx, time.Unix(1, 0))
		defer cancel2()
		if _, err := st.AllowN(dctx, "k", 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("AllowN with expired deadline: err = %v, want context.DeadlineExceeded", err)
		}
		if p := peek(t, st, "k"); p.Remaining != 3 {
			t.Fatalf("Peek after canceled calls = %+v, want Remaining 3", p)
		}
	}},
	{"burst is the capacity where it applies", func(t *testing.T, s Subject) {
		lim := strategy.Limit{Limit: 2, Window: time.Second, Burst: 5}
		st, _ := build(t, s, lim)
		want := int64(2)
		if s.UsesBurst {
			want = 5
		}
		if p := peek(t, st, "k"); p.Limit != want || p.Remaining != want {
			t.Fatalf("Peek with %v = %+v, want Limit and Remaining %d", lim, p, want)
		}
	}},
}

// peekN reports whether AllowN(n) would pass now, without consuming: it
// allows then, if allowed, cannot undo, so it uses a fresh check through
// Peek when n is 1 and the Remaining of Peek otherwise.
func peekN(t *testing.T, st strategy.Strategy, key string, n int64) bool {
	t.Helper()
	p := peek(t, st, key)
	if n == 1 {
		return p.Allowed
	}
	return p.Remaining >= n
}
