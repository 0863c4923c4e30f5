package slidinglog

import (
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/unitlog"
	"github.com/ratekit/ratelimit/strategy"
)

// Tag is the algorithm's part of every key: <prefix>sl:{<subject>}.
const Tag = "sl"

//go:embed slidinglog.lua
var scriptSrc string

//go:embed refund.lua
var refundSrc string

// Limiter is the exact sliding log on Redis; it implements
// strategy.Strategy, LimitOverrider and Refunder. The
// script's work does not grow with a request's cost (see the package doc).
// A refund gives back the newest units still in the window: the newest
// entries whole, then part of the entry where it stops, so RetryAfter
// stays exact. It is safe for concurrent use.
type Limiter struct {
	engine.Redis[params, unitlog.Log]
}

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only. It is safe for concurrent use. A
// subject costs 16 bytes per allowed request in the window (whatever its
// cost) plus a small header, and is dropped once its newest entry has left
// the window. A decision never allocates in proportion to its cost n, and
// takes O(log entries) time (amortized), whichever way the clock moved.
type Local struct {
	engine.Local[params, unitlog.Log]
}

// New returns a sliding log that keeps its entries in Redis through rdb
// (a *redis.Client, *redis.ClusterClient or *redis.Ring). lim.Burst is
// ignored. It fails when lim or an option is invalid.
func New(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	return engine.New[Limiter](&spec, rdb, lim, opts)
}

// NewLocal returns the in-process twin of New. Of the options, WithClock
// (default time.Now) and WithMaxSubjects matter.
func NewLocal(lim strategy.Limit, opts ...strategy.Option) (*Local, error) {
	return engine.NewLocal[Local](&spec, lim, opts)
}

var spec = engine.Spec[params, unitlog.Log]{
	Name: "slidinglog", Tag: Tag, Lease: engine.LeaseAhead,
	Script: engine.Script(unitlog.KthLua, scriptSrc),
	// the log's refund, then the decision script as a peek: one atomic call
	Refund: engine.Script(unitlog.KthLua, unitlog.RefundLua, refundSrc, scriptSrc),
	Params: func(lim strategy.Limit, _ *params) (params, error) {
		p := params{limit: lim.Limit, window: lim.Window.Milliseconds()}
		p.args = [2]any{p.limit, p.window}
		return p, nil
	},
	Capacity: func(p *params) int64 { return p.limit },
	// ARGV: limit, window ms, n, now; and the units a refund gives back
	Args:       func(p, _ *params, n int64, now any) []any { return []any{p.args[0], p.args[1], n, now} },
	RefundArgs: func(p, _ *params, n int64, now any) []any { return []any{p.args[0], p.args[1], 0, now, n} },
	Decide:     decide,
	Give:       give,
}

// params are a limit's units per window and its window in ms, and the
// same boxed once as script arguments. A per-call limit changes only the
// units: the log is the same whatever limit a call carries.
type params struct {
	limit, window int64
	args          [2]any
}

// decide is the decision script on the twin's log g (see
// unitlog.Log.Decide).
func decide(g *unitlog.Log, p, _ *params, now, n int64) (strategy.Result, int64) {
	return g.Decide(p.limit, p.window, now, n), g.Expires(p.window)
}

// give is the refund script: up to n of the units still in the window
// back, newest first, then a peek.
func give(g *unitlog.Log, own *params, now, n int64) (strategy.Result, int64) {
	return g.Give(own.limit, own.window, now, n), g.Expires(own.window)
}
