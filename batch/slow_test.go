package batch_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/testredis"
)

// TestSlowPipeline: what a pipeline that Redis answers after 600ms does
// to its 17 callers, whose deadline is 5s. With the client's ReadTimeout
// at least that deadline (docs/batching.md), none fails: the deadline
// decides. With a ReadTimeout of 200ms, go-redis gives up on the whole
// pipeline then: every caller fails with a network timeout (its call may
// have run), none with a reply that is not its own. With the long
// ReadTimeout, a caller whose own deadline (250ms) comes first leaves at
// it; with the short one, the pipeline's failure may come first.
func TestSlowPipeline(t *testing.T) {
	for _, c := range []struct {
		name string
		read time.Duration
		fail bool
	}{{"ReadTimeout=10s", 10 * time.Second, false}, {"ReadTimeout=200ms", 200 * time.Millisecond, true}} {
		t.Run(c.name, func(t *testing.T) {
			s := testredis.Start(t)
			raw := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, ReadTimeout: c.read, MaxRetries: -1})
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
			// a lone call holds the only slot while the pipeline queues
			lone := call(5*time.Second, func(c context.Context) error { return slow.Run(c, rdb, []string{"lone"}, 100).Err() })
			waitSlow(t, s.Addr)
			var queued []<-chan error
			queued = append(queued, call(5*time.Second, func(c context.Context) error { return slow.Run(c, rdb, []string{"piped"}, 600).Err() }))
			for range 16 {
				queued = append(queued, call(5*time.Second, func(c context.Context) error { return echo.Run(c, rdb, []string{"quick"}, "x").Err() }))
			}
			hasty := call(250*time.Millisecond, func(c context.Context) error { return echo.Run(c, rdb, []string{"hasty"}, "x").Err() })
			if err := <-lone; err != nil {
				t.Fatalf("the lone call (100ms on Redis): %v", err)
			}
			failed := 0
			for _, ch := range queued {
				err := <-ch
				var ne net.Error
				switch {
				case err == nil:
				case errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, context.DeadlineExceeded):
					failed++
				default:
					t.Errorf("a caller of the slow pipeline: %v; want its reply or a network timeout", err)
				}
			}
			if want := map[bool]int{false: 0, true: 17}[c.fail]; failed != want {
				t.Errorf("%d of the 17 callers failed at ReadTimeout, want %d", failed, want)
			}
			if err := <-hasty; !c.fail && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a caller whose deadline (250ms) came first: %v; want context.DeadlineExceeded", err)
			}
		})
	}
}
