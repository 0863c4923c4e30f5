package slidinglog_test

import (
	"testing"

	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// TestClockStepsBack holds every backend to the sliding log's documented
// semantics of a clock that steps back (conformance.SlidingLogModel), the
// model package slidinglog and multilimit are held to: the same decisions.
func TestClockStepsBack(t *testing.T) {
	for _, b := range []string{"miniredis", "redis", "local"} {
		t.Run(b, func(t *testing.T) {
			conformance.SlidingLogClockSteps(t, func(t *testing.T, lim strategy.Limit, clock *conformance.Clock) strategy.Strategy {
				var st strategy.Strategy
				var err error
				switch b {
				case "miniredis":
					_, rdb := conformance.Miniredis(t)
					st, err = slidinglog.New(rdb, lim, strategy.WithClock(clock))
				case "redis":
					st, err = slidinglog.New(conformance.RealRedis(t), lim, strategy.WithClock(clock), strategy.WithPrefix(testredis.Prefix(t)))
				case "local":
					st, err = slidinglog.NewLocal(lim, strategy.WithClock(clock))
				}
				if err != nil {
					t.Fatal(err)
				}
				return st
			})
		})
	}
}
