package compactlog_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/sharded"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// extraLimits give every entry width a turn: 1 byte (windows up to 256 ms),
// 3 (up to 4.6 h) and 6 (the longest windows), and the largest Limit.
var extraLimits = []strategy.Limit{
	{Limit: 3, Window: 200 * time.Millisecond},
	{Limit: 40, Window: 256 * time.Millisecond},
	{Limit: 50, Window: 2 * time.Hour},
	{Limit: 9, Window: 50 * 365 * 24 * time.Hour}, // 3 windows still fit in a time.Duration
	{Limit: compactlog.MaxLimit, Window: 90 * time.Second},
}

// newRanges is New with the value read and written by ranges whatever the
// limit (the path of limits above about 500).
var newRanges = compactlog.NewRanges

func TestDifferential(t *testing.T) {
	t.Run("whole", func(t *testing.T) {
		conformance.DifferentialOf(t, compactlog.New, compactlog.NewLocal, extraLimits...)
	})
	t.Run("ranges", func(t *testing.T) {
		conformance.DifferentialOf(t, newRanges, compactlog.NewLocal, extraLimits...)
	})
}

// TestDifferentialRanges holds the script's path of ranges to its local
// twin (TestSpec holds the other).
func TestDifferentialRanges(t *testing.T) {
	conformance.DifferentialOf(t, newRanges, compactlog.NewLocal, extraLimits...)
}

// TestShardedConformance runs the sharded cases of the suite over the
// compact log spread over 3 keys, on a real Redis and as local twins.
func TestShardedConformance(t *testing.T) {
	for _, name := range []string{"redis", "local"} {
		t.Run(name, func(t *testing.T) {
			conformance.Run(t, conformance.Subject{ExactRetry: true, Shards: 3, New: func(t *testing.T, lim strategy.Limit, c *conformance.Clock) (strategy.Strategy, error) {
				if name == "local" {
					return sharded.New(3, lim, func(l strategy.Limit) (strategy.Strategy, error) {
						return compactlog.NewLocal(l, strategy.WithClock(c))
					}, sharded.WithProbes(3))
				}
				rdb, prefix := conformance.RealRedis(t), testredis.Prefix(t)
				return sharded.New(3, lim, func(l strategy.Limit) (strategy.Strategy, error) {
					return compactlog.New(rdb, l, strategy.WithClock(c), strategy.WithPrefix(prefix))
				}, sharded.WithProbes(3))
			}})
		})
	}
}

func TestConformanceRanges(t *testing.T) {
	conformance.RunBackends(t, conformance.Subject{ExactRetry: true}, newRanges, compactlog.NewLocal)
}

// TestSameDecisionsAsSlidingLog drives the compact log and the sliding log
// with the same random schedules, on miniredis, on a real Redis and as
// local twins, and wants every Result identical, field by field.
func TestSameDecisionsAsSlidingLog(t *testing.T) {
	conformance.Equivalent(t, compactlog.New, compactlog.NewLocal, slidinglog.New, slidinglog.NewLocal, extraLimits...)
	t.Run("ranges", func(t *testing.T) {
		conformance.Equivalent(t, newRanges, compactlog.NewLocal, slidinglog.New, slidinglog.NewLocal, extraLimits...)
	})
}

// model is the decided semantics of an exact sliding log, written
// independently of the implementation: a unit recorded at t counts while
// now - t < W; an allowed request with n > 0 first forgets the units at or
// before now - W (denials change nothing); units are recorded at max(now,
// the newest unit kept), so a clock that steps back never records a unit
// before an older one; RetryAfter and ResetAfter are measured from now.
type model struct {
	units map[string][]int64
	// expire: a subject is forgotten when a call comes once its newest
	// unit has left the window, as the local twin forgets it (a Redis key
	// expires then too, but by the server's own clock).
	expire bool
}

