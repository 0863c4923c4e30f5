package engine

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/settings"
	"github.com/ratekit/ratelimit/strategy"
)

// Redis is the strategy of an algorithm on Redis: every decision is one
// script call. The zero Redis is not usable; an algorithm's New calls
// Init. It is safe for concurrent use.
type Redis[P, S any] struct {
	*core[P, S]
	shard int // strategy.NoShard, or the shard a Shard view decides for
}

// core is what a Redis strategy and its shard views share.
type core[P, S any] struct {
	spec      *Spec[P, S]
	rdb       redis.Scripter
	lim       strategy.Limit
	own       P
	opts      settings.Options
	overrides cache[P]
}

// Setup validates lim, then applies opts: the order in which every
// constructor reports a bad input.
func Setup[P, S any](spec *Spec[P, S], lim strategy.Limit, opts []strategy.Option) (P, settings.Options, error) {
	var p P
	if err := lim.Validate(); err != nil {
		return p, settings.Options{}, err
	}
	p, err := spec.Params(lim, nil)
	if err != nil {
		return p, settings.Options{}, err
	}
	o := settings.Apply(opts)
	return p, o, o.Err
}

// Init sets r up as spec's strategy on rdb enforcing lim. A nil rdb, an
// invalid lim or option is an error naming the field.
func (r *Redis[P, S]) Init(spec *Spec[P, S], rdb redis.Scripter, lim strategy.Limit, opts []strategy.Option) error {
	if rdb == nil {
		return fmt.Errorf("%w: %s: redis client is nil", strategy.ErrInvalidOption, spec.Name)
	}
	p, o, err := Setup(spec, lim, opts)
	if err != nil {
		return err
	}
	if !o.Unbatched {
		rdb = Batched(rdb)
	}
	if err := CheckDurable(spec.Name, rdb, o.Options); err != nil {
		return err
	}
	if !spec.Burst {
		lim.Burst = 0
	}
	r.core = &core[P, S]{spec: spec, rdb: rdb, lim: lim, own: p, opts: o}
	r.shard = strategy.NoShard
	return nil
}

// Limit returns the limit the strategy enforces (Burst 0 when the
// algorithm has none).
func (r *Redis[P, S]) Limit() strategy.Limit { return r.lim }

// HonoursContext reports whether every call returns by its context's
// deadline or cancellation: whether the Redis client does (see
// HonoursContext).
func (r *Redis[P, S]) HonoursContext() bool { return HonoursContext(r.rdb) }

// Client returns the Redis client the strategy's calls go to.
func (r *Redis[P, S]) Client() redis.Scripter { return r.rdb }

// Key returns the Redis key that holds subject's state.
func (r *Redis[P, S]) Key(subject string) string {
	return strategy.KeyFor(r.opts.Prefix, r.spec.Tag, subject, r.shard)
}

// Keys returns the Redis keys of subject's state: Key's one key, or the
// Spec's Keys.
func (r *Redis[P, S]) Keys(subject string) []string {
	if r.spec.Keys != nil {
		return r.spec.Keys(&r.own, r.opts.Prefix, subject, r.shard)
	}
	return []string{r.Key(subject)}
}

// Shard returns the strategy that decides for shard i of every subject,
// under keys of its own (see strategy.KeyFor).
func (r *Redis[P, S]) Shard(i int) strategy.Strategy { return &Redis[P, S]{core: r.core, shard: i} }

// AllowN records n units for key if the algorithm allows them, in one
// script call. n = 0 is Peek.
func (r *Redis[P, S]) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	return r.do(ctx, Req{Op: OpAllow, Key: key, N: n})
}

// Peek reports key's state now without recording anything or writing to
// Redis.
func (r *Redis[P, S]) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return r.do(ctx, Req{Op: OpAllow, Key: key})
}

// Reset deletes key's state.
func (r *Redis[P, S]) Reset(ctx context.Context, key string) error {
	_, err := r.do(ctx, Req{Op: OpReset, Key: key})
	return err
}

// AllowNWith is AllowN under lim instead of the strategy's limit (see
// strategy.LimitOverrider); lim.Window must be the strategy's.
func (r *Redis[P, S]) AllowNWith(ctx context.Context, key string, n int64, lim strategy.Limit) (strategy.Result, error) {
	return r.do(ctx, Req{Op: OpAllow, Key: key, N: n, Limit: lim, With: true})
}

// PeekWith is Peek under lim (see AllowNWith).
func (r *Redis[P, S]) PeekWith(ctx context.Context, key string, lim strategy.Limit) (strategy.Result, error) {
	return r.do(ctx, Req{Op: OpAllow, Key: key, Limit: lim, With: true})
}

