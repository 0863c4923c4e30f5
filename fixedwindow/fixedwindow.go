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
type Limiter struct {
	engine.Redis[params, exact.Counter]
}

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only. It is safe for concurrent use. A
// subject's state is dropped when its window ends.
type Local struct {
	engine.Local[params, exact.Counter]
}

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

var spec = engine.Spec[params, exact.Counter]{
	Name: "fixedwindow", Tag: "fw", Lease: engine.LeaseWindow,
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

// decide is the decision script: n units against p in now's window.
func decide(c *exact.Counter, p, _ *params, now, n int64) (strategy.Result, int64) {
	return c.Decide(p.limit, p.window, now, n), c.Expires(p.window)
}

// give is the refund script: up to n units back to now's window, then a
// peek.
func give(c *exact.Counter, own *params, now, n int64) (strategy.Result, int64) {
	return c.Give(own.limit, own.window, now, n), c.Expires(own.window)
}
