// Package redisx runs the strategies' Lua scripts and decodes their replies.
//
// Every decision script returns either one integer or four.
//
// An allowed decision (retry after 0) whose numbers fit returns the one
// integer
//
//	reset after in ms * (capacity + 1) + remaining
//
// (0 <= remaining <= capacity, and the script checks the value is below
// 2^53 so that Lua's float arithmetic is exact). Every other decision
// returns the table
//
//	{allowed (0 or 1), remaining, retry after in ms (-1: never), reset after in ms}
//
// The one integer spares go-redis decoding an array of boxed integers on
// the common path.
package redisx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/settings"
	"github.com/ratekit/ratelimit/strategy"
)

// ServerTime is the "now" argument that makes a script read the server's TIME.
const ServerTime int64 = -1

// NowArg returns the "now" argument of a script: the client clock's time in
// Unix milliseconds, or ServerTime when c is nil.
func NowArg(c strategy.Clock) int64 {
	if c == nil {
		return ServerTime
	}
	return c.Now().UnixMilli()
}

// Run runs s on rdb with EVALSHA, falling back to EVAL only on an explicit
// NOSCRIPT reply, and decodes its integer array reply into out, which the
// reply must fill exactly. Errors wrap strategy.ErrBackend and the cause.
func Run(ctx context.Context, rdb redis.Scripter, s *redis.Script, keys []string, out []int64, args ...any) error {
	v, err := eval(ctx, rdb, s, keys, args)
	if err != nil {
		return err
	}
	return decode(v, out)
}

// eval runs s on rdb unless ctx is done, and returns its reply; under
// WithQueue it holds the call instead (see Queued). Errors wrap
// strategy.ErrBackend and the cause.
func eval(ctx context.Context, rdb redis.Scripter, s *redis.Script, keys []string, args []any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", strategy.ErrBackend, err)
	}
	if q, ok := ctx.Value(queueKey{}).(*Queued); ok && !q.held {
		q.held, q.rdb, q.script, q.keys, q.args = true, rdb, s, keys, args
		return nil, errQueued
	}
	v, err := s.Run(ctx, rdb, keys, args...).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", strategy.ErrBackend, err)
	}
	return v, nil
}

// decode decodes an integer array reply into out, which it must fill
// exactly.
func decode(v any, out []int64) error {
	arr, ok := v.([]any)
	if !ok || len(arr) != len(out) {
		return fmt.Errorf("%w: script reply: want %d integers, got %T %v", strategy.ErrBackend, len(out), v, v)
	}
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			return fmt.Errorf("%w: script reply element %d: want integer, got %T %v", strategy.ErrBackend, i, e, e)
		}
		out[i] = n
	}
	return nil
}

// Decision runs a decision script (see the package doc) whose capacity is
// capacity, and returns its Result. A table reply is decoded into an array
// on the stack: no allocation per decision beyond what go-redis makes.
func Decision(ctx context.Context, rdb redis.Scripter, s *redis.Script, key string, capacity int64, args ...any) (strategy.Result, error) {
	v, err := eval(ctx, rdb, s, []string{key}, args)
	if err != nil {
		if err == errQueued {
			q := ctx.Value(queueKey{}).(*Queued)
			q.decision, q.capacity = true, capacity
		}
		return strategy.Result{}, err
	}
	return decision(v, capacity)
}

// decision decodes the reply v of a decision script.
func decision(v any, capacity int64) (strategy.Result, error) {
	if x, ok := v.(int64); ok {
		return allowed(x, capacity)
	}
	var out [4]int64
	if err := decode(v, out[:]); err != nil {
		return strategy.Result{}, err
	}
	return ResultOf(out[0] == 1, capacity, out[1], out[2], out[3]), nil
}

// allowed decodes the one-integer reply of an allowed decision (see the
// package doc).
func allowed(x, capacity int64) (strategy.Result, error) {
	if x < 0 {
		return strategy.Result{}, fmt.Errorf("%w: script reply: want a decision, got %d", strategy.ErrBackend, x)
	}
	return ResultOf(true, capacity, x%(capacity+1), 0, x/(capacity+1)), nil
}

// ResultOf builds a Result from a decision in milliseconds; retryMs < 0
// means strategy.Never.
func ResultOf(allowed bool, capacity, remaining, retryMs, resetMs int64) strategy.Result {
	r := strategy.Result{
		Allowed:    allowed,
		Limit:      capacity,
		Remaining:  remaining,
		RetryAfter: time.Duration(retryMs) * time.Millisecond,
		ResetAfter: time.Duration(resetMs) * time.Millisecond,
	}
	if retryMs < 0 {
		r.RetryAfter = strategy.Never
	}
	return r
}

