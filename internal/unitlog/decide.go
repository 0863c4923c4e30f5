package unitlog

import (
	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/strategy"
)

// Decide is one decision of the sliding log g for n units (0: a peek) at
// now, against limit units per window ms: the steps of slidinglog.lua, and
// of a sliding log rule of multilimit.lua. The units recorded after
// now - window count; an allowed request (n > 0) evicts what left the
// window and records its n units at max(now, the newest entry's time).
// Nothing else changes g.
func (g *Log) Decide(limit, window, now, n int64) strategy.Result {
	floor := now - window
	count := g.Count(floor)
	want := max(n, 1)
	reset := int64(0)
	if count > 0 {
		t, _ := g.Newest()
		reset = t + window - now
	}
	switch {
	case want > limit:
		return engine.ResultOf(false, limit, max(limit-count, 0), -1, reset)
	case count+want <= limit && n == 0:
		return engine.ResultOf(true, limit, limit-count, 0, reset)
	case count+want <= limit:
		g.Evict(floor)
		t := g.Record(now, n)
		return engine.ResultOf(true, limit, limit-count-n, 0, t+window-now)
	}
	// the (count + want - limit)-th oldest live unit must leave first
	return engine.ResultOf(false, limit, max(limit-count, 0), g.Leaves(floor, count+want-limit)+window-now, reset)
}

// Expires returns until when g matters under a window of window ms (Unix
// ms): window after its newest entry, or 0 when g is empty.
func (g *Log) Expires(window int64) int64 {
	if t, ok := g.Newest(); ok {
		return t + window
	}
	return 0
}

// Give is an exact log's refund: up to n of the units recorded in the
// window at now given back, newest first (see Refund), then Decide's peek.
func (g *Log) Give(limit, window, now, n int64) strategy.Result {
	g.Refund(now-window, n)
	return g.Decide(limit, window, now, 0)
}
