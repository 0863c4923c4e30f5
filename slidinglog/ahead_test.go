package slidinglog_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// TestAllowAhead: units recorded ahead (a lease's) count from the decision
// until now + ahead + Window, and later requests are recorded no earlier.
func TestAllowAhead(t *testing.T) {
	mr := miniredis.RunT(t)
	clock := conformance.NewClock(time.UnixMilli(1_700_000_000_000))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	l, err := slidinglog.New(rdb, strategy.Limit{Limit: 10, Window: time.Second}, strategy.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := l.AllowAhead(ctx, "k", 6, 100*time.Millisecond)
	if err != nil || !res.Allowed || res.Remaining != 4 || res.ResetAfter != 1100*time.Millisecond {
		t.Fatalf("AllowAhead(6, 100ms) = %+v, %v; want allowed, 4 remaining, reset after 1.1s", res, err)
	}
	steps := []struct {
		name      string
		advance   time.Duration
		n         int64
		allowed   bool
		remaining int64
	}{
		{"the lease's units count now", 0, 5, false, 4},
		{"and just before ahead + Window", 1099 * time.Millisecond, 5, false, 4},
		{"they leave at ahead + Window", time.Millisecond, 10, true, 0},
	}
	for _, s := range steps {
		clock.Advance(s.advance)
		res, err := l.AllowN(ctx, "k", s.n)
		if err != nil || res.Allowed != s.allowed || res.Remaining != s.remaining {
			t.Errorf("%s: AllowN(%d) = %+v, %v; want allowed %v, remaining %d", s.name, s.n, res, err, s.allowed, s.remaining)
		}
	}
	if _, err := l.AllowAhead(ctx, "k", 1, 0); err == nil {
		t.Error("AllowAhead with ahead 0: no error")
	}
}
