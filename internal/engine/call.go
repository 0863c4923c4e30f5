// Package engine implements the strategy contract once, for every
// algorithm of this module: a generic Redis strategy (Redis) and a generic
// in-process twin (Local) over an algorithm's Spec, and the one executor
// (Run, Exec) that sends script calls, direct or pipelined, and owns NOSCRIPT
// recovery.
//
// An algorithm package holds only what is its own: its Lua, a pure decide
// over its state for the twin, its script arguments and its capacity rule,
// gathered in a Spec.
//
// Every decision script returns either one integer or four. An allowed
// decision (retry after 0) whose numbers fit returns the one integer
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
package engine

import (
	"context"
	_ "embed"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/strategy"
)

// Call is one script call as a value: what a strategy hands a pipeliner
// (sharded, compare, batch) instead of running it.
type Call struct {
	Script *redis.Script
	Keys   []string
	Args   []any
	// Capacity is the Result.Limit of a decision; a Call with Decode false
	// (Del) has no Result.
	Capacity int64
	Decode   bool
	// Raw makes the Call a redis.Scripter's (package batch), not a
	// strategy's: its reply is kept as is in Reply and its errors are not
	// wrapped.
	Raw bool
	// Done, when set, is the Call's outcome known without Redis (a limit
	// of 0 denies everything): Run and Exec return it after checking ctx.
	Done bool
	// SHA, when Script is nil, is the digest of a script whose text the
	// caller does not know (a Raw call's EvalSha): a NOSCRIPT reply is
	// then its error.
	SHA string
	// Replicas, when > 0, makes the call durable (strategy.WithReplicas):
	// Send follows it, in its pipeline, with WAIT (one for the whole
	// pipeline, for the most replicas and the longest ReplicaTimeout of
	// its durable calls), and a reply that fewer than Replicas replicas
	// acknowledged is a backend failure wrapping
	// strategy.ErrNotReplicated.
	Replicas       int
	ReplicaTimeout time.Duration

	Result strategy.Result // after Run or Exec
	Err    error           // after Run or Exec; wraps strategy.ErrBackend for Redis failures (unless Raw)
	// Reply is the script's reply after Run or Exec when Decode is false,
	// for a caller that decodes a reply of its own shape (multilimit's, of
	// several rules) with DecodeInts, or a Raw call's.
	Reply any
}

//go:embed prelude.lua
var prelude string

// Script returns the script of the Lua sources srcs, joined after the
// engine's prelude (now_ms: the "now" argument, or the server's TIME).
func Script(srcs ...string) *redis.Script {
	src := prelude
	for _, s := range srcs {
		src += s
	}
	s := redis.NewScript(src)
	manyOf.Store(s, manyScript(srcs))
	return s
}

// ServerTime is the "now" argument that makes a script read the server's
// TIME.
const ServerTime int64 = -1

// serverTime is ServerTime, boxed once.
var serverTime any = ServerTime

// NowArg returns the "now" argument of a script: the client clock's time
// in Unix milliseconds, or ServerTime (boxed once) when c is nil.
func NowArg(c strategy.Clock) any {
	if c == nil {
		return serverTime
	}
	return c.Now().UnixMilli()
}

// backend wraps err as a backend failure.
func backend(err error) error { return fmt.Errorf("%w: %w", strategy.ErrBackend, err) }

// Run sends c on rdb (EVALSHA, then EVAL only on an explicit NOSCRIPT
// reply) unless ctx is done (then c's error is ctx's, see Ended), and
// returns c with its outcome. A Submitter
// (package batch) takes the call instead, to send it in a pipeline. c
// goes by value so that the direct path allocates no Call.
func Run(ctx context.Context, rdb redis.Scripter, c Call) Call {
	if err := ctx.Err(); err != nil {
		c.Ended(err)
		return c
	}
	if c.Done {
		return c
	}
	if s, ok := rdb.(Submitter); ok {
		return s.Submit(ctx, c)
	}
	if c.Replicas > 0 {
		return runDurable(ctx, rdb, c)
	}
	v, err := c.Script.Run(ctx, rdb, c.Keys, c.Args...).Result()
	c.finish(v, err)
	return c
}

