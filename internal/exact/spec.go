package exact

import (
	_ "embed"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/strategy"
)

// The Lua every script of the token bucket and GCRA begins with (the
// shared ARGV, now) and ends with (the decision over the units used).
var (
	//go:embed head.lua
	headLua string
	//go:embed decide.lua
	decideLua string
)

// Params are what the token bucket and GCRA derive from a limit (their
// engine.Spec's P): its Scale, the time its whole capacity takes to come
// back and its script arguments, boxed once.
type Params struct {
	Scale
	FullMs int64 // ⌈Full/LP⌉: a capacity used in full is back after FullMs ms
	Window int64 // in ms
	lim    strategy.Limit
	args   [3]any // LP, WP and Capacity
	tail   []any  // of the strategy's own limit: the ARGV after now
}

// Spec returns the Spec of the token bucket or GCRA, named name with the
// key tag tag: its decision script is head.lua, the Lua source script
// (which reads the subject's state into used, the scaled units it used,
// and defines store) and decide.lua; its refund script is head.lua, the
// source refund (which gives units back), then the decision as a peek. Its
// twin is decide and give. The rest the two share: Burst, their Params,
// capacity, Limit of 0 and ARGV (the call's LP, WP and capacity, n, now,
// then tail(own), what script reads of the strategy's own limit). A
// per-call limit must pass CheckCarry, and so must the strategy's.
func Spec[S any](name, tag, script, refund string, decide func(s *S, p, own *Params, now, n int64) (strategy.Result, int64),
	give func(s *S, own *Params, now, n int64) (strategy.Result, int64), tail func(own *Params) []any) *engine.Spec[Params, S] {
	spec := engine.Spec[Params, S]{Name: name, Tag: tag, Burst: true, Lease: engine.LeaseBurst, Decide: decide, Give: give,
		Script: engine.Script(headLua, script, decideLua), Refund: engine.Script(headLua, refund, script, decideLua)}
	spec.Params = func(lim strategy.Limit, own *Params) (Params, error) {
		if own != nil {
			if err := CheckCarry(own.lim); err != nil {
				return Params{}, err
			}
			if err := CheckCarry(lim); err != nil {
				return Params{}, err
			}
		}
		s, err := Of(lim)
		if err != nil {
			return Params{}, err
		}
		p := Params{Scale: s, Window: lim.Window.Milliseconds(), lim: lim, args: [3]any{s.LP, s.WP, s.Capacity}}
		if !s.DenyAll() {
			p.FullMs = CeilDiv(s.Full, s.LP)
		}
		if own == nil {
			p.tail = tail(&p)
		}
		return p, nil
	}
	spec.Capacity = func(p *Params) int64 { return p.Capacity }
	spec.DenyAll = func(p *Params) bool { return p.DenyAll() }
	spec.Args = func(p, own *Params, n int64, now any) []any { return args(p, own, n, now, 0) }
	// the refund script reads the decision's ARGV for a peek, then n
	spec.RefundArgs = func(p, own *Params, n int64, now any) []any { return append(args(p, own, 0, now, 1), n) }
	return &spec
}

// args returns the decision script's ARGV, with room for more values.
func args(p, own *Params, n int64, now any, more int) []any {
	a := make([]any, 0, 5+len(own.tail)+more)
	return append(append(a, p.args[0], p.args[1], p.args[2], n, now), own.tail...)
}

// Decide is the decision of the token bucket and GCRA, which are one
// algorithm over two kinds of state: n units (0: peek) under p for a
// subject that used used scaled units (at most p.Full) as of now. It
// returns the Result, the units used after it (more only when n > 0 is
// allowed) and until when those matter, Unix ms.
func Decide(p *Params, used, now, n int64) (res strategy.Result, after, expires int64) {
	want := max(n, 1)
	remaining := (p.Full - used) / p.WP
	reset := CeilDiv(used, p.LP)
	if want > p.Capacity {
		return engine.ResultOf(false, p.Capacity, remaining, -1, reset), used, now + reset
	}
	switch after = used + want*p.WP; {
	case after > p.Full:
		return engine.ResultOf(false, p.Capacity, remaining, CeilDiv(after-p.Full, p.LP), reset), used, now + reset
	case n == 0:
		return engine.ResultOf(true, p.Capacity, remaining, 0, reset), used, now + reset
	}
	reset = CeilDiv(after, p.LP)
	return engine.ResultOf(true, p.Capacity, (p.Full-after)/p.WP, 0, reset), after, now + reset
}

// CeilDiv is ⌈a/b⌉ for a >= 0, b > 0.
func CeilDiv(a, b int64) int64 { return (a + b - 1) / b }

// Written is the scale a twin's state was last written under: a per-call
// limit's LP and WP, or zero for the strategy's own, as the scripts store
// it. A state costs these two more int64.
type Written struct{ LP, WP int64 }

// Plain reports whether a decision under p on a state written under w
// needs no carry: p and w are both the strategy's own scale.
func (w Written) Plain(p, own *Params) bool { return w.WP == 0 && p.Scale == own.Scale }

// Of returns the LP and WP of w, or own's when w is zero.
func (w Written) Of(own *Params) (lp, wp int64) {
	if w.WP == 0 {
		return own.LP, own.WP
	}
	return w.LP, w.WP
}

// RatePlain is Plain for a state whose scale is the rate alone (GCRA's
// TAT, in 1/lp ms): p may have another capacity than own.
func (w Written) RatePlain(p, own *Params) bool {
	return w.WP == 0 && p.LP == own.LP && p.WP == own.WP
}

// RateAs is As for a state whose scale is the rate alone: zero when p has
// own's rate, whatever its capacity, as GCRA's script records it.
func RateAs(p, own *Params) Written {
	if p.LP == own.LP && p.WP == own.WP {
		return Written{}
	}
	return Written{p.LP, p.WP}
}

// As returns what a state written under p records: zero for own's scale.
func As(p, own *Params) Written {
	if p.Scale == own.Scale {
		return Written{}
	}
	return Written{p.LP, p.WP}
}
