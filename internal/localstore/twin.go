package localstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/settings"
	"github.com/ratekit/ratelimit/strategy"
)

// Twin is the plumbing every local twin shares: the limit, the clock and
// the store of V. A strategy's Local holds one and delegates its exported
// methods to it. It is safe for concurrent use.
type Twin[V any] struct {
	Lim   strategy.Limit
	Clock strategy.Clock
	Store *Store[V]
}

// NewTwin returns a Twin on o's clock, time.Now when o has none, whose store
// holds at most o.MaxSubjects subjects (strategy.DefaultMaxSubjects when 0),
// calls o.OnEvict for each one evicted, and is swept every sweepMs
// milliseconds (the window), or MinSweep when that is longer.
func NewTwin[V any](lim strategy.Limit, o settings.Options, sweepMs int64) Twin[V] {
	c := o.Clock
	if c == nil {
		c = strategy.ClockFunc(time.Now)
	}
	st := NewStore[V](Config{
		MaxSubjects: o.MaxSubjects,
		Unit:        time.Millisecond,
		Sweep:       max(time.Duration(sweepMs)*time.Millisecond, MinSweep),
		Now:         func() int64 { return c.Now().UnixMilli() },
		OnEvict:     o.OnEvict,
	})
	return Twin[V]{Lim: lim, Clock: c, Store: st}
}

// Start validates subject and the cost n and, unless ctx is done, returns
// the store key of subject on the shard that ctx carries and the clock's
// time in Unix milliseconds: what every twin's decision begins with. A done
// ctx gives an error wrapping strategy.ErrBackend.
func (t *Twin[V]) Start(ctx context.Context, subject string, n int64) (Key, int64, error) {
	if err := strategy.ValidateKey(subject); err != nil {
		return Key{}, 0, err
	}
	if err := strategy.ValidateCost(n); err != nil {
		return Key{}, 0, err
	}
	if err := ctx.Err(); err != nil {
		return Key{}, 0, fmt.Errorf("%w: %w", strategy.ErrBackend, err)
	}
	return Key{Subject: subject, Shard: keys.Shard(ctx)}, t.Clock.Now().UnixMilli(), nil
}

// Reset forgets subject on the shard that ctx carries.
func (t *Twin[V]) Reset(ctx context.Context, subject string) error {
	if err := strategy.ValidateKey(subject); err != nil {
		return err
	}
	t.Store.Delete(Key{Subject: subject, Shard: keys.Shard(ctx)})
	return nil
}

// Subjects returns how many subjects the twin holds state for.
func (t *Twin[V]) Subjects() int { return t.Store.Len() }

// Evicted returns how many subjects the twin evicted to make room for others.
func (t *Twin[V]) Evicted() uint64 { return t.Store.Evicted() }
