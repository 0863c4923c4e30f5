package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// counter is a test algorithm: every decision marks its subject, which
// matters for one window from now.
var counter = Spec[int64, bool]{
	Name: "counter", Tag: "c",
	Params:   func(lim strategy.Limit, _ *int64) (int64, error) { return lim.Window.Milliseconds(), nil },
	Capacity: func(*int64) int64 { return 1 },
	Decide: func(s *bool, p, _ *int64, now, _ int64) (strategy.Result, int64) {
		*s = true
		return strategy.Result{Allowed: true, Limit: 1}, now + *p
	},
}

// A twin's store frees idle subjects on the twin's own clock, from its
// timers, with no request arriving.
func TestLocalFreesIdleSubjects(t *testing.T) {
	var ms atomic.Int64
	clock := strategy.ClockFunc(func() time.Time { return time.UnixMilli(ms.Load()) })
	l, err := NewLocal[Local[int64, bool]](&counter, strategy.Limit{Limit: 1, Window: 100 * time.Millisecond}, []strategy.Option{strategy.WithClock(clock)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if _, err := l.AllowN(context.Background(), fmt.Sprint("k", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	ms.Store(99)                       // nothing expired yet
	time.Sleep(250 * time.Millisecond) // two sweep periods (the window)
	if n := l.Subjects(); n != 1000 {
		t.Fatalf("%d subjects before their expiry, want 1000", n)
	}
	ms.Store(100)
	for deadline := time.Now().Add(time.Minute); l.Subjects() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d subjects a minute after their expiry, want 0: the timers do not sweep on the twin's clock", l.Subjects())
		}
	}
}
