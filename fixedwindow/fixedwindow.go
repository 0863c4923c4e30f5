package fixedwindow

import (
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/exact"
	"github.com/ratekit/ratelimit/strategy"
)

//go:embed fixedwindow.lua
var scriptSrc string

//go:embed refund.lua
var refundSrc string

// Limiter is the fixed window on Redis; it implements strategy.Strategy,
// LimitOverrider and Refunder. It is safe for concurrent
// use.
type Limiter struct{ engine.Redis[params, counter] }

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only. It is safe for concurrent use. A
// subject's state is dropped when its window ends.
type Local struct{ engine.Local[params, counter] }

// New returns a fixed window that keeps its counters in Redis through rdb
// (a *redis.Client, *redis.ClusterClient or *redis.Ring) under the keys
// <prefix>fw:{<subject>}. lim.Burst is ignored. It fails when lim or an
// option is invalid.
func New(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	return engine.New[Limiter](&spec, rdb, lim, opts)
}

// NewLocal returns the in-process twin of New. Of the options, WithClock
// (default time.Now) and WithMaxSubjects matter.
func NewLocal(lim strategy.Limit, opts ...strategy.Option) (*Local, error) {
	return engine.NewLocal[Local](&spec, lim, opts)
}

var spec = engine.Spec[params, counter]{
	Name: "fixedwindow", Tag: "fw",
	Script: engine.Script(scriptSrc),
	// the refund, then the decision script as a peek: one atomic call
	Refund: engine.Script(refundSrc, scriptSrc),
	Params: func(lim strategy.Limit, _ *params) (params, error) {
		w := lim.Window.Milliseconds()
		return params{limit: lim.Limit, window: w, limitArg: lim.Limit, windowArg: w}, nil
	},
	Capacity: func(p *params) int64 { return p.limit },
	Args: func(p, _ *params, n int64, now any) []any {
		return []any{p.limitArg, p.windowArg, n, now}
	},
	RefundArgs: func(p, _ *params, n int64, now any) []any {
		return []any{p.limitArg, p.windowArg, 0, now, n}
	},
	Decide: decide,
	Give:   give,
}

// params are a limit's: units per window, the window in ms, and the same
// boxed once as script arguments. A per-call limit changes only the units.
type params struct {
	limit, window       int64
	limitArg, windowArg any
}

// counter is the units counted in window idx (now / window).
type counter struct {
	idx   int64
	count int64
}

// decide is the decision script: n units against p in now's window.
func decide(c *counter, p, _ *params, now, n int64) (strategy.Result, int64) {
	idx := exact.FloorDiv(now, p.window)
	left := (idx+1)*p.window - now
	var count int64
	if c.idx == idx {
		count = c.count
	}
	var res strategy.Result
	reset := int64(0)
	if count > 0 {
		reset = left
	}
	switch want := max(n, 1); {
	case want > p.limit:
		res = engine.ResultOf(false, p.limit, max(p.limit-count, 0), -1, reset)
	case count+want > p.limit:
		res = engine.ResultOf(false, p.limit, max(p.limit-count, 0), left, left)
	case n == 0:
		res = engine.ResultOf(true, p.limit, p.limit-count, 0, reset)
	default:
		c.idx, c.count = idx, count+n
		res = engine.ResultOf(true, p.limit, p.limit-count-n, 0, left)
	}
	return res, c.expires(p.window)
}

// give is the refund script: up to n units back to now's window (units of
// an earlier window no longer count), then a peek.
func give(c *counter, own *params, now, n int64) (strategy.Result, int64) {
	if c.idx == exact.FloorDiv(now, own.window) {
		c.count -= min(n, c.count)
	}
	res, _ := decide(c, own, own, now, 0)
	return res, c.expires(own.window)
}

// expires is until when c matters: its window's end, or 0 when empty.
func (c *counter) expires(window int64) int64 {
	if c.count == 0 {
		return 0
	}
	return (c.idx + 1) * window
}
