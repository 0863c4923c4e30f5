package compactlog

import (
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/fielderr"
	"github.com/ratekit/ratelimit/internal/unitlog"
	"github.com/ratekit/ratelimit/strategy"
)

// MaxLimit is the largest Limit the compact log accepts. It bounds what one
// subject costs (a value of 13 + Limit x w bytes, w from 1 to 6 as Width
// says: 20,013 bytes at MaxLimit for windows up to 65.5 s) and the work of
// the rare decision that rebuilds it.
const MaxLimit = 10000

// rangesAbove is the size of value above which the script reads and writes
// it by ranges (GETRANGE, SETRANGE) instead of whole (GET, SET): a few
// commands more, but a decision's work no longer grows with the Limit.
const rangesAbove = 1024

// Limiter is the compact exact sliding log on Redis; it implements
// strategy.Strategy, LimitOverrider and Refunder (see
// "Refunds" and "Per-subject limits" in the package doc). It is safe for
// concurrent use.
type Limiter struct {
	engine.Redis[params, unitlog.Log]
}

// New returns a compact log that keeps its entries in Redis through rdb
// (a *redis.Client, *redis.ClusterClient or *redis.Ring) under the keys
// <prefix>cl:{<subject>}. lim.Burst is ignored. It fails when lim or an
// option is invalid, or when lim.Limit exceeds MaxLimit.
func New(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	return engine.New[Limiter](&spec, rdb, lim, opts)
}

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only. It is safe for concurrent use. A
// subject costs 16 bytes per distinct millisecond at which units were
// recorded in the window (a request of cost n is one such entry, whatever
// n), plus a small header, and is dropped once its newest unit has left the
// window.
type Local struct {
	engine.Local[params, unitlog.Log]
}

// NewLocal returns the in-process twin of New. Of the options, WithClock
// (default time.Now) and WithMaxSubjects matter. Limit is bounded by
// MaxLimit as for New, though the twin stores entries, not units.
func NewLocal(lim strategy.Limit, opts ...strategy.Option) (*Local, error) {
	return engine.NewLocal[Local](&spec, lim, opts)
}

//go:embed compactlog.lua
var scriptSrc string

//go:embed refund.lua
var refundSrc string

// spec is the compact log's: its decisions are the exact sliding log's,
// which the twin keeps as a unitlog.Log.
var spec = engine.Spec[params, unitlog.Log]{
	Name: "compactlog", Tag: "cl", Lease: engine.LeaseAhead,
	Script: engine.Script(scriptSrc),
	// the refund, then the decision script as a peek: one atomic call
	Refund:   engine.Script(refundSrc, scriptSrc),
	Params:   paramsOf,
	Capacity: func(p *params) int64 { return p.limit },
	Args: func(p, _ *params, n int64, now any) []any {
		return []any{p.limitArg, p.windowArg, n, p.widthArg, now, p.rangesArg}
	},
	RefundArgs: func(p, _ *params, n int64, now any) []any {
		return []any{p.limitArg, p.windowArg, 0, p.widthArg, now, p.rangesArg, n}
	},
	Decide: func(g *unitlog.Log, p, _ *params, now, n int64) (strategy.Result, int64) {
		return g.Decide(p.limit, p.window, now, n), g.Expires(p.window)
	},
	Give: func(g *unitlog.Log, own *params, now, n int64) (strategy.Result, int64) {
		return g.Give(own.limit, own.window, now, n), g.Expires(own.window)
	},
}

// params are a limit's: units per window, the window in ms, and the script
// arguments, boxed once: those two, the entry width and the ranges flag (1:
// read and write the value by ranges). A per-call limit has the same
// window and width; its ring is laid out again for its Limit by the first
// request it records.
type params struct {
	limit, window                            int64
	limitArg, windowArg, widthArg, rangesArg any
}

// paramsOf bounds the memory of one subject by MaxLimit.
func paramsOf(lim strategy.Limit, _ *params) (params, error) {
	if lim.Limit > MaxLimit {
		return params{}, fielderr.New(strategy.ErrInvalidLimit, "compactlog: ", "Limit", func(name func(string) string) string {
			return fmt.Sprintf("%s must be <= %d, got %d (use sliding_log or sliding_counter)", name("Limit"), MaxLimit, lim.Limit)
		})
	}
	w := lim.Window.Milliseconds()
	width, ranges := Width(w), int64(0)
	if 13+lim.Limit*width > rangesAbove {
		ranges = 1
	}
	return params{limit: lim.Limit, window: w, limitArg: lim.Limit, windowArg: w, widthArg: width, rangesArg: ranges}, nil
}

// Width returns the bytes the compact log stores per unit for a window of
// windowMs milliseconds: the fewest w >= 1 with 256^w >= windowMs. One
// byte up to 256 ms, two up to 65.5 s, three up to 4.6 h, four up to 49.7
// days, five up to 34.8 years, six beyond.
func Width(windowMs int64) int64 {
	w := int64(1)
	for m := int64(256); m < windowMs; m *= 256 {
		w++
	}
	return w
}
