package compare_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/compare"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// promoteLimit is the limit of the swap measurement: 100 units a minute.
var promoteLimit = strategy.PerMinute(100)

// swapRun spends a subject's whole limit under fixed_window at 0:50 of a
// minute, with a sliding_log candidate shadowing from the start, swaps to
// sliding_log at 0:55 (promote builds the strategy that takes over), then
// asks 5 units a second until 1:49, while the units spent at 0:50 are
// still in the sliding window. It returns how many units the swapped
// limiter let through: the extra units of the swap.
//
// Twins compare inline; on Redis the candidate runs in the background and
// the test waits for each comparison, so that the candidate sees the
// requests in their order (concurrent background calls may reorder two
// requests of a subject: see the package doc).
func swapRun(t *testing.T, clock *conformance.Clock, enforced, candidate strategy.Strategy, promote func() strategy.Strategy, opts ...compare.Option) int64 {
	t.Helper()
	ctx := context.Background()
	l := must(compare.New(enforced, candidate, opts...))
	defer l.Close()
	clock.Set(epoch.Add(50 * time.Second))
	for i := range promoteLimit.Limit + 10 {
		r := must(l.AllowN(ctx, "user:42", 1))
		l.Wait()
		if r.Allowed != (i < promoteLimit.Limit) {
			t.Fatalf("request %d under fixed_window: allowed %v", i, r.Allowed)
		}
	}
	l.Wait()
	if a := l.Agreement(); a.BothAllow != uint64(promoteLimit.Limit) || a.BothDeny != 10 {
		t.Fatalf("shadowing: %+v, want %d both allow, 10 both deny", a, promoteLimit.Limit)
	}
	clock.Set(epoch.Add(55 * time.Second))
	swapped := promote()
	var extra int64
	for s := 55; s < 110; s++ {
		clock.Set(epoch.Add(time.Duration(s) * time.Second))
		for range 5 {
			if must(swapped.AllowN(ctx, "user:42", 1)).Allowed {
				extra++
			}
		}
	}
	return extra
}

// TestPromoteTwins: a subject at its limit under fixed_window, swapped to
// the sliding_log twin that shadowed it (Candidate()), gets 0 extra units
// through; swapped to a new sliding_log twin (empty state), a full limit.
func TestPromoteTwins(t *testing.T) {
	run := func(warm bool) int64 {
		clock := conformance.NewClock(epoch)
		e := must(fixedwindow.NewLocal(promoteLimit, strategy.WithClock(clock)))
		c := must(slidinglog.NewLocal(promoteLimit, strategy.WithClock(clock)))
		return swapRun(t, clock, e, c, func() strategy.Strategy {
			if warm {
				return c // the candidate object itself holds the state
			}
			return must(slidinglog.NewLocal(promoteLimit, strategy.WithClock(clock)))
		}, compare.WithInline())
	}
	warm, naive := run(true), run(false)
	t.Logf("twins, %v: warm swap %d extra units, naive swap %d", promoteLimit, warm, naive)
	if warm != 0 {
		t.Errorf("warm swap let %d extra units through, want 0", warm)
	}
	if naive <= 0 || naive > promoteLimit.Limit {
		t.Errorf("naive swap let %d extra units through, want in (0, %d]", naive, promoteLimit.Limit)
	}
}

// TestPromoteRedis: the same on a real Redis. The candidate shares the
// enforced strategy's prefix, so the sliding_log built at the promote
// (same prefix) reads the keys the candidate wrote; the naive swap is a
// sliding_log on another prefix (empty keys).
func TestPromoteRedis(t *testing.T) {
	rdb := testredis.Shared(t).Client(t)
	run := func(warm bool) int64 {
		prefix := testredis.Prefix(t)
		clock := conformance.NewClock(epoch)
		opts := []strategy.Option{strategy.WithClock(clock), strategy.WithPrefix(prefix)}
		e := must(fixedwindow.New(rdb, promoteLimit, opts...))
		c := must(slidinglog.New(rdb, promoteLimit, opts...))
		return swapRun(t, clock, e, c, func() strategy.Strategy {
			if warm {
				return must(slidinglog.New(rdb, promoteLimit, opts...))
			}
			return must(slidinglog.New(rdb, promoteLimit, strategy.WithClock(clock), strategy.WithPrefix(prefix+"new:")))
		})
	}
	warm, naive := run(true), run(false)
	t.Logf("redis, %v: warm swap %d extra units, naive swap %d", promoteLimit, warm, naive)
	if warm != 0 {
		t.Errorf("warm swap let %d extra units through, want 0", warm)
	}
	if naive <= 0 || naive > promoteLimit.Limit {
		t.Errorf("naive swap let %d extra units through, want in (0, %d]", naive, promoteLimit.Limit)
	}
}