// delScript deletes its keys. Strategies take a redis.Scripter, which has no
// DEL, so Reset goes through a script too.
var delScript = redis.NewScript(`local unpack = table.unpack or unpack; return redis.call('DEL', unpack(KEYS))`)

// Del deletes keys (which must share a hash slot on a cluster).
func Del(ctx context.Context, rdb redis.Scripter, keys ...string) error {
	_, err := eval(ctx, rdb, delScript, keys, nil)
	return err
}

// Setup validates lim, runs checks on it (a strategy's own bounds, whose
// errors may name the package in their detail), then applies opts: the
// order in which each constructor reports a bad input. The errors carry the
// sentinels' one "ratelimit: " prefix and no other.
func Setup(lim strategy.Limit, opts []strategy.Option, checks ...func(strategy.Limit) error) (settings.Options, error) {
	if err := lim.Validate(); err != nil {
		return settings.Options{}, err
	}
	for _, check := range checks {
		if err := check(lim); err != nil {
			return settings.Options{}, err
		}
	}
	o := settings.Apply(opts)
	if o.Err != nil {
		return o, o.Err
	}
	return o, nil
}

// Base is the plumbing every Redis strategy shares: the client, the limit,
// the options and the algorithm's key tag. A strategy's Limiter holds one
// and delegates its exported methods to it. It is safe for concurrent use.
type Base struct {
	RDB  redis.Scripter
	Lim  strategy.Limit
	Opts settings.Options
	Tag  string
}

// NewBase checks rdb, then runs Setup. A nil rdb is an error naming pkg.
func NewBase(pkg, tag string, rdb redis.Scripter, lim strategy.Limit, opts []strategy.Option, checks ...func(strategy.Limit) error) (Base, error) {
	if rdb == nil {
		return Base{}, fmt.Errorf("%w: %s: redis client is nil", strategy.ErrInvalidOption, pkg)
	}
	o, err := Setup(lim, opts, checks...)
	if err != nil {
		return Base{}, err
	}
	return Base{RDB: rdb, Lim: lim, Opts: o, Tag: tag}, nil
}

// HonoursContext reports whether b's client honours contexts (see
// HonoursContext).
func (b *Base) HonoursContext() bool { return HonoursContext(b.RDB) }

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

// Key returns the Redis key of subject, unsharded.
func (b *Base) Key(subject string) string {
	return strategy.KeyFor(b.Opts.Prefix, b.Tag, subject, strategy.NoShard)
}

// KeyN validates subject and the cost n, and returns the Redis key of
// subject on the shard that ctx carries.
func (b *Base) KeyN(ctx context.Context, subject string, n int64) (string, error) {
	if err := strategy.ValidateKey(subject); err != nil {
		return "", err
	}
	if err := strategy.ValidateCost(n); err != nil {
		return "", err
	}
	return strategy.KeyFor(b.Opts.Prefix, b.Tag, subject, keys.Shard(ctx)), nil
}

// serverTime is ServerTime, boxed once.
var serverTime any = ServerTime

// Now is the script's "now" argument: the client clock's time in Unix
// milliseconds, or ServerTime (boxed once) to read the server's.
func (b *Base) Now() any {
	if b.Opts.Clock == nil {
		return serverTime
	}
	return NowArg(b.Opts.Clock)
}

// Reset deletes the key of subject on the shard that ctx carries.
func (b *Base) Reset(ctx context.Context, subject string) error {
	if err := strategy.ValidateKey(subject); err != nil {
		return err
	}
	return Del(ctx, b.RDB, strategy.KeyFor(b.Opts.Prefix, b.Tag, subject, keys.Shard(ctx)))
}

// DenyAll is the decision of a Limit of 0: nothing ever passes.
func DenyAll(ctx context.Context) (strategy.Result, error) {
	if err := ctx.Err(); err != nil {
		return strategy.Result{}, fmt.Errorf("%w: %w", strategy.ErrBackend, err)
	}
	return ResultOf(false, 0, 0, -1, 0), nil
}

// Queueable is implemented by the Redis strategies of this module: their
// Peek and Reset each make exactly one call through this package (Decision
// or Del) and nothing else, so that a caller may hold it with WithQueue and
// send it with others in one pipeline (see Exec). Its method is unexported,
// so only a type that embeds Queue implements it.
type Queueable interface {
	queueable()
}

// Queue implements Queueable. A strategy embeds it through an unexported
// alias (type queueable = redisx.Queue), so that neither the field nor the
// method shows in the strategy's documentation.
type Queue struct{}

