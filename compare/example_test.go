package compare_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratelimit/compare"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// A fixed window is enforced while a sliding log decides the same
// requests in shadow; then the sliding log is promoted with its state.
func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 50, 0, time.UTC)
	var clockNs atomic.Int64 // the clock's time in Unix ns: a Clock must be safe for concurrent use
	clockNs.Store(now.UnixNano())
	clock := strategy.ClockFunc(func() time.Time { return time.Unix(0, clockNs.Load()).UTC() })
	lim := strategy.PerMinute(3)
	enforced, _ := fixedwindow.NewLocal(lim, strategy.WithClock(clock))
	candidate, _ := slidinglog.NewLocal(lim, strategy.WithClock(clock))
	l, _ := compare.New(enforced, candidate, compare.WithInline())
	defer l.Close()

	ctx := context.Background()
	for range 4 {
		l.AllowN(ctx, "user:42", 1)
	}
	now = now.Add(15 * time.Second) // a new fixed window
	clockNs.Store(now.UnixNano())
	r, _ := l.AllowN(ctx, "user:42", 1)
	fmt.Println("enforced allowed after the window edge:", r.Allowed)
	fmt.Printf("%+v\n", l.Agreement())

	// Promote: the candidate object holds the state it built in shadow.
	promoted := l.Candidate()
	r, _ = promoted.AllowN(ctx, "user:42", 1)
	fmt.Println("promoted allowed:", r.Allowed)
	// Output:
	// enforced allowed after the window edge: true
	// {BothAllow:3 BothDeny:1 EnforcedOnlyDeny:0 CandidateOnlyDeny:1 CandidateErrors:0 Dropped:0}
	// promoted allowed: false
}
