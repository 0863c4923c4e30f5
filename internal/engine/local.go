package engine

import (
	"context"
	"time"

	"github.com/ratekit/ratelimit/internal/localstore"
	"github.com/ratekit/ratelimit/strategy"
)

// Local is the in-process twin of an algorithm: the same decisions as its
// Redis strategy for the same clock, kept in this process only. The zero
// Local is not usable; an algorithm's NewLocal calls Init. It is safe for
// concurrent use. A subject's state is dropped once it no longer matters.
type Local[P, S any] struct {
	*twin[P, S]
	shard int // strategy.NoShard, or the shard a Shard view decides for
}

// twin is what a Local and its shard views share.
type twin[P, S any] struct {
	core[P, S]
	clock strategy.Clock
	store *localstore.Store[S]
}

// Init sets l up as spec's twin enforcing lim. Of the options, WithClock
// (default time.Now), WithMaxSubjects and WithOnEvict matter. The store is
// swept every window (at least localstore.MinSweep) from a timer, which
// calls the clock: a client clock must be safe for concurrent use.
func (l *Local[P, S]) Init(spec *Spec[P, S], lim strategy.Limit, opts []strategy.Option) error {
	p, o, err := Setup(spec, lim, opts)
	if err != nil {
		return err
	}
	if !spec.Burst {
		lim.Burst = 0
	}
	c := o.Clock
	if c == nil {
		c = strategy.ClockFunc(time.Now)
	}
	sweep := lim.Window
	if spec.Sweep != nil {
		sweep = spec.Sweep(&p)
	}
	st := localstore.NewStore[S](localstore.Config{
		MaxSubjects: o.MaxSubjects,
		Unit:        time.Millisecond,
		Sweep:       max(sweep, localstore.MinSweep),
		Now:         func() int64 { return c.Now().UnixMilli() },
		OnEvict:     o.OnEvict,
	})
	l.twin = &twin[P, S]{core: core[P, S]{spec: spec, lim: lim, own: p, opts: o}, clock: c, store: st}
	l.shard = strategy.NoShard
	return nil
}

// Limit returns the limit the twin enforces (Burst 0 when the algorithm
// has none).
func (l *Local[P, S]) Limit() strategy.Limit { return l.lim }

// HonoursContext returns true: the twin never waits on a network.
func (*Local[P, S]) HonoursContext() bool { return true }

// Shard returns the twin that decides for shard i of every subject, from
// the same store.
func (l *Local[P, S]) Shard(i int) strategy.Strategy { return &Local[P, S]{twin: l.twin, shard: i} }

// AllowN records n units for key if the algorithm allows them. n = 0 is
// Peek.
func (l *Local[P, S]) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	return l.do(ctx, Req{Op: OpAllow, Key: key, N: n})
}

// Peek reports key's state now without recording anything.
func (l *Local[P, S]) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.do(ctx, Req{Op: OpAllow, Key: key})
}

// Reset forgets key.
func (l *Local[P, S]) Reset(ctx context.Context, key string) error {
	_, err := l.do(ctx, Req{Op: OpReset, Key: key})
	return err
}

// AllowNWith is AllowN under lim instead of the twin's limit (see
// strategy.LimitOverrider); lim.Window must be the twin's.
func (l *Local[P, S]) AllowNWith(ctx context.Context, key string, n int64, lim strategy.Limit) (strategy.Result, error) {
	return l.do(ctx, Req{Op: OpAllow, Key: key, N: n, Limit: lim, With: true})
}

// PeekWith is Peek under lim (see AllowNWith).
func (l *Local[P, S]) PeekWith(ctx context.Context, key string, lim strategy.Limit) (strategy.Result, error) {
	return l.do(ctx, Req{Op: OpAllow, Key: key, Limit: lim, With: true})
}

// RefundN gives back up to n units key spent that still count, as the
// Redis strategy does, and returns key's state after the refund, as Peek
// reports it.
func (l *Local[P, S]) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	return l.do(ctx, Req{Op: OpRefund, Key: key, N: n})
}

// ValidateLimit returns the error AllowNWith would return for lim, or nil
// (see strategy.LimitOverrider).
func (l *Local[P, S]) ValidateLimit(lim strategy.Limit) error {
	_, err := l.params(lim, true)
	return err
}

// Subjects returns how many subjects the twin holds state for.
func (l *Local[P, S]) Subjects() int { return l.store.Len() }

// do decides q in process.
func (l *Local[P, S]) do(ctx context.Context, q Req) (strategy.Result, error) {
	res := DenyAll // unless fn runs (OpReset's Result is not used)
	err := l.Update(ctx, q, func(s *S, p *P, now int64) (expires int64) {
		if q.Op == OpRefund {
			res, expires = l.spec.Give(s, &l.own, now, q.N)
		} else {
			res, expires = l.spec.Decide(s, p, &l.own, now, q.N)
		}
		return expires
	})
	if err != nil {
		return strategy.Result{}, err
	}
	return res, nil
}

// Update is a decision of the twin with fn as its step: after the checks
// of every decision (key, cost, the limit in force, ctx), fn updates s,
// q.Key's state, under p, the parameters of the limit in force, at now
// (Unix ms), and returns until when s matters (0: drop it). OpReset
// forgets q.Key instead, and fn does not run either when the Spec's
// DenyAll reports p. It serves an algorithm whose decision returns more
// than do's one Result (multilimit: each rule's).
func (l *Local[P, S]) Update(ctx context.Context, q Req, fn func(s *S, p *P, now int64) (expires int64)) error {
	if err := strategy.ValidateKey(q.Key); err != nil {
		return err
	}
	if err := strategy.ValidateCost(q.N); err != nil {
		return err
	}
	k := localstore.Key{Subject: q.Key, Shard: l.shard}
	if q.Op == OpReset {
		l.store.Delete(k)
		return nil
	}
	p, err := l.params(q.Limit, q.With)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return ended(err)
	}
	if l.spec.DenyAll != nil && l.spec.DenyAll(p) {
		return nil
	}
	now := l.clock.Now().UnixMilli()
	l.store.Do(k, now, func(s *S) int64 { return fn(s, p, now) })
	return nil
}
