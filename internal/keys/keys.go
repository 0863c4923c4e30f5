// Package keys carries a shard index from the sharded wrapper to the
// strategies it wraps, through the context, so that a shard's key can never
// be forged by a caller's subject; it also escapes subjects for
// strategy.KeyFor.
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
// shard index from the context. Its method is unexported, so only a type
// that embeds Aware implements it.
type ShardAware interface {
	shardAware()
}

// Aware implements ShardAware. A strategy embeds it through an unexported
// alias (type shardAware = keys.Aware), so that neither the field nor the
// method shows in the strategy's documentation.
type Aware struct{}

func (Aware) shardAware() {}

// AppendEscaped appends subject to b with '%', '{', '}' and '#'
// percent-escaped.
func AppendEscaped(b []byte, subject string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(subject); i++ {
		c := subject[i]
		switch c {
		case '%', '{', '}', '#':
			b = append(b, '%', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return b
}
