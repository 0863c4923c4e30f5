package multilimit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/multilimit"
	"github.com/ratekit/ratelimit/strategy"
)

func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }

var ctx = context.Background()

// multi is what both Limiter and Local offer.
type multi interface {
	strategy.Strategy
	AllowNEach(ctx context.Context, key string, n int64) (strategy.Result, []strategy.Result, error)
}

// ruleSets turn the one limit the shared suites give into the rules under
// test: each algorithm alone, and each with a looser rule of the other
// algorithm that must never change the tight rule's decisions.
var ruleSets = []struct {
	name  string
	rules func(strategy.Limit) []multilimit.Rule
}{
	{"sliding_log", func(l strategy.Limit) []multilimit.Rule {
		return []multilimit.Rule{{Algorithm: strategy.SlidingLog, Limit: l}}
	}},
	{"fixed_window", func(l strategy.Limit) []multilimit.Rule {
		return []multilimit.Rule{{Algorithm: strategy.FixedWindow, Limit: l}}
	}},
	{"sliding_log+loose_fixed_window", func(l strategy.Limit) []multilimit.Rule {
		return []multilimit.Rule{
			{Algorithm: strategy.SlidingLog, Limit: l},
			{Algorithm: strategy.FixedWindow, Limit: strategy.Limit{Limit: 20*l.Limit + 20, Window: 60 * l.Window}},
		}
	}},
	{"loose_sliding_log+fixed_window", func(l strategy.Limit) []multilimit.Rule {
		return []multilimit.Rule{
			{Algorithm: strategy.SlidingLog, Limit: strategy.Limit{Limit: 20*l.Limit + 20, Window: 60 * l.Window}},
			{Algorithm: strategy.FixedWindow, Limit: l},
		}
	}},
}

// build returns the Limiter on a backend ("miniredis", "redis" or "local")
// for rules, reading clock.
func build(t *testing.T, backend string, rules []multilimit.Rule, clock strategy.Clock) (multi, error) {
	t.Helper()
	switch backend {
	case "miniredis":
		_, rdb := conformance.Miniredis(t)
		return multilimit.New(rdb, rules, strategy.WithClock(clock))
	case "redis":
		return multilimit.New(conformance.RealRedis(t), rules, strategy.WithClock(clock), strategy.WithPrefix(testredis.Prefix(t)))
	case "local":
		return multilimit.NewLocal(rules, strategy.WithClock(clock))
	}
	t.Fatalf("unknown backend %q", backend)
	return nil, nil
}

var backendNames = []string{"miniredis", "redis", "local"}

func TestConformance(t *testing.T) {
	for _, rs := range ruleSets {
		for _, b := range backendNames {
			t.Run(rs.name+"/"+b, func(t *testing.T) {
				conformance.Run(t, conformance.Subject{ExactRetry: true, New: func(t *testing.T, lim strategy.Limit, c *conformance.Clock) (strategy.Strategy, error) {
					return build(t, b, rs.rules(lim), c)
				}})
			})
		}
	}
}

// TestDifferential holds the script to the local twin over mixes where
// either rule binds in turn.
func TestDifferential(t *testing.T) {
	for _, rs := range []struct {
		name  string
		rules func(strategy.Limit) []multilimit.Rule
	}{
		{"sliding_log+fixed_window", func(l strategy.Limit) []multilimit.Rule {
			return []multilimit.Rule{
				{Algorithm: strategy.SlidingLog, Limit: l},
				{Algorithm: strategy.FixedWindow, Limit: strategy.Limit{Limit: 2 * l.Limit, Window: 3 * l.Window}},
			}
		}},
		{"fixed_window+sliding_log", func(l strategy.Limit) []multilimit.Rule {
			return []multilimit.Rule{
				{Algorithm: strategy.FixedWindow, Limit: l},
				{Algorithm: strategy.SlidingLog, Limit: strategy.Limit{Limit: 2*l.Limit + 1, Window: 2 * l.Window}},
			}
		}},
	} {
		t.Run(rs.name, func(t *testing.T) {
			conformance.Differential(t, func(t *testing.T, lim strategy.Limit, c *conformance.Clock) (strategy.Strategy, strategy.Strategy) {
				r, err := build(t, "miniredis", rs.rules(lim), c)
				if err != nil {
					t.Fatal(err)
				}
				l, err := build(t, "local", rs.rules(lim), c)
				if err != nil {
					t.Fatal(err)
				}
				return r, l
			})
		})
	}
}

