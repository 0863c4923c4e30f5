package compactlog

import (
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/strategy"
)

// NewRanges is New with the values read and written by ranges whatever
// their size, so that tests run that path with small limits too.
func NewRanges(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	s := spec
	s.Params = func(lim strategy.Limit, own *params) (params, error) {
		p, err := paramsOf(lim, own)
		p.rangesArg = int64(1)
		return p, err
	}
	return engine.New[Limiter](&s, rdb, lim, opts)
}
