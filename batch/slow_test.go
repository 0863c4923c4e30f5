package batch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/testredis"
)

// TestSlowPipelineFailsOnlyWhatItMust: on a client with
// ContextTimeoutEnabled and a ReadTimeout (200ms) shorter than its
// callers' deadlines (5s), a call that Redis answers after 300ms, and a
// pipeline answered after 600ms, fail none of their callers: each waits
// until its own deadline, not the client's ReadTimeout. A caller whose
// own deadline comes first leaves at it, with context.DeadlineExceeded.
func TestSlowPipelineFailsOnlyWhatItMust(t *testing.T) {
	s := testredis.Start(t)
	raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { raw.Close() })
	rdb := newClient(t, raw, batch.WithMaxInFlight(1))
	ctx := context.Background()
	for _, sc := range []*redis.Script{slow, echo} {
		if err := sc.Load(ctx, raw).Err(); err != nil {
			t.Fatal(err)
		}
	}
	call := func(timeout time.Duration, f func(context.Context) error) <-chan error {
		ch := make(chan error, 1)
		go func() {
			c, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			ch <- f(c)
		}()
		return ch
	}
	// the lone call, slower than ReadTimeout, holds the only slot
	lone := call(5*time.Second, func(c context.Context) error { return slow.Run(c, rdb, []string{"lone"}, 300).Err() })
	waitSlow(t, s.Addr)
	// queued behind it, one pipeline: a slow call and 16 quick ones
	var queued []<-chan error
	queued = append(queued, call(5*time.Second, func(c context.Context) error { return slow.Run(c, rdb, []string{"piped"}, 600).Err() }))
	for range 16 {
		queued = append(queued, call(5*time.Second, func(c context.Context) error { return echo.Run(c, rdb, []string{"quick"}, "x").Err() }))
	}
	hasty := call(250*time.Millisecond, func(c context.Context) error { return echo.Run(c, rdb, []string{"hasty"}, "x").Err() })
	if err := <-lone; err != nil {
		t.Errorf("the lone call, 300ms on Redis, deadline 5s: %v; want its reply", err)
	}
	failed := 0
	for _, ch := range queued {
		if err := <-ch; err != nil {
			failed++
			t.Logf("a caller of the slow pipeline: %v", err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of the 17 callers of a pipeline answered after 600ms failed, deadline 5s, ReadTimeout 200ms; want none", failed)
	}
	if err := <-hasty; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a caller whose deadline (250ms) came first: %v; want context.DeadlineExceeded", err)
	}
}