func (Queue) queueable() {}

type queueKey struct{}

// errQueued is what a call made under WithQueue returns: it was held, not run.
var errQueued = errors.New("redisx: call held for a pipeline")

// Queued is one script call of a Queueable strategy, held instead of run
// (see WithQueue), then its outcome once Exec ran it.
type Queued struct {
	held     bool
	rdb      redis.Scripter
	script   *redis.Script
	keys     []string
	args     []any
	decision bool  // a Decision: Result is decoded from the reply
	capacity int64 // the Decision's capacity

	Result strategy.Result // a Decision's Result, after Exec
	Err    error           // the call's error, after Exec
}

// WithQueue returns ctx under which the next script call of a Queueable
// strategy is held in q instead of run: the strategy's method then returns
// an error, to be ignored when q.Held(), and Exec runs the call.
func WithQueue(ctx context.Context, q *Queued) context.Context {
	return context.WithValue(ctx, queueKey{}, q)
}

// Held reports whether a call was held in q.
func (q *Queued) Held() bool { return q.held }

// Client returns the client a held call is to run on, or nil.
func (q *Queued) Client() redis.Scripter { return q.rdb }

// pipeliner is a client that can pipeline: *redis.Client, *redis.ClusterClient
// (which splits a pipeline per node itself) and *redis.Ring.
type pipeliner interface {
	Pipeline() redis.Pipeliner
}

// Exec runs the held calls qs and sets each one's Result and Err: the calls
// on one client in one pipeline of EVALSHA when the client can pipeline
// (a *redis.ClusterClient splits it per node, and sends to the nodes
// concurrently), one by one otherwise. When some call is answered NOSCRIPT,
// its script is loaded (SCRIPT LOAD, on every node of a cluster) and those
// calls are sent again in a second pipeline. Errors wrap
// strategy.ErrBackend and the cause.
func Exec(ctx context.Context, qs []*Queued) {
	for len(qs) > 0 {
		// the calls on the client of qs[0] (a sharded subject has one client)
		rdb := qs[0].rdb
		var same, rest []*Queued
		for _, q := range qs {
			if q.rdb == rdb {
				same = append(same, q)
			} else {
				rest = append(rest, q)
			}
		}
		execOn(ctx, rdb, same)
		qs = rest
	}
}

// execOn runs qs, all on rdb.
func execOn(ctx context.Context, rdb redis.Scripter, qs []*Queued) {
	p, ok := rdb.(pipeliner)
	if !ok || len(qs) == 1 {
		for _, q := range qs {
			q.finish(eval(ctx, rdb, q.script, q.keys, q.args))
		}
		return
	}
	if err := ctx.Err(); err != nil {
		for _, q := range qs {
			q.finish(nil, fmt.Errorf("%w: %w", strategy.ErrBackend, err))
		}
		return
	}
	retry := pipeline(ctx, p, qs)
	if len(retry) == 0 {
		return
	}
	// The server lost the scripts (SCRIPT FLUSH, a restart, a new node):
	// load each once (on every node of a cluster) and send those calls again.
	loaded := map[*redis.Script]error{}
	for _, q := range retry {
		if _, ok := loaded[q.script]; !ok {
			loaded[q.script] = q.script.Load(ctx, rdb).Err()
		}
	}
	for _, q := range pipeline(ctx, p, retry) {
		q.finish(nil, fmt.Errorf("%w: %w", strategy.ErrBackend, loaded[q.script]))
	}
}

// pipeline sends qs in one pipeline of EVALSHA, finishes each call, and
// returns those answered NOSCRIPT, unfinished.
func pipeline(ctx context.Context, p pipeliner, qs []*Queued) (noscript []*Queued) {
	pipe := p.Pipeline()
	cmds := make([]*redis.Cmd, len(qs))
	for i, q := range qs {
		cmds[i] = q.script.EvalSha(ctx, pipe, q.keys, q.args...)
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	for i, q := range qs {
		v, err := cmds[i].Result()
		switch {
		case err != nil && redis.HasErrorPrefix(err, "NOSCRIPT"):
			noscript = append(noscript, q)
		case err != nil:
			q.finish(nil, fmt.Errorf("%w: %w", strategy.ErrBackend, err))
		default:
			q.finish(v, nil)
		}
	}
	return noscript
}

// finish records the reply v of q's call, or its error.
func (q *Queued) finish(v any, err error) {
	switch {
	case err != nil:
		q.Err = err
	case q.decision:
		q.Result, q.Err = decision(v, q.capacity)
	}
}
