// Package conformance is the one test suite every strategy, Redis-backed and
// local twin alike, must pass (go.uber.org/ratelimit's runTest is the
// model), and the differential test that holds each Redis script to its
// local twin.
package conformance

import (
	"sync"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// Clock is a manual clock for tests, safe for concurrent use. Pass it to
// strategy.WithClock; tests that use the Redis server's TIME on miniredis
// set the server's time too (see Backend.SetTime).
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set sets the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Epoch is a fixed start time for tests: a whole minute, so fixed windows
// start at it.
var Epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// Scaled returns a clock that reads Epoch + k × (c's time - Epoch): a case
// written for windows of a second runs, with windows k times as long, on a
// real Redis whose TTLs run in real time, without a key expiring in the
// middle of it.
func Scaled(c *Clock, k int64) strategy.Clock {
	return strategy.ClockFunc(func() time.Time {
		return Epoch.Add(time.Duration(k) * c.Now().Sub(Epoch))
	})
}