// runDurable sends the durable call c, and WAIT after it, in a pipeline
// on rdb (with Send: on a cluster or a Ring, to the node of c's keys).
func runDurable(ctx context.Context, rdb redis.Scripter, c Call) Call {
	p, ok := rdb.(Sender)
	if !ok {
		c.Fail(errNoPipeline)
		return c
	}
	one := [1]*Call{&c}
	Send(ctx, Target{Node: p, Load: rdb}, one[:])
	return c
}

// errNoPipeline is the error of a durable call on a client that cannot
// pipeline, which the constructors refuse.
var errNoPipeline = fmt.Errorf("%w: the durability mode needs a client that pipelines", strategy.ErrInvalidOption)

// finish records the reply v of c, or its error.
func (c *Call) finish(v any, err error) {
	switch {
	case c.Raw:
		c.Reply, c.Err = v, err
	case err != nil:
		c.Err = backend(err)
	case c.Decode:
		c.Result, c.Err = Decode(v, c.Capacity)
	default:
		c.Reply = v
	}
}

// Ended records ctx's error err as c's outcome: the caller's own
// cancellation or deadline, before Redis answered, never a backend
// failure (it does not wrap strategy.ErrBackend).
func (c *Call) Ended(err error) {
	if c.Raw {
		c.Err = err
		return
	}
	c.Err = ended(err)
}

// ended wraps ctx's error err as a call's that its caller ended.
func ended(err error) error { return fmt.Errorf("ratelimit: no decision: %w", err) }

// Fail records err as c's outcome, as a backend failure unless c is Raw.
func (c *Call) Fail(err error) {
	if c.Raw {
		c.Err = err
		return
	}
	c.Err = backend(err)
}

// Exec sends the calls cs, all on rdb, and sets each one's Result and Err:
// with Send, in one pipeline, when rdb can pipeline (a *redis.Client,
// *redis.ClusterClient or *redis.Ring); submitted together to a Submitter
// (package batch, which pipelines concurrent calls); one by one with Run
// otherwise.
func Exec(ctx context.Context, rdb redis.Scripter, cs []*Call) {
	if _, ok := rdb.(Submitter); ok && len(cs) > 1 {
		var wg sync.WaitGroup
		for _, c := range cs[1:] {
			wg.Go(func() { *c = Run(ctx, rdb, *c) })
		}
		*cs[0] = Run(ctx, rdb, *cs[0])
		wg.Wait()
		return
	}
	p, ok := rdb.(Sender)
	if !ok || len(cs) <= 1 {
		for _, c := range cs {
			*c = Run(ctx, rdb, *c)
		}
		return
	}
	if err := ctx.Err(); err != nil {
		for _, c := range cs {
			c.Ended(err)
		}
		return
	}
	Send(ctx, Target{Node: p, Load: rdb}, cs)
}

// Decode decodes the reply v of a decision script whose capacity is
// capacity (see the package doc). A table reply is decoded into an array
// on the stack: no allocation beyond what go-redis makes.
func Decode(v any, capacity int64) (strategy.Result, error) {
	if x, ok := v.(int64); ok {
		if x < 0 {
			return strategy.Result{}, fmt.Errorf("%w: script reply: want a decision, got %d", strategy.ErrBackend, x)
		}
		return ResultOf(true, capacity, x%(capacity+1), 0, x/(capacity+1)), nil
	}
	var out [4]int64
	if err := DecodeInts(v, out[:]); err != nil {
		return strategy.Result{}, err
	}
	return ResultOf(out[0] == 1, capacity, out[1], out[2], out[3]), nil
}

// DecodeInts decodes an integer array reply into out, which it must fill
// exactly.
func DecodeInts(v any, out []int64) error {
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

// DenyAll is the decision of a limit that lets nothing pass, whatever
// the state (a Limit of 0): capacity 0, never.
var DenyAll = ResultOf(false, 0, 0, -1, 0)

// delScript deletes its keys. Strategies take a redis.Scripter, which has
// no DEL, so Reset goes through a script too.
var delScript = redis.NewScript(`local unpack = table.unpack or unpack; return redis.call('DEL', unpack(KEYS))`)

// Del returns the call that deletes keys (which must share a hash slot on
// a cluster).
func Del(keys ...string) Call { return Call{Script: delScript, Keys: keys} }
