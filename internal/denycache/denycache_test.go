package denycache

import (
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

// TestNeverDeniesWhatRedisAllows: Redis decides in whole milliseconds (the
// client clock's UnixMilli, or TIME truncated), so a denial of a request
// sent at start with RetryAfter r lets the request pass from the
// millisecond floor(start) + r on, up to a millisecond before start + r
// when start is not a whole millisecond. On a clock finer than a
// millisecond the cache must stop denying by then; until a millisecond
// before start + r, it denies.
func TestNeverDeniesWhatRedisAllows(t *testing.T) {
	for _, c := range []struct {
		name   string
		offset time.Duration // start's part of a millisecond
		retry  time.Duration
	}{
		{"whole millisecond", 0, 5 * time.Millisecond},
		{"0.1 ms past", 100 * time.Microsecond, 5 * time.Millisecond},
		{"0.5 ms past", 500 * time.Microsecond, 2 * time.Millisecond},
		{"1 ns short of the next", time.Millisecond - 1, 40 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := conformance.NewClock(conformance.Epoch.Add(c.offset))
			dc := New(100, clock, time.Second, nil)
			gen, start := dc.Begin()
			dc.Put("k", 1, strategy.Result{Limit: 3, RetryAfter: c.retry, ResetAfter: c.retry}, gen, start)
			if _, ok := dc.Lookup("k", 1); !ok {
				t.Fatalf("%s: Lookup right after the denial: not cached, want cached", c.name)
			}
			// denied until a millisecond before start + r
			clock.Set(conformance.Epoch.Add(c.offset + c.retry - time.Millisecond - 1))
			if _, ok := dc.Lookup("k", 1); !ok {
				t.Errorf("%s: Lookup 1 ns before start + RetryAfter - 1 ms: not cached, want cached", c.name)
			}
			// the first instant Redis allows the request again
			allows := conformance.Epoch.Add(c.retry)
			clock.Set(allows)
			if r, ok := dc.Lookup("k", 1); ok {
				t.Errorf("%s: Lookup at %v after the denial, when Redis allows: cached %+v, want not cached",
					c.name, allows.Sub(conformance.Epoch.Add(c.offset)), r)
			}
		})
	}
}