// RefundN gives back up to n units key spent that still count, and returns
// key's state after the refund, as Peek reports it, from one script call.
func (r *Redis[P, S]) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	return r.do(ctx, Req{Op: OpRefund, Key: key, N: n})
}

// ValidateLimit returns the error AllowNWith would return for lim, or nil
// (see strategy.LimitOverrider).
func (r *Redis[P, S]) ValidateLimit(lim strategy.Limit) error {
	_, err := r.params(lim, true)
	return err
}

// do runs r as one script call.
func (r *Redis[P, S]) do(ctx context.Context, q Req) (strategy.Result, error) {
	c, err := r.Plan(q)
	if err != nil {
		return strategy.Result{}, err
	}
	c = Run(ctx, r.rdb, c)
	return c.Result, c.Err
}

// params returns the parameters of lim, or the strategy's own unless with.
func (r *core[P, S]) params(lim strategy.Limit, with bool) (*P, error) {
	if !with {
		return &r.own, nil
	}
	if lim.Window != r.lim.Window {
		return nil, strategy.ValidateOverride(r.lim, lim) // the Window's error
	}
	return r.overrides.get(lim, r.spec.Params, &r.own)
}

// Plan returns q as one script call on Client, not yet sent; invalid
// input is an error and no call.
func (r *Redis[P, S]) Plan(q Req) (Call, error) {
	if err := strategy.ValidateKey(q.Key); err != nil {
		return Call{}, err
	}
	if err := strategy.ValidateCost(q.N); err != nil {
		return Call{}, err
	}
	keys := r.Keys(q.Key)
	if q.Op == OpReset {
		return Del(keys...), nil
	}
	p, err := r.params(q.Limit, q.With)
	if err != nil {
		return Call{}, err
	}
	if r.spec.DenyAll != nil && r.spec.DenyAll(p) {
		return Call{Done: true, Decode: true, Result: DenyAll}, nil
	}
	c := Call{Script: r.spec.Script, Keys: keys, Capacity: r.spec.Capacity(p), Decode: true}
	now := NowArg(r.opts.Clock)
	switch {
	case q.Op == OpRefund && q.N > 0:
		c.Script, c.Args = r.spec.Refund, r.spec.RefundArgs(p, &r.own, q.N, now)
	case q.Op == OpRefund:
		c.Args = r.spec.Args(p, &r.own, 0, now)
	default:
		c.Args = r.spec.Args(p, &r.own, q.N, now)
		if q.Ahead > 0 && q.N > 0 {
			c.Args = append(c.Args, q.Ahead)
		}
		if q.N > 0 { // a peek records nothing: no WAIT
			c.Replicas, c.ReplicaTimeout = r.opts.Replicas, r.opts.ReplicaTimeout
		}
	}
	return c, nil
}

// CheckDurable reports an error naming the option when o asks for the
// durability mode (strategy.WithReplicas) and rdb cannot send a WAIT in
// the pipeline of a script call: it must be a Submitter (batch.Client) or
// a Sender (a *redis.Client, *redis.ClusterClient or *redis.Ring, or a type
// embedding one).
func CheckDurable(name string, rdb redis.Scripter, o strategy.Options) error {
	if o.Replicas <= 0 {
		return nil
	}
	if _, ok := rdb.(Submitter); ok {
		return nil
	}
	if _, ok := rdb.(Sender); ok {
		return nil
	}
	return fmt.Errorf("%w: %s: WithReplicas needs a client that pipelines (a *redis.Client, *redis.ClusterClient, *redis.Ring or batch.Client), got %T",
		strategy.ErrInvalidOption, name, rdb)
}

// HonoursContext reports whether every call on rdb returns by its
// context's deadline or cancellation: true when rdb implements
// strategy.ContextHonourer and says so, or has a method
// Options() *redis.Options (a *redis.Client, or any type embedding one,
// such as a tracing wrapper) with ContextTimeoutEnabled set: such a client
// stops reading and writing at the deadline, and dials and waits for a
// pooled connection under the same context. False otherwise: a
// *redis.ClusterClient (loading its slot map is not bound by the call's
// context), a *redis.Ring, a client without the option.
func HonoursContext(rdb redis.Scripter) bool {
	if h, ok := rdb.(strategy.ContextHonourer); ok {
		return h.HonoursContext()
	}
	if c, ok := rdb.(interface{ Options() *redis.Options }); ok {
		o := c.Options()
		return o != nil && o.ContextTimeoutEnabled
	}
	return false
}