func (m *model) allowN(lim strategy.Limit, key string, now, n int64) strategy.Result {
	limit, w := lim.Limit, lim.Window.Milliseconds()
	floor := now - w
	if m.expire && len(m.units[key]) > 0 && slices.Max(m.units[key]) <= floor {
		m.units[key] = nil
	}
	var live []int64
	for _, t := range m.units[key] {
		if t > floor {
			live = append(live, t)
		}
	}
	slices.Sort(live)
	count := int64(len(live))
	want := max(n, 1)
	r := strategy.Result{Limit: limit, Remaining: max(limit-count, 0)}
	if count > 0 {
		r.ResetAfter = time.Duration(live[count-1]+w-now) * time.Millisecond
	}
	switch {
	case want > limit:
		r.RetryAfter = strategy.Never
	case count+want <= limit:
		r.Allowed = true
		r.Remaining = limit - count - n
		if n > 0 {
			m.units[key] = slices.DeleteFunc(m.units[key], func(t int64) bool { return t <= floor })
			at := now
			for _, t := range m.units[key] {
				at = max(at, t)
			}
			for range n {
				m.units[key] = append(m.units[key], at)
			}
			r.ResetAfter = time.Duration(at+w-now) * time.Millisecond
		}
	default:
		r.RetryAfter = time.Duration(live[count+want-limit-1]+w-now) * time.Millisecond
	}
	return r
}

// TestClockStepBack drives the compact log with a clock that jumps back as
// well as forward, by up to three windows, and wants every Result to be the
// model's. With the server's TIME on miniredis too. Keys never expire
// during the test on Redis (miniredis's TTLs do not run, the real Redis
// has windows of a minute), while the local twin forgets a subject once
// its newest unit left the window, so the model does for it; the Redis
// script's TTL is tested in TestSpec and TestTTLAfterEviction.
func TestClockStepBack(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RATELIMIT_DIFF_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	limits := []strategy.Limit{
		{Limit: 4, Window: 200 * time.Millisecond}, // 1 byte per unit: a step back of 256 ms widens
		{Limit: 10, Window: 1500 * time.Millisecond},
		{Limit: 60, Window: time.Minute},
	}
	for _, name := range []string{"miniredis", "miniredis-ranges", "miniredis-time", "redis", "local"} {
		for _, lim := range limits {
			if name == "redis" && lim.Window < time.Minute {
				continue // keys expire in real time there
			}
			t.Run(name+"/"+lim.String(), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				clock := conformance.NewClock(conformance.Epoch)
				var st strategy.Strategy
				var err error
				var mr *miniredis.Miniredis
				switch name {
				case "miniredis":
					var rdb *redis.Client
					_, rdb = conformance.Miniredis(t)
					st, err = compactlog.New(rdb, lim, strategy.WithClock(clock))
				case "miniredis-ranges":
					_, rdb := conformance.Miniredis(t)
					st, err = newRanges(rdb, lim, strategy.WithClock(clock))
				case "miniredis-time":
					var rdb *redis.Client
					mr, rdb = conformance.Miniredis(t)
					mr.SetTime(clock.Now())
					st, err = compactlog.New(rdb, lim)
				case "redis":
					st, err = compactlog.New(conformance.RealRedis(t), lim, strategy.WithClock(clock), strategy.WithPrefix(testredis.Prefix(t)))
				case "local":
					st, err = compactlog.NewLocal(lim, strategy.WithClock(clock))
				}
				if err != nil {
					t.Fatal(err)
				}
				w := lim.Window.Milliseconds()
				m := &model{units: map[string][]int64{}, expire: name == "local"}
				keys := []string{"a", "b"}
				if name == "local" {
					keys = keys[:1] // the twin's sweep may forget "b" while "a" is called
				}
				for i := range 600 {
					switch d := rng.IntN(10); {
					case d < 4:
						clock.Advance(time.Duration(rng.Int64N(w/4+1)) * time.Millisecond)
					case d < 5:
						clock.Advance(-time.Duration(rng.Int64N(3*w+1)) * time.Millisecond)
					case d < 6:
						clock.Advance(time.Duration(rng.Int64N(3*w+1)) * time.Millisecond)
					}
					if mr != nil {
						mr.SetTime(clock.Now())
					}
					key := keys[rng.IntN(len(keys))]
					n := rng.Int64N(min(lim.Limit, 8)+2) + int64(rng.IntN(2))
					if rng.IntN(5) == 0 {
						n = 0
					}
					now := clock.Now().UnixMilli()
					got, err := st.AllowN(ctx, key, n)
					if err != nil {
						t.Fatalf("seed %d, op %d: %v", seed, i, err)
					}
					if want := m.allowN(lim, key, now, n); got != want {
						t.Fatalf("seed %d, op %d at %s: AllowN(%q, %d):\n got  %+v\n want %+v (units %v)",
							seed, i, clock.Now().Format("15:04:05.000"), key, n, got, want, m.units[key])
					}
				}
			})
		}
	}
}

