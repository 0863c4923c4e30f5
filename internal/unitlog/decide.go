package unitlog

import (
	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/strategy"
)

// Decide is one decision of an exact sliding log for n units (0: a peek)
// at now, under limit units per window ms, the same steps as the scripts
// of the exact logs: the units recorded after now - window count; an
// allowed request evicts what left the window and records its n units at
// max(now, the newest entry's time). It returns the Result and until when
// g matters (Unix ms; 0: it is empty).
func (g *Log) Decide(limit, window, now, n int64) (strategy.Result, int64) {
	floor := now - window
	count := g.Count(floor)
	want := max(n, 1)
	reset := int64(0)
	if t, _ := g.Newest(); count > 0 {
		reset = t + window - now
	}
	var res strategy.Result
	switch {
	case want > limit:
		res = engine.ResultOf(false, limit, max(limit-count, 0), -1, reset)
	case count+want <= limit && n == 0:
		res = engine.ResultOf(true, limit, limit-count, 0, reset)
	case count+want <= limit:
		g.Evict(floor)
		t := g.Record(now, n)
		res = engine.ResultOf(true, limit, limit-count-n, 0, t+window-now)
	default: // the (count + want - limit)-th oldest live unit must leave first
		res = engine.ResultOf(false, limit, max(limit-count, 0), g.Leaves(floor, count+want-limit)+window-now, reset)
	}
	return res, g.expires(window)
}

// Give is an exact log's refund, up to n of the units recorded in the
// window at now given back, newest first (see Refund), then Decide's peek.
func (g *Log) Give(limit, window, now, n int64) (strategy.Result, int64) {
	g.Refund(now-window, n)
	return g.Decide(limit, window, now, 0)
}

// expires is until when g matters: window after its newest entry, or 0
// when it is empty.
func (g *Log) expires(window int64) int64 {
	if t, ok := g.Newest(); ok {
		return t + window
	}
	return 0
}
