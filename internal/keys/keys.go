// Package keys carries a shard index from the sharded wrapper to the
// strategies it wraps, through the context, so that a shard's key can never
// be forged by a caller's subject.
package keys

import "context"

type shardKey struct{}

// WithShard returns ctx carrying shard index i.
func WithShard(ctx context.Context, i int) context.Context {
	return context.WithValue(ctx, shardKey{}, i)
}

// Shard returns the shard index ctx carries, or -1 (strategy.NoShard).
func Shard(ctx context.Context) int {
	if i, ok := ctx.Value(shardKey{}).(int); ok {
		return i
	}
	return -1
}

// ShardAware is implemented by the strategies of this module: they read the
// shard index from the context. The method is never called.
type ShardAware interface {
	ShardAware()
}