// TestLimitAndWindowChange switches a subject's Limit and Window between
// decisions, as a redeployed configuration does, and wants the sliding
// log's decisions for the same sequence: stored state of another capacity
// or entry width is used exactly.
func TestLimitAndWindowChange(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RATELIMIT_DIFF_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	limits := []strategy.Limit{
		{Limit: 3, Window: 200 * time.Millisecond},
		{Limit: 12, Window: 2 * time.Second},
		{Limit: 7, Window: time.Second},
		{Limit: 30, Window: 300 * time.Millisecond},
	}
	for _, name := range []string{"miniredis", "miniredis-ranges", "redis"} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 5))
			clock := conformance.NewClock(conformance.Epoch)
			var rdb redis.Scripter
			opts := []strategy.Option{strategy.WithClock(clock)}
			scale := time.Duration(1)
			if name != "redis" {
				_, rdb = conformance.Miniredis(t)
			} else {
				// TTLs run in real time there: windows and clock 1000 times
				// as long, so no key expires during the test
				scale = 1000
				rdb = conformance.RealRedis(t)
				opts = []strategy.Option{strategy.WithClock(conformance.Scaled(clock, int64(scale))), strategy.WithPrefix(testredis.Prefix(t))}
			}
			var compact, sliding []strategy.Strategy
			for _, lim := range limits {
				lim.Window *= scale
				newCompact := compactlog.New
				if name == "miniredis-ranges" {
					newCompact = compactlog.NewRanges
				}
				c, err := newCompact(rdb, lim, opts...)
				if err != nil {
					t.Fatal(err)
				}
				s, err := slidinglog.New(rdb, lim, opts...)
				if err != nil {
					t.Fatal(err)
				}
				compact, sliding = append(compact, c), append(sliding, s)
			}
			for i := range 800 {
				if rng.IntN(2) == 0 {
					clock.Advance(time.Duration(rng.IntN(150)) * time.Millisecond)
				}
				j := rng.IntN(len(limits))
				n := rng.Int64N(6)
				got, err := compact[j].AllowN(ctx, "k", n)
				if err != nil {
					t.Fatal(err)
				}
				want, err := sliding[j].AllowN(ctx, "k", n)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("seed %d, op %d, %v AllowN(%d):\n compact %+v\n sliding %+v", seed, i, limits[j], n, got, want)
				}
			}
		})
	}
}

