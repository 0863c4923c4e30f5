package tokenbucket

import (
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/exact"
	"github.com/ratekit/ratelimit/strategy"
)

// Limiter keeps each subject's bucket in Redis and decides with one
// script call. It implements strategy.Strategy, LimitOverrider and Refunder,
// and is safe for concurrent use.
type Limiter struct {
	engine.Redis[exact.Params, bucket]
}

// New returns a token bucket on rdb (a *redis.Client, *redis.ClusterClient
// or *redis.Ring), one hash per subject at <prefix>tb:{<subject>}. Its
// capacity is lim.Burst (lim.Limit when Burst is 0), refilled at lim.Limit
// per lim.Window. An invalid lim or option fails, and so does a limit that
// cannot be computed exactly; the package doc says which, and how per-call
// limits and refunds work.
func New(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	return engine.New[Limiter](spec, rdb, lim, opts)
}

// Local holds the buckets in this process instead: Limiter's decisions
// for the same clock. A bucket costs four int64 (two of them for per-call
// limits) and its map entry, until it is full again. It is safe for
// concurrent use.
type Local struct {
	engine.Local[exact.Params, bucket]
}

// NewLocal returns the twin of New; of the options, it reads WithClock
// (time.Now by default) and WithMaxSubjects.
func NewLocal(lim strategy.Limit, opts ...strategy.Option) (*Local, error) {
	return engine.NewLocal[Local](spec, lim, opts)
}

// The scripts: the decision, and the refund, which then decides as a peek.
var (
	//go:embed tokenbucket.lua
	scriptSrc string
	//go:embed refund.lua
	refundSrc string
)

// spec is the token bucket for the engine.
var spec = exact.Spec("tokenbucket", "tb", scriptSrc, refundSrc, decide, give,
	func(own *exact.Params) []any { return []any{own.LP, own.WP, own.Capacity, own.Window} })

// bucket is a subject's state. The zero bucket is full.
type bucket struct {
	deficit int64 // full - tokens, in scaled units
	last    int64 // the last refill, Unix ms; meaningless when deficit is 0
	// the scale of deficit and the rate of refill since last, when the
	// last write was under a per-call limit other than the strategy's
	exact.Written
}

// decide is the decision script: n tokens (0: peek) from b under p at now.
// It returns the Result and until when b matters (it is full then).
func decide(b *bucket, p, own *exact.Params, now, n int64) (strategy.Result, int64) {
	if b.Plain(p, own) {
		return b.take(p, now, n)
	}
	// b written under another limit, or p is a per-call limit: b refills at
	// its stored rate up to now, the tokens it used carry over to p
	// (exact.Carry), then p decides. Like the script, only an allowed
	// request writes: a denial or a peek leaves b as it was.
	olp, owp := b.Of(own)
	c := *b
	if now > c.last {
		// no overflow: e×olp is only computed below the deficit
		if e := now - c.last; e >= exact.CeilDiv(c.deficit, olp) {
			c.deficit = 0
		} else {
			c.deficit -= e * olp
		}
		c.last = now
	}
	if owp != p.WP || c.deficit > p.Full {
		c.deficit = exact.Carry(c.deficit, owp, p.Scale, p.Window)
	}
	res, expires := c.take(p, now, n)
	if !res.Allowed || n == 0 {
		// b unchanged: it matters until it is full at its own rate
		if b.deficit == 0 {
			return res, 0
		}
		return res, b.last + exact.CeilDiv(b.deficit, olp)
	}
	c.Written = exact.As(p, own)
	*b = c
	return res, expires
}

// take is the decision on b written under p, p's own scale.
func (b *bucket) take(p *exact.Params, now, n int64) (strategy.Result, int64) {
	if now > b.last {
		// e*LP cannot overflow below FullMs, and from FullMs on any bucket is full
		if e := now - b.last; e >= p.FullMs || e*p.LP >= b.deficit {
			b.deficit = 0
		} else {
			b.deficit -= e * p.LP
		}
		b.last = now
	}
	if b.deficit == 0 {
		b.last = now
	}
	res, deficit, expires := exact.Decide(p, b.deficit, now, n)
	b.deficit = deficit
	return res, expires
}

// give is the refund script: n tokens back into b, refilled to now first,
// up to a full bucket, then a peek. A bucket written under a per-call
// limit (a tier) gets nothing back.
func give(b *bucket, own *exact.Params, now, n int64) (strategy.Result, int64) {
	if b.WP != 0 {
		return decide(b, own, own, now, 0)
	}
	b.take(own, now, 0) // refill to now
	if n >= exact.CeilDiv(b.deficit, own.WP) {
		b.deficit = 0
	} else {
		b.deficit -= n * own.WP
	}
	return b.take(own, now, 0)
}
