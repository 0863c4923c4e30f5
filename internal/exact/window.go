package exact

import "github.com/ratekit/ratelimit/strategy"

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