// backends runs f over the Limiter on miniredis and on a real Redis, and over
// the local twin, all on a manual clock at conformance.Epoch.
func backends(t *testing.T, rules []multilimit.Rule, f func(t *testing.T, m multi, clock *conformance.Clock)) {
	t.Helper()
	for _, b := range backendNames {
		t.Run(b, func(t *testing.T) {
			clock := conformance.NewClock(conformance.Epoch)
			m, err := build(t, b, rules, clock)
			if err != nil {
				t.Fatal(err)
			}
			f(t, m, clock)
		})
	}
}

func each(t *testing.T, m multi, key string, n int64) (strategy.Result, []strategy.Result) {
	t.Helper()
	r, rs, err := m.AllowNEach(ctx, key, n)
	if err != nil {
		t.Fatalf("AllowNEach(%q, %d): %v", key, n, err)
	}
	return r, rs
}

// TestDenialConsumesNothing: whichever rule denies, no rule records the
// request.
func TestDenialConsumesNothing(t *testing.T) {
	rules := []multilimit.Rule{
		{Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(5)},
		{Algorithm: strategy.FixedWindow, Limit: strategy.PerMinute(8)},
	}
	backends(t, rules, func(t *testing.T, m multi, clock *conformance.Clock) {
		for i := int64(1); i <= 5; i++ {
			if r, _ := each(t, m, "k", 1); !r.Allowed {
				t.Fatalf("request %d at t=0 denied: %+v", i, r)
			}
		}
		// the per-second rule denies: the per-minute quota must stay at 3
		for i := 0; i < 20; i++ {
			r, rs := each(t, m, "k", 1)
			if r.Allowed || rs[0].Allowed || !rs[1].Allowed {
				t.Fatalf("request past 5/s = %+v, rules %+v: want denied by rule 0 only", r, rs)
			}
			if rs[1].Remaining != 3 {
				t.Fatalf("per-minute Remaining after denied requests = %d, want 3: a denial ate the quota", rs[1].Remaining)
			}
			if r.RetryAfter != time.Second || r.Remaining != 0 || r.Limit != 5 {
				t.Fatalf("combined = %+v, want RetryAfter 1s, Remaining 0, Limit 5", r)
			}
		}
		clock.Advance(time.Second)
		if r, _ := each(t, m, "k", 3); !r.Allowed || r.Remaining != 0 || r.Limit != 8 {
			t.Fatalf("AllowN(3) at t=1s = %+v, want allowed, Remaining 0 of the quota's 8", r)
		}
		clock.Advance(time.Second)
		// the per-minute quota denies: the per-second log must stay empty
		for i := 0; i < 20; i++ {
			r, rs := each(t, m, "k", 1)
			if r.Allowed || !rs[0].Allowed || rs[1].Allowed {
				t.Fatalf("request past 8/min = %+v, rules %+v: want denied by rule 1 only", r, rs)
			}
			if rs[0].Remaining != 5 {
				t.Fatalf("per-second Remaining after denied requests = %d, want 5: a denial ate the rate", rs[0].Remaining)
			}
			if r.RetryAfter != 58*time.Second || r.ResetAfter != 58*time.Second {
				t.Fatalf("combined = %+v, want RetryAfter and ResetAfter 58s (to the end of the minute)", r)
			}
		}
		// both deny: RetryAfter is the larger wait
		clock.Advance(57 * time.Second) // t=59s
		for i := 0; i < 5; i++ {
			if r, _ := each(t, m, "k", 1); r.Allowed {
				t.Fatalf("request at t=59s = %+v, want denied by the quota", r)
			}
		}
		clock.Advance(time.Second) // t=60s: a new minute
		for i := 0; i < 5; i++ {
			if r, _ := each(t, m, "k", 1); !r.Allowed {
				t.Fatalf("request %d at t=60s = %+v, want allowed", i, r)
			}
		}
		r, rs := each(t, m, "k", 1)
		if r.Allowed || rs[0].Allowed || !rs[1].Allowed || r.RetryAfter != time.Second {
			t.Fatalf("6th request at t=60s = %+v, rules %+v: want denied by the rate, RetryAfter 1s", r, rs)
		}
		clock.Advance(999 * time.Millisecond) // t=60.999s: 3 of the quota left
		r, rs = each(t, m, "k", 4)
		if r.Allowed || rs[0].Allowed || rs[1].Allowed || rs[0].RetryAfter != time.Millisecond || r.RetryAfter != 59001*time.Millisecond {
			t.Fatalf("AllowN(4) at t=60.999s = %+v, rules %+v: want denied by both, rate RetryAfter 1ms, combined the quota's 59.001s", r, rs)
		}
		clock.Advance(time.Millisecond)
		if r, rs = each(t, m, "k", 3); !r.Allowed || rs[0].Remaining != 2 || rs[1].Remaining != 0 {
			t.Fatalf("AllowN(3) at t=61s = %+v, rules %+v: want allowed, rate Remaining 2, quota Remaining 0", r, rs)
		}
	})
}

