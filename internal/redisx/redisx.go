// Package redisx runs the strategies' Lua scripts and decodes their replies.
//
// Every decision script returns the same four integers:
//
//	{allowed (0 or 1), remaining, retry after in ms (-1: never), reset after in ms}
package redisx

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

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
// NOSCRIPT reply, and returns its integer array reply, which must have want
// elements. Errors wrap strategy.ErrBackend and the cause.
func Run(ctx context.Context, rdb redis.Scripter, s *redis.Script, keys []string, want int, args ...any) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", strategy.ErrBackend, err)
	}
	v, err := s.Run(ctx, rdb, keys, args...).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", strategy.ErrBackend, err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) != want {
		return nil, fmt.Errorf("%w: script reply: want %d integers, got %T %v", strategy.ErrBackend, want, v, v)
	}
	out := make([]int64, want)
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: script reply element %d: want integer, got %T %v", strategy.ErrBackend, i, e, e)
		}
		out[i] = n
	}
	return out, nil
}

// Decision runs a decision script (see the package doc) and returns its Result.
func Decision(ctx context.Context, rdb redis.Scripter, s *redis.Script, key string, capacity int64, args ...any) (strategy.Result, error) {
	v, err := Run(ctx, rdb, s, []string{key}, 4, args...)
	if err != nil {
		return strategy.Result{}, err
	}
	return ResultOf(v[0] == 1, capacity, v[1], v[2], v[3]), nil
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
var delScript = redis.NewScript(`return redis.call('DEL', unpack(KEYS))`)

// Del deletes keys (which must share a hash slot on a cluster).
func Del(ctx context.Context, rdb redis.Scripter, keys ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", strategy.ErrBackend, err)
	}
	if err := delScript.Run(ctx, rdb, keys).Err(); err != nil {
		return fmt.Errorf("%w: %w", strategy.ErrBackend, err)
	}
	return nil
}
