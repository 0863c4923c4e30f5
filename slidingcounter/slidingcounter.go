package slidingcounter

import (
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/exact"
	"github.com/ratekit/ratelimit/internal/fielderr"
	"github.com/ratekit/ratelimit/strategy"
)

// MaxProduct bounds Limit x Window (in ms), so that the script's integer
// arithmetic stays exact in Lua's float64 numbers. It allows, e.g., a
// million units per year or a billion per hour.
const MaxProduct = 1 << 52

// Limiter is the sliding window counter on Redis; it implements
// strategy.Strategy, LimitOverrider and Refunder (see
// "Refunds" and "Per-subject limits" in the package doc). It is safe for
// concurrent use.
type Limiter struct{ engine.Redis[params, counts] }

// New returns a sliding window counter that keeps its counts in Redis
// through rdb (a *redis.Client, *redis.ClusterClient or *redis.Ring) under
// the keys <prefix>sc:{<subject>}. lim.Burst is ignored. It fails when lim
// or an option is invalid, or when Limit x Window exceeds MaxProduct.
func New(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	return engine.New[Limiter](&spec, rdb, lim, opts)
}

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only. It is safe for concurrent use. A
// subject's state is dropped when the window after its last recorded one
// ends.
type Local struct{ engine.Local[params, counts] }

// NewLocal returns the in-process twin of New. Of the options, WithClock
// (default time.Now) and WithMaxSubjects matter. It fails as New does.
func NewLocal(lim strategy.Limit, opts ...strategy.Option) (*Local, error) {
	return engine.NewLocal[Local](&spec, lim, opts)
}

//go:embed slidingcounter.lua
var scriptSrc string

//go:embed refund.lua
var refundSrc string

var spec = engine.Spec[params, counts]{
	Name: "slidingcounter", Tag: "sc", Lease: engine.LeaseCounter,
	Script: engine.Script(scriptSrc),
	// the refund, then the decision script as a peek: one atomic call
	Refund:     engine.Script(refundSrc, scriptSrc),
	Params:     paramsOf,
	Capacity:   func(p *params) int64 { return p.Limit },
	Args:       func(p, _ *params, n int64, now any) []any { return p.Args(n, now) },
	RefundArgs: func(p, _ *params, n int64, now any) []any { return p.RefundArgs(n, now) },
	Decide:     decide,
	Give:       give,
}

// params are a limit's units per window and window in ms; a per-call limit
// changes only the units.
type params = exact.Window

// paramsOf bounds Limit x Window by MaxProduct (Validate bounds both, so
// the product cannot overflow).
func paramsOf(lim strategy.Limit, _ *params) (params, error) {
	p := exact.WindowOf(lim)
	if p.Limit*p.Ms > MaxProduct {
		return p, fielderr.New(strategy.ErrInvalidLimit, "slidingcounter: ", "Limit", func(name func(string) string) string {
			return fmt.Sprintf("%s x %s must be <= 2^52 unit-ms, got %d x %dms", name("Limit"), name("Window"), p.Limit, p.Ms)
		})
	}
	return p, nil
}

// counts holds the units recorded in window idx (now / window) and in the
// window before it.
type counts struct{ idx, curr, prev int64 }

// decide is the decision script: n units against p's limit, estimated as
// the current window's count plus the previous one's, weighed by the share
// of it the sliding window still covers.
func decide(s *counts, p, _ *params, now, n int64) (strategy.Result, int64) {
	w, limit := p.Ms, p.Limit
	idx := exact.FloorDiv(now, w)
	elapsed := now - idx*w
	var curr, prev int64
	switch s.idx {
	case idx:
		curr, prev = s.curr, s.prev
	case idx - 1:
		prev = s.curr
	}
	rawPrev := prev // kept as it is: a later call may have a higher limit
	curr, prev = min(curr, limit), min(prev, limit)
	used := curr + (prev*(w-elapsed)+w-1)/w
	var reset, retry int64
	switch {
	case curr > 0:
		reset = 2*w - elapsed
	case prev > 0:
		reset = w - elapsed
	}
	want := max(n, 1)
	switch {
	case want > limit:
		return engine.ResultOf(false, limit, max(limit-used, 0), -1, reset), s.expires(w)
	case used+want <= limit && n == 0:
		return engine.ResultOf(true, limit, limit-used, 0, reset), s.expires(w)
	case used+want <= limit:
		*s = counts{idx: idx, curr: curr + n, prev: rawPrev}
		return engine.ResultOf(true, limit, limit-used-n, 0, 2*w-elapsed), s.expires(w)
	case limit-curr-want >= 0:
		retry = w - (limit-curr-want)*w/prev - elapsed
	default:
		retry = 2*w - (limit-want)*w/curr - elapsed
	}
	return engine.ResultOf(false, limit, max(limit-used, 0), retry, reset), s.expires(w)
}

// give is the refund script: up to n units back to now's window (the
// previous window's count is weighed, not counted unit by unit, so it is
// not touched), then a peek.
func give(s *counts, own *params, now, n int64) (strategy.Result, int64) {
	if s.idx == exact.FloorDiv(now, own.Ms) {
		s.curr -= min(n, s.curr)
	}
	return decide(s, own, own, now, 0)
}

// expires is until when s matters: the end of the window after idx's while
// curr holds units, of idx's while only prev does, or 0.
func (s *counts) expires(w int64) int64 {
	switch {
	case s.curr > 0:
		return (s.idx + 2) * w
	case s.prev > 0:
		return (s.idx + 1) * w
	}
	return 0
}