func TestNeverWins(t *testing.T) {
	rules := []multilimit.Rule{
		{Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(2)},
		{Algorithm: strategy.FixedWindow, Limit: strategy.PerMinute(10)},
	}
	backends(t, rules, func(t *testing.T, m multi, clock *conformance.Clock) {
		each(t, m, "k", 2)
		r, rs := each(t, m, "k", 3) // above the rate's capacity, below the quota's
		if r.Allowed || r.RetryAfter != strategy.Never || rs[0].RetryAfter != strategy.Never || rs[1].RetryAfter != 0 {
			t.Fatalf("AllowN(3) = %+v, rules %+v: want denied, RetryAfter Never", r, rs)
		}
		if r.Remaining != 0 || r.Limit != 2 || r.ResetAfter != 60*time.Second {
			t.Fatalf("AllowN(3) = %+v: want Remaining 0, Limit 2, ResetAfter 60s", r)
		}
	})
}

// TestAtomicUnderConcurrency: many goroutines hit one subject with a tight
// short rule and a loose long one; every denial must leave the long rule
// untouched, so its count equals the allowed requests exactly. On a real
// Redis, a real 3-master Redis Cluster and the local twin.
func TestAtomicUnderConcurrency(t *testing.T) {
	const goroutines, perG, loose = 8, 100, 1 << 20
	for _, c := range []struct {
		name  string
		rules []multilimit.Rule
	}{
		{"tight sliding_log, loose fixed_window", []multilimit.Rule{
			{Algorithm: strategy.SlidingLog, Limit: strategy.Limit{Limit: 3, Window: 10 * time.Millisecond}},
			{Algorithm: strategy.FixedWindow, Limit: strategy.Limit{Limit: loose, Window: 24 * time.Hour}},
		}},
		{"tight fixed_window, loose sliding_log", []multilimit.Rule{
			{Algorithm: strategy.FixedWindow, Limit: strategy.Limit{Limit: 3, Window: 10 * time.Millisecond}},
			{Algorithm: strategy.SlidingLog, Limit: strategy.Limit{Limit: loose, Window: 24 * time.Hour}},
		}},
	} {
		// not miniredis: it runs one command at a time under one lock, so it
		// proves nothing here, and it is slow under -race
		for _, b := range []string{"redis", "cluster", "local"} {
			t.Run(c.name+"/"+b, func(t *testing.T) {
				// every call sees a later millisecond (Epoch is noon: no day
				// boundary is crossed), so the tight rule allows and denies
				// in turn while the loose one always allows
				var ms atomic.Int64
				clock := strategy.ClockFunc(func() time.Time {
					return conformance.Epoch.Add(time.Duration(ms.Add(1)) * time.Millisecond)
				})
				var m multi
				var rawCount func(key string) int64 // the loose key's units, read from Redis
				var err error
				if b == "local" {
					m, err = multilimit.NewLocal(c.rules, strategy.WithClock(clock))
				} else {
					var rdb redis.Cmdable
					opts := []strategy.Option{strategy.WithClock(clock)}
					switch b {
					case "redis":
						c := redis.NewClient(&redis.Options{Addr: testredis.Shared(t).Addr, PoolSize: goroutines})
						t.Cleanup(func() { c.Close() })
						rdb = c
						opts = append(opts, strategy.WithPrefix(testredis.Prefix(t)))
					case "cluster":
						rdb = testredis.SharedCluster(t).Client(t)
						opts = append(opts, strategy.WithPrefix(testredis.Prefix(t)))
					}
					m, err = multilimit.New(rdb, c.rules, opts...)
					rawCount = func(key string) int64 {
						if c.rules[1].Algorithm == strategy.FixedWindow {
							n, err := rdb.HGet(ctx, key, "c").Int64()
							if err != nil {
								t.Fatalf("HGET %s c: %v", key, err)
							}
							return n
						}
						// the newest member minus the base entry's count (no
						// entry leaves a 24 h window here)
						first, err1 := rdb.ZRange(ctx, key, 0, 0).Result()
						last, err2 := rdb.ZRange(ctx, key, -1, -1).Result()
						if err1 != nil || err2 != nil || len(first) != 1 || len(last) != 1 {
							t.Fatalf("ZRANGE %s: %v %v %v %v", key, first, last, err1, err2)
						}
						b, _ := strconv.ParseInt(first[0], 10, 64)
						l, _ := strconv.ParseInt(last[0], 10, 64)
						if b >= 0 {
							t.Fatalf("ZRANGE %s 0 0 = %v, want the base entry (a negative member)", key, first)
						}
						return l - (-1 - b)
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				var allowed, denied atomic.Int64
				var wg sync.WaitGroup
				for g := 0; g < goroutines; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < perG; i++ {
							r, err := m.AllowN(ctx, "hot", 1)
							if err != nil {
								t.Error(err)
								return
							}
							if r.Allowed {
								allowed.Add(1)
							} else {
								denied.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				a, d := allowed.Load(), denied.Load()
				if a == 0 || d == 0 {
					t.Fatalf("allowed %d, denied %d: want both, or the test proves nothing", a, d)
				}
				_, rs := each(t, m, "hot", 0)
				if got := loose - rs[1].Remaining; got != a {
					t.Errorf("loose rule counts %d units, want exactly the %d allowed requests (%d denied)", got, a, d)
				}
				if rawCount != nil {
					if got := rawCount(m.(*multilimit.Limiter).Keys("hot")[1]); got != a {
						t.Errorf("loose rule's key holds %d units, want exactly the %d allowed requests (%d denied)", got, a, d)
					}
				}
			})
		}
	}
}

func TestServerTime(t *testing.T) {
	mr, rdb := conformance.Miniredis(t)
	m, err := multilimit.New(rdb, []multilimit.Rule{
		{Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(1)},
		{Algorithm: strategy.FixedWindow, Limit: strategy.PerMinute(2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		at      time.Duration
		allowed bool
		retry   time.Duration
	}{
		{0, true, 0},
		{999 * time.Millisecond, false, time.Millisecond},
		{time.Second, true, 0},
		{2 * time.Second, false, 58 * time.Second},
		{time.Minute, true, 0},
	} {
		mr.SetTime(conformance.Epoch.Add(step.at))
		r, err := m.AllowN(ctx, "k", 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed != step.allowed || r.RetryAfter != step.retry {
			t.Fatalf("at +%v by the server's TIME: %+v, want Allowed %v, RetryAfter %v", step.at, r, step.allowed, step.retry)
		}
	}
}

func TestTTL(t *testing.T) {
	rules := []multilimit.Rule{
		{Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(5)},
		{Algorithm: strategy.FixedWindow, Limit: strategy.PerMinute(50)},
	}
	t.Run("miniredis", func(t *testing.T) {
		mr, rdb := conformance.Miniredis(t)
		clock := conformance.NewClock(conformance.Epoch.Add(15 * time.Second))
		m, _ := multilimit.New(rdb, rules, strategy.WithClock(clock))
		if r, _ := m.AllowN(ctx, "k", 1); !r.Allowed {
			t.Fatal("first request denied")
		}
		keys := m.Keys("k")
		if got := mr.TTL(keys[0]); got != time.Second {
			t.Errorf("TTL of the sliding log = %v, want its window 1s", got)
		}
		if got := mr.TTL(keys[1]); got != 45*time.Second {
			t.Errorf("TTL of the fixed window = %v, want 45s, to the end of the minute", got)
		}
		mr.FastForward(45 * time.Second)
		if k := mr.Keys(); len(k) != 0 {
			t.Fatalf("keys %v still exist after their TTLs", k)
		}
	})
	t.Run("redis", func(t *testing.T) {
		rdb := conformance.RealRedis(t)
		m, _ := multilimit.New(rdb, rules, strategy.WithPrefix(testredis.Prefix(t)))
		if r, _ := m.AllowN(ctx, "k", 1); !r.Allowed {
			t.Fatal("first request denied")
		}
		for i, k := range m.Keys("k") {
			if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 || ttl > rules[i].Limit.Window {
				t.Errorf("PTTL %s = %v, want in (0, %v]", k, ttl, rules[i].Limit.Window)
			}
		}
		if err := m.Reset(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if n := rdb.Exists(ctx, m.Keys("k")...).Val(); n != 0 {
			t.Fatalf("%d keys exist after Reset", n)
		}
	})
}

func TestPeekAndDenialWriteNothing(t *testing.T) {
	mr, rdb := conformance.Miniredis(t)
	m, _ := multilimit.New(rdb, []multilimit.Rule{
		{Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(5)},
		{Algorithm: strategy.FixedWindow, Limit: strategy.PerMinute(0)},
	})
	if _, err := m.Peek(ctx, "never-seen"); err != nil {
		t.Fatal(err)
	}
	if r, err := m.AllowN(ctx, "never-seen", 1); err != nil || r.Allowed {
		t.Fatalf("AllowN with a zero quota = %+v, %v: want denied", r, err)
	}
	if keys := mr.Keys(); len(keys) != 0 {
		t.Fatalf("Peek and a denial created keys %v", keys)
	}
}

func TestKeyLayout(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	m, _ := multilimit.New(rdb, []multilimit.Rule{
		{Algorithm: strategy.FixedWindow, Limit: strategy.PerHour(1000)},
		{Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(10)},
	}, strategy.WithPrefix("app:"))
	for subject, want := range map[string][]string{
		"user:42": {"app:ml:fw:3600000:{user:42}", "app:ml:sl:1000:{user:42}"},
		"{x}#1":   {"app:ml:fw:3600000:{%7Bx%7D%231}", "app:ml:sl:1000:{%7Bx%7D%231}"},
	} {
		if got := m.Keys(subject); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("Keys(%q) = %q, want %q", subject, got, want)
		}
	}
}

func TestInvalidConfig(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	ok := multilimit.Rule{Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(1)}
	many := make([]multilimit.Rule, multilimit.MaxRules+1)
	for i := range many {
		many[i] = multilimit.Rule{Algorithm: strategy.FixedWindow, Limit: strategy.Limit{Limit: 1, Window: time.Duration(i+1) * time.Second}}
	}
	for _, c := range []struct {
		name  string
		rules []multilimit.Rule
		opts  []strategy.Option
		want  []string
		is    error
	}{
		{"no rules", nil, nil, []string{"rules must not be empty"}, strategy.ErrInvalidLimit},
		{"too many rules", many, nil, []string{"at most 16 rules, got 17"}, strategy.ErrInvalidLimit},
		{"unknown algorithm", []multilimit.Rule{ok, {Algorithm: "token_bucket", Limit: strategy.PerMinute(1)}}, nil,
			[]string{"rules[1]", "Algorithm", "token_bucket"}, strategy.ErrInvalidOption},
		{"zero window", []multilimit.Rule{ok, {Algorithm: strategy.FixedWindow}}, nil, []string{"rules[1]", "Window"}, strategy.ErrInvalidLimit},
		{"negative limit", []multilimit.Rule{{Algorithm: strategy.SlidingLog, Limit: strategy.Limit{Limit: -1, Window: time.Second}}}, nil,
			[]string{"rules[0]", "Limit"}, strategy.ErrInvalidLimit},
		{"same algorithm and window", []multilimit.Rule{ok, {Algorithm: strategy.FixedWindow, Limit: strategy.PerSecond(9)}, {Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(5)}}, nil,
			[]string{"rules[2]", "rules[0]"}, strategy.ErrInvalidLimit},
		{"braces in prefix", []multilimit.Rule{ok}, []strategy.Option{strategy.WithPrefix("a{b}")}, []string{"prefix"}, strategy.ErrInvalidOption},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err1 := multilimit.New(rdb, c.rules, c.opts...)
			_, err2 := multilimit.NewLocal(c.rules, c.opts...)
			for _, err := range []error{err1, err2} {
				if !errors.Is(err, c.is) {
					t.Errorf("err = %v, want %v", err, c.is)
					continue
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("err = %v, want it to name %s", err, w)
					}
				}
			}
		})
	}
	if _, err := multilimit.New(nil, []multilimit.Rule{ok}); !errors.Is(err, strategy.ErrInvalidOption) {
		t.Errorf("New(nil client): err = %v, want ErrInvalidOption", err)
	}
}

func TestCombine(t *testing.T) {
	never := strategy.Never
	for _, c := range []struct {
		name    string
		allowed bool
		each    []strategy.Result
		want    strategy.Result
	}{
		{"allowed: smallest remaining and its limit, largest reset", true,
			[]strategy.Result{{Allowed: true, Limit: 10, Remaining: 7, ResetAfter: time.Second}, {Allowed: true, Limit: 1000, Remaining: 3, ResetAfter: time.Hour}},
			strategy.Result{Allowed: true, Limit: 1000, Remaining: 3, ResetAfter: time.Hour}},
		{"tie on remaining: the smaller limit", true,
			[]strategy.Result{{Allowed: true, Limit: 50, Remaining: 4}, {Allowed: true, Limit: 5, Remaining: 4}},
			strategy.Result{Allowed: true, Limit: 5, Remaining: 4}},
		{"denied: largest RetryAfter of the denying rules", false,
			[]strategy.Result{{Limit: 10, Remaining: 0, RetryAfter: 300 * time.Millisecond, ResetAfter: time.Second},
				{Limit: 100, Remaining: 0, RetryAfter: 20 * time.Second, ResetAfter: 30 * time.Second},
				{Allowed: true, Limit: 1000, Remaining: 900, ResetAfter: time.Hour}},
			strategy.Result{Limit: 10, Remaining: 0, RetryAfter: 20 * time.Second, ResetAfter: time.Hour}},
		{"denied: Never wins whatever its position", false,
			[]strategy.Result{{Limit: 2, Remaining: 1, RetryAfter: never}, {Limit: 100, Remaining: 0, RetryAfter: 20 * time.Second}},
			strategy.Result{Limit: 100, Remaining: 0, RetryAfter: never}},
		{"denied: Never first", false,
			[]strategy.Result{{Limit: 100, Remaining: 0, RetryAfter: 20 * time.Second}, {Limit: 2, Remaining: 2, RetryAfter: never}},
			strategy.Result{Limit: 100, Remaining: 0, RetryAfter: never}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := multilimit.Combine(c.allowed, c.each); got != c.want {
				t.Errorf("Combine(%v, %+v) = %+v, want %+v", c.allowed, c.each, got, c.want)
			}
		})
	}
}

func TestLocalDropsIdleSubjects(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	m, _ := multilimit.NewLocal([]multilimit.Rule{
		{Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(5)},
		{Algorithm: strategy.FixedWindow, Limit: strategy.PerMinute(100)},
	}, strategy.WithClock(clock))
	for i := 0; i < 1000; i++ {
		m.AllowN(ctx, "subject-"+strconv.Itoa(i), 1)
	}
	if n := m.Subjects(); n != 1000 {
		t.Fatalf("%d subjects stored after 1000 first requests, want 1000", n)
	}
	clock.Advance(2 * time.Minute)
	for i := 0; i < 5000; i++ { // touch every stripe with near certainty
		m.Peek(ctx, fmt.Sprint("peek-", i))
	}
	if n := m.Subjects(); n != 0 {
		t.Fatalf("%d subjects still stored after every window ended, want 0", n)
	}
}

// The twin holds at most WithMaxSubjects subjects, evicting (and counting)
// the least recently used, like every other twin.
func TestLocalBoundsSubjects(t *testing.T) {
	const bound, subjects = 256, 5000
	var evicted atomic.Int64
	m, err := multilimit.NewLocal([]multilimit.Rule{
		{Algorithm: strategy.SlidingLog, Limit: strategy.PerHour(5)},
		{Algorithm: strategy.FixedWindow, Limit: strategy.PerHour(100)},
	}, strategy.WithClock(conformance.NewClock(conformance.Epoch)),
		strategy.WithMaxSubjects(bound), strategy.WithOnEvict(func() { evicted.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	for i := range subjects {
		if _, err := m.AllowN(ctx, "subject-"+strconv.Itoa(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	n := m.Subjects()
	if n > bound {
		t.Errorf("%d subjects held after %d first requests, want at most the bound %d", n, subjects, bound)
	}
	if got := evicted.Load(); got != int64(subjects-n) {
		t.Errorf("%d evictions counted, want %d (subjects %d - held %d)", got, subjects-n, subjects, n)
	}
}

// TestCluster runs the conformance suite over a mix of rules on a real
// 3-master Redis Cluster (a CROSSSLOT error fails it), and checks that the
// keys of one subject live on one master while subjects spread over several.
func TestCluster(t *testing.T) {
	cluster := testredis.SharedCluster(t)
	cc := cluster.Client(t)
	t.Run("conformance", func(t *testing.T) {
		conformance.Run(t, conformance.Subject{ExactRetry: true, New: func(t *testing.T, lim strategy.Limit, c *conformance.Clock) (strategy.Strategy, error) {
			return multilimit.New(cc, ruleSets[2].rules(lim), strategy.WithClock(c), strategy.WithPrefix(testredis.Prefix(t)))
		}})
	})
	t.Run("one subject, one slot", func(t *testing.T) {
		prefix := testredis.Prefix(t)
		m, err := multilimit.New(cc, []multilimit.Rule{
			{Algorithm: strategy.SlidingLog, Limit: strategy.PerMinute(10)},
			{Algorithm: strategy.FixedWindow, Limit: strategy.Limit{Limit: 1000, Window: 24 * time.Hour}},
			{Algorithm: strategy.SlidingLog, Limit: strategy.PerHour(100)},
		}, strategy.WithPrefix(prefix), strategy.WithClock(strategy.ClockFunc(func() time.Time { return conformance.Epoch })))
		// long windows and a clock at noon: no key expires during the test
		if err != nil {
			t.Fatal(err)
		}
		const subjects = 30
		for i := 0; i < subjects; i++ {
			if r, err := m.AllowN(ctx, fmt.Sprint("user:", i), 1); err != nil || !r.Allowed {
				t.Fatalf("first request of user:%d = %+v, %v", i, r, err)
			}
		}
		var masters []*redis.Client
		for _, n := range cluster.Nodes {
			masters = append(masters, n.Client(t))
		}
		nodes := map[int]bool{}
		for i := 0; i < subjects; i++ {
			keys := m.Keys(fmt.Sprint("user:", i))
			node := -1
			for _, k := range keys {
				where := -1
				for j, c := range masters {
					if c.Exists(ctx, k).Val() == 1 {
						where = j
					}
				}
				if where < 0 {
					t.Fatalf("key %s is on no master", k)
				}
				if node >= 0 && where != node {
					t.Fatalf("keys %q of one subject are on masters %d and %d", keys, node, where)
				}
				node = where
			}
			nodes[node] = true
		}
		if len(nodes) < 2 {
			t.Fatalf("%d subjects all landed on one master: subjects must not share a hash tag", subjects)
		}
	})
}
