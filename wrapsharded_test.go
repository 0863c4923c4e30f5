package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/sharded"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// cachedCount counts the decisions the denial cache made.
type cachedCount struct{ cached, denied int }

func (c *cachedCount) Observe(_ context.Context, d ratelimit.Decision) {
	if d.Cached {
		c.cached++
	}
	if !d.Result.Allowed {
		c.denied++
	}
}

// TestWrapShardedHasNoDenyCache: a sharded strategy given to Wrap gets no
// denial cache, as Config.Shards does not: a denial says that the shards
// tried are full, and the next request may land on one with room.
func TestWrapShardedHasNoDenyCache(t *testing.T) {
	clock := strategy.ClockFunc(func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) })
	st, err := sharded.New(4, strategy.PerMinute(4), func(lim strategy.Limit) (strategy.Strategy, error) {
		return slidinglog.NewLocal(lim, strategy.WithClock(clock))
	})
	if err != nil {
		t.Fatal(err)
	}
	obs := &cachedCount{}
	l, err := ratelimit.Wrap(st, ratelimit.Config{}, ratelimit.WithDenyCache(100), ratelimit.WithClock(clock), ratelimit.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 12; i++ {
		if _, err := l.Allow(ctx, "user:42"); err != nil {
			t.Fatal(err)
		}
	}
	if obs.denied == 0 {
		t.Fatalf("no request of 12 denied under a limit of 4: the test does not reach a denial")
	}
	if obs.cached != 0 {
		t.Errorf("%d of %d denials answered by the denial cache; want 0 for a sharded strategy", obs.cached, obs.denied)
	}
}
