package exact

import (
	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/strategy"
)

// Window is a limit as the scripts of the window algorithms take it: Limit
// units per window of Ms milliseconds, and the same boxed once as script
// arguments, so that a call allocates none for them.
type Window struct {
	Limit, Ms       int64
	LimitArg, MsArg any
}

// WindowOf returns lim, which must be valid, as a Window.
func WindowOf(lim strategy.Limit) Window {
	ms := lim.Window.Milliseconds()
	return Window{Limit: lim.Limit, Ms: ms, LimitArg: lim.Limit, MsArg: ms}
}

// Args is a window script's ARGV for n units (0: a peek) at now (the
// engine's NowArg): limit, window ms, n, now.
func (w *Window) Args(n int64, now any) []any { return []any{w.LimitArg, w.MsArg, n, now} }

// RefundArgs is the ARGV of a window script's refund, which gives n units
// back and then peeks: a peek's, then n.
func (w *Window) RefundArgs(n int64, now any) []any { return []any{w.LimitArg, w.MsArg, 0, now, n} }

// Counter is a fixed window's state in a twin (package fixedwindow's, and
// multilimit's fixed window rules'): the units counted in window idx (an
// instant's FloorDiv by the window).
type Counter struct{ idx, count int64 }

// Decide is a fixed window script's decision: n units (0: a peek) against
// limit in now's window of window ms, recorded when allowed.
func (c *Counter) Decide(limit, window, now, n int64) strategy.Result {
	idx := FloorDiv(now, window)
	left := (idx+1)*window - now
	var count int64
	if c.idx == idx {
		count = c.count
	}
	reset := int64(0)
	if count > 0 {
		reset = left
	}
	switch want := max(n, 1); {
	case want > limit:
		return engine.ResultOf(false, limit, max(limit-count, 0), -1, reset)
	case count+want > limit:
		return engine.ResultOf(false, limit, max(limit-count, 0), left, left)
	case n == 0:
		return engine.ResultOf(true, limit, limit-count, 0, reset)
	}
	c.idx, c.count = idx, count+n
	return engine.ResultOf(true, limit, limit-count-n, 0, left)
}

// Give is a fixed window refund script's: up to n units back to now's
// window (units of an earlier window no longer count), then a peek.
func (c *Counter) Give(limit, window, now, n int64) strategy.Result {
	if c.idx == FloorDiv(now, window) {
		c.count -= min(n, c.count)
	}
	return c.Decide(limit, window, now, 0)
}

// Expires is until when c matters: its window's end, or 0 when empty.
func (c *Counter) Expires(window int64) int64 {
	if c.count == 0 {
		return 0
	}
	return (c.idx + 1) * window
}