// TestWidth: the entry width is the fewest bytes that hold a window. The
// entries of one window never span more than it, even when the clock steps
// back (a unit is then recorded at the newest's time); after a Window
// change and a step back they can, and the stored width grows to hold them
// exactly, then shrinks back once they have left.
func TestWidth(t *testing.T) {
	for _, c := range []struct {
		ms   int64
		want int64
	}{{1, 1}, {256, 1}, {257, 2}, {60000, 2}, {65536, 2}, {65537, 3}, {3600000, 3}, {86400000, 4}, {strategy.MaxWindow.Milliseconds(), 6}} {
		if got := compactlog.Width(c.ms); got != c.want {
			t.Errorf("Width(%d) = %d, want %d", c.ms, got, c.want)
		}
	}
	mr, rdb := conformance.Miniredis(t)
	clock := conformance.NewClock(conformance.Epoch)
	at := func(ms int64) { clock.Set(conformance.Epoch.Add(time.Duration(ms) * time.Millisecond)) }
	long, short := strategy.Limit{Limit: 5, Window: 10 * time.Second}, strategy.Limit{Limit: 5, Window: 200 * time.Millisecond}
	lims := []strategy.Limit{long, short}
	var compact [2]strategy.Strategy
	for i, lim := range lims {
		var err error
		if compact[i], err = compactlog.New(rdb, lim, strategy.WithClock(clock)); err != nil {
			t.Fatal(err)
		}
	}
	m := &model{units: map[string][]int64{}}
	key := compact[0].(*compactlog.Limiter).Key("k")
	step := func(ms int64, i int, n int64, wantWidth byte) {
		t.Helper()
		at(ms)
		got, err := compact[i].AllowN(ctx, "k", n)
		if err != nil {
			t.Fatal(err)
		}
		if want := m.allowN(lims[i], "k", clock.Now().UnixMilli(), n); got != want {
			t.Fatalf("at %d ms, %v, AllowN(%d): %+v, want %+v", ms, lims[i], n, got, want)
		}
		v, err := mr.Get(key)
		if err != nil {
			t.Fatal(err)
		}
		if v[0] != wantWidth {
			t.Fatalf("at %d ms: stored width %d, want %d", ms, v[0], wantWidth)
		}
	}
	step(800, 0, 1, 2)  // the 10 s window: 2 bytes
	step(1100, 0, 1, 2) // units at 800 and 1100
	step(700, 1, 1, 2)  // the 200 ms window, the clock back: both count, one more at 1100; 300 ms apart need 2 bytes
	step(700, 1, 0, 2)  // Peek reads them exactly
	step(1000, 1, 0, 2) // 800 has left
	step(1000, 1, 1, 1) // 800 forgotten: the rest fit in 1 byte
	step(1250, 1, 1, 1)
	step(1250, 0, 0, 1) // the 10 s window reads the 1-byte entries
	step(1300, 0, 1, 2) // 200 ms apart: 2 bytes again under the 10 s window
}

// TestFacade: Config and policy JSON accept "compact_log".
func TestFacade(t *testing.T) {
	var p ratelimit.Policies
	if err := json.Unmarshal([]byte(`{"login": {"algorithm": "compact_log", "limit": 2, "window": "1m"}}`), &p); err != nil {
		t.Fatal(err)
	}
	mr, rdb := conformance.Miniredis(t)
	set, err := ratelimit.NewSet(rdb, p)
	if err != nil {
		t.Fatal(err)
	}
	l, err := set.Get("login")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		if r, err := l.Allow(ctx, "u"); err != nil || r.Allowed != want {
			t.Fatalf("request %d: %+v, %v; want Allowed %v", i+1, r, err, want)
		}
	}
	// the compact log decided: its key, under the policy's namespace
	cl, err := compactlog.New(rdb, strategy.Limit{Limit: 2, Window: time.Minute}, strategy.WithPrefix("rl:login:"))
	if err != nil {
		t.Fatal(err)
	}
	if keys := mr.Keys(); len(keys) != 1 || keys[0] != cl.Key("u") {
		t.Fatalf("keys %q, want the compact log's %q", keys, cl.Key("u"))
	}
}

// TestMalformedState: a foreign value under the key is a backend error,
// never a wrong decision.
func TestMalformedState(t *testing.T) {
	mr, rdb := conformance.Miniredis(t)
	st, _ := compactlog.New(rdb, strategy.PerMinute(5))
	for _, v := range []string{"x", "\x00abcdefghijklm", "\x03abcdef12", "\x02abcdef\x00\x00\x00\x00\x00\x05"} {
		mr.Set(st.Key("k"), v)
		if _, err := st.AllowN(ctx, "k", 1); !errors.Is(err, strategy.ErrBackend) {
			t.Errorf("value %q: err = %v, want ErrBackend", v, err)
		}
	}
}

