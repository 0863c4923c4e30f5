package conformance

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// SlidingLogModel is the sliding log's decision by its definition, in the
// plainest form: a list of the allowed requests, each with the time it was
// recorded at. It is the model every sliding log (package slidinglog, the
// sliding-log rules of multilimit, and any compact exact algorithm making
// the same decisions) is held to, a clock that steps back included:
//
//   - a unit recorded at t counts at now while now - t < Window;
//   - an allowed request of n > 0 units first drops the requests recorded
//     at or before now - Window (they never count again, even if the clock
//     then steps back), then records its units at max(now, the newest
//     recorded time), so recording times never decrease;
//   - denied requests, Peek and n = 0 change nothing;
//   - RetryAfter is the time, from now, until the request holding the k-th
//     oldest counted unit stops counting, k = count + max(n, 1) - Limit
//     (strategy.Never when max(n, 1) > Limit); ResetAfter the time until
//     the newest counted unit stops counting (0 when none counts).
//
// With a clock that never steps back this is the window (now - Window, now].
// Once the clock has reached Window after the newest recorded time, nothing
// counts and a backend may forget the subject at any moment (a Redis TTL,
// a twin's store): Expired reports it, and SlidingLogClockSteps then resets
// the subject in the backend and the model alike.
// The zero value is not usable; set Limit.
type SlidingLogModel struct {
	Limit strategy.Limit
	log   []modelRec
}

type modelRec struct{ at, n int64 }

// Reset forgets every recorded request.
func (m *SlidingLogModel) Reset() { m.log = nil }

// Expired reports whether a clock that has read latest (Unix ms, the
// latest reading so far) has reached Window after the newest recorded time.
func (m *SlidingLogModel) Expired(latest int64) bool {
	return len(m.log) > 0 && latest >= m.log[len(m.log)-1].at+m.Limit.Window.Milliseconds()
}

// AllowN decides n units (0: Peek) at now (Unix ms) and records them when
// allowed.
func (m *SlidingLogModel) AllowN(now, n int64) strategy.Result {
	w, limit := m.Limit.Window.Milliseconds(), m.Limit.Limit
	floor := now - w
	var count int64
	for _, r := range m.log {
		if r.at > floor {
			count += r.n
		}
	}
	want := max(n, 1)
	res := strategy.Result{Limit: limit, Remaining: max(limit-count, 0)}
	if count > 0 {
		res.ResetAfter = time.Duration(m.log[len(m.log)-1].at+w-now) * time.Millisecond
	}
	switch {
	case want > limit:
		res.RetryAfter = strategy.Never
	case count+want <= limit:
		res.Allowed = true
		if n > 0 {
			kept := m.log[:0]
			for _, r := range m.log {
				if r.at > floor {
					kept = append(kept, r)
				}
			}
			at := now
			if len(kept) > 0 {
				at = max(at, kept[len(kept)-1].at)
			}
			m.log = append(kept, modelRec{at: at, n: n})
			res.Remaining = limit - count - n
			res.ResetAfter = time.Duration(at+w-now) * time.Millisecond
		}
	default:
		k := count + want - limit
		for _, r := range m.log {
			if r.at <= floor {
				continue
			}
			if k -= r.n; k <= 0 {
				res.RetryAfter = time.Duration(r.at+w-now) * time.Millisecond
				break
			}
		}
	}
	return res
}

