package batch

import (
	"testing"

	"github.com/ratekit/ratelimit/internal/engine"
)

// Queued returns how many calls wait in c's queues, and how many of them
// their callers have left.
func (c *Client) Queued() (calls, dropped int) { return c.b.Queued() }

// TestDefaultsAreTheEngines checks that a Client's defaults are those of
// the Batchers the constructors share by default, so that batching by
// default and New with no options behave alike.
func TestDefaultsAreTheEngines(t *testing.T) {
	got := [3]int{DefaultMaxInFlight, DefaultMaxBatch, DefaultMaxQueue}
	want := [3]int{engine.DefaultBatchInFlight, engine.DefaultBatchMax, engine.DefaultBatchQueue}
	if got != want {
		t.Fatalf("batch defaults (in flight, batch, queue) = %v, the engine's = %v", got, want)
	}
}