// TestSpec runs the checks every algorithm shares with the compact log's
// numbers. Memory: one full subject (Limit requests of one unit spread
// over the window, the sorted set's worst case of one entry per unit) at
// limits 100, 1,000 and 10,000 per minute stays within 8 bytes per unit,
// and under what the sliding log holds for the same requests.
func TestSpec(t *testing.T) {
	var memory []conformance.Memory
	for _, limit := range []int64{100, 1000, 10000} {
		memory = append(memory, conformance.Memory{
			Lim: strategy.PerMinute(limit), Subject: "u12345", Requests: int(limit), Cost: 1,
			Step: max(time.Minute*998/1000/time.Duration(limit), time.Millisecond), MaxBytes: 8 * limit,
		})
	}
	s := conformance.ExactLogSpec(compactlog.New, compactlog.NewLocal, "cl", memory...)
	s.Differential = extraLimits
	s.Allocs = strategy.Limit{Limit: compactlog.MaxLimit, Window: time.Hour}
	s.Invalid = []conformance.ConfigCase{
		{Name: "limit above MaxLimit", Lim: strategy.Limit{Limit: compactlog.MaxLimit + 1, Window: time.Second}, Field: "Limit"},
	}
	s.Accepted = []strategy.Limit{{Limit: compactlog.MaxLimit, Window: time.Second}}
	s.OnMemory = func(t *testing.T, rdb *redis.Client, m conformance.Memory, ours int64) {
		sliding, _ := conformance.MemoryOf(t, rdb, slidinglog.New, m)
		t.Logf("%v: compact log %d bytes (%.2f per unit), sliding log %d (%.2f)", m.Lim, ours, float64(ours)/float64(m.Lim.Limit), sliding, float64(sliding)/float64(m.Lim.Limit))
		if ours >= sliding {
			t.Errorf("%v: compact log %d bytes, sliding log %d: want less", m.Lim, ours, sliding)
		}
	}
	conformance.RunSpec(t, s)
}

// TestTTLAfterEviction: an eviction made by a denied request keeps the
// key's expiry, when the newest unit leaves the window.
func TestTTLAfterEviction(t *testing.T) {
	mr, rdb := conformance.Miniredis(t)
	clock := conformance.NewClock(conformance.Epoch)
	st, _ := compactlog.New(rdb, strategy.Limit{Limit: 2, Window: time.Minute}, strategy.WithClock(clock))
	st.AllowN(ctx, "k", 1)
	clock.Advance(30 * time.Second)
	mr.FastForward(30 * time.Second)
	st.AllowN(ctx, "k", 1)
	clock.Advance(31 * time.Second)
	mr.FastForward(31 * time.Second)
	// the first unit left; a denied request of 3 evicts it, and the key
	// still expires when the second unit leaves, in 29 s
	if r, _ := st.AllowN(ctx, "k", 3); r.Allowed {
		t.Fatalf("AllowN(3) of 2 = %+v, want denied", r)
	}
	if ttl := mr.TTL(st.Key("k")); ttl != 29*time.Second {
		t.Fatalf("TTL after the eviction = %v, want 29s", ttl)
	}
	mr.FastForward(29 * time.Second)
	if mr.Exists(st.Key("k")) {
		t.Fatal("key still exists after its TTL")
	}
}

// TestFacadeRejectsAboveMaxLimit: the facade's error for a Limit above
// MaxLimit names the limit and MaxLimit.
func TestFacadeRejectsAboveMaxLimit(t *testing.T) {
	_, err := ratelimit.New(nil, ratelimit.Config{Algorithm: ratelimit.CompactLog, Limit: compactlog.MaxLimit + 1, Window: time.Second})
	if !errors.Is(err, strategy.ErrInvalidLimit) || !strings.Contains(err.Error(), "Limit must be <= 10000") {
		t.Errorf("facade with Limit above MaxLimit: err = %v, want ErrInvalidLimit naming Limit and MaxLimit", err)
	}
}