// SlidingLogClockSteps drives the strategy that build makes (it must read
// clock) with random requests while the clock moves forward and back (by
// up to two windows), and holds every Result to SlidingLogModel. The seed
// is printed on failure; RATELIMIT_DIFF_SEED replays one,
// RATELIMIT_DIFF_OPS sets the number of operations per limit (default 400).
func SlidingLogClockSteps(t *testing.T, build func(t *testing.T, lim strategy.Limit, clock *Clock) strategy.Strategy) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RATELIMIT_DIFF_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	ops := 400
	if s := os.Getenv("RATELIMIT_DIFF_OPS"); s != "" {
		ops, _ = strconv.Atoi(s)
	}
	for _, lim := range []strategy.Limit{
		{Limit: 1, Window: time.Minute},
		{Limit: 5, Window: 90 * time.Second},
		{Limit: 40, Window: time.Minute},
	} {
		t.Run(lim.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			clock := NewClock(Epoch.Add(time.Duration(rng.IntN(1000)) * time.Millisecond))
			st := build(t, lim, clock)
			subjects := []string{"a", "user:{42}"}
			models := make([]SlidingLogModel, len(subjects))
			for i := range models {
				models[i].Limit = lim
			}
			w := lim.Window.Milliseconds()
			// latest[i]: the latest clock reading since subject i last
			// recorded, from which its state may have been forgotten
			latest := make([]int64, len(subjects))
			for i := 0; i < ops; i++ {
				switch d := rng.IntN(10); {
				case d < 4:
					clock.Advance(time.Duration(rng.Int64N(w/5+1)) * time.Millisecond)
				case d < 5:
					clock.Advance(time.Duration(rng.Int64N(2*w)) * time.Millisecond)
				case d < 7: // the clock steps back
					clock.Advance(-time.Duration(rng.Int64N(w/2+1)) * time.Millisecond)
				case d < 8:
					clock.Advance(-time.Duration(rng.Int64N(2*w)) * time.Millisecond)
				}
				j := rng.IntN(len(subjects))
				key, now := subjects[j], clock.Now().UnixMilli()
				for i, m := range models {
					if latest[i] = max(latest[i], now); m.Expired(latest[i]) {
						if err := st.Reset(ctx, subjects[i]); err != nil {
							t.Fatal(err)
						}
						models[i].Reset()
					}
				}
				var what string
				var got, want strategy.Result
				var err error
				switch op := rng.IntN(30); {
				case op == 0:
					what = "Reset"
					err = st.Reset(ctx, key)
					models[j].Reset()
				case op < 5:
					what = "Peek"
					got, err = st.Peek(ctx, key)
					want = models[j].AllowN(now, 0)
				default:
					n := rng.Int64N(min(lim.Limit, 10)) + 1
					if rng.IntN(8) == 0 {
						n = rng.Int64N(lim.Limit + 2)
					}
					what = fmt.Sprintf("AllowN(%d)", n)
					got, err = st.AllowN(ctx, key, n)
					if want = models[j].AllowN(now, n); want.Allowed && n > 0 {
						latest[j] = now
					}
				}
				if err != nil {
					t.Fatalf("seed %d, op %d %s(%q): %v", seed, i, what, key, err)
				}
				if got != want {
					t.Fatalf("seed %d, op %d at %s: %s(%q):\n got  %+v\n want %+v (model log %v)",
						seed, i, clock.Now().Format("15:04:05.000"), what, key, got, want, models[j].log)
				}
			}
		})
	}
}

// SlidingLogClockStepsBackends runs SlidingLogClockSteps over an exact
// sliding log's Redis strategy, on miniredis and on the real Redis, and
// over its local twin.
func SlidingLogClockStepsBackends[R, L strategy.Strategy](t *testing.T, newRedis NewRedis[R], newLocal NewLocal[L]) {
	t.Helper()
	for _, b := range []string{"miniredis", "redis", "local"} {
		t.Run(b, func(t *testing.T) {
			SlidingLogClockSteps(t, func(t *testing.T, lim strategy.Limit, clock *Clock) strategy.Strategy {
				var st strategy.Strategy
				var err error
				switch b {
				case "miniredis":
					_, rdb := Miniredis(t)
					st, err = newRedis(rdb, lim, strategy.WithClock(clock))
				case "redis":
					st, err = newRedis(RealRedis(t), lim, strategy.WithClock(clock), strategy.WithPrefix(testredis.Prefix(t)))
				default:
					st, err = newLocal(lim, strategy.WithClock(clock))
				}
				if err != nil {
					t.Fatal(err)
				}
				return st
			})
		})
	}
}
