package sharded

import (
	"context"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

// legacy serves the strategies of this module not yet on the engine (not
// engine.Sharder): they read the shard index from the context
// (keys.ShardAware) and hold their Peek and Reset calls for a pipeline
// (redisx.Queueable). It goes once every strategy of this module is an
// engine.Sharder.
type legacy struct {
	aware     []bool // st[i] implements keys.ShardAware
	queueable []bool // st[i] implements redisx.Queueable
}

func newLegacy(n int) legacy {
	return legacy{aware: make([]bool, n), queueable: make([]bool, n)}
}

// see records what shard i's strategy st, not an engine.Sharder, is.
func (g legacy) see(i int, st strategy.Strategy) {
	_, g.aware[i] = st.(keys.ShardAware)
	_, g.queueable[i] = st.(redisx.Queueable)
}

// with returns ctx carrying shard i.
func (legacy) with(ctx context.Context, i int) context.Context { return keys.WithShard(ctx, i) }

// held is the calls of Queueable shards held for one pipeline, and which
// shards hold handled (held, or decided at once).
type held struct {
	queued []redisx.Queued
	done   []bool
}

func (h *held) has(i int) bool { return h != nil && h.done[i] }

// hold holds the Peek (Reset when res is nil) of key of every Queueable
// shard not planned; a call decided without Redis, or invalid, goes to res
// and errs at once.
func (g legacy) hold(ctx context.Context, l *Limiter, key string, res []strategy.Result, planned []*engine.Call, errs []error) *held {
	var h *held
	for i := range l.st {
		if !g.queueable[i] || planned[i] != nil || errs[i] != nil {
			continue
		}
		if h == nil {
			h = &held{queued: make([]redisx.Queued, len(l.st)), done: make([]bool, len(l.st))}
		}
		h.done[i] = true
		q := &h.queued[i]
		r, err := l.call(redisx.WithQueue(ctx, q), i, key, func(st strategy.Strategy, ctx context.Context, key string) (strategy.Result, error) {
			if res == nil {
				return strategy.Result{}, st.Reset(ctx, key)
			}
			return st.Peek(ctx, key)
		})
		if !q.Held() { // decided without Redis (a limit of 0), or bad input
			errs[i] = err
			if res != nil {
				res[i] = r
			}
		}
	}
	return h
}

// exec sends the held calls and records their outcomes.
func (h *held) exec(ctx context.Context, res []strategy.Result, errs []error) {
	if h == nil {
		return
	}
	var qs []*redisx.Queued
	for i := range h.queued {
		if h.queued[i].Held() {
			qs = append(qs, &h.queued[i])
		}
	}
	redisx.Exec(ctx, qs)
	for i := range h.queued {
		if q := &h.queued[i]; q.Held() {
			errs[i] = q.Err
			if res != nil {
				res[i] = q.Result
			}
		}
	}
}
