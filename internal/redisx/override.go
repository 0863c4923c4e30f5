package redisx

import (
	"sync/atomic"

	"github.com/ratekit/ratelimit/strategy"
)

// maxCached is how many per-call limits a Cache remembers: a few tiers,
// whatever a caller passes.
const maxCached = 16

// Cache remembers what a Redis strategy derives from a per-call limit (its
// script arguments, boxed once, and its checks passed), for the few limits
// a caller passes (tiers), so that AllowNWith allocates no more than
// AllowN. It holds at most 16 limits, dropping the oldest. The zero Cache
// is empty and ready; it is safe for concurrent use.
type Cache[T any] struct {
	p atomic.Pointer[[]cached[T]]
}

type cached[T any] struct {
	lim strategy.Limit
	v   T
}

// Get returns what was put for lim, if anything.
func (c *Cache[T]) Get(lim strategy.Limit) (T, bool) {
	if p := c.p.Load(); p != nil {
		for i := range *p {
			if (*p)[i].lim == lim {
				return (*p)[i].v, true
			}
		}
	}
	var zero T
	return zero, false
}

// Put remembers v for lim (copy on write: concurrent Puts may drop one of
// them, which is then computed again).
func (c *Cache[T]) Put(lim strategy.Limit, v T) {
	var next []cached[T]
	if p := c.p.Load(); p != nil {
		next = append(next, *p...)
	}
	if len(next) >= maxCached {
		next = next[1:]
	}
	next = append(next, cached[T]{lim: lim, v: v})
	c.p.Store(&next)
}
