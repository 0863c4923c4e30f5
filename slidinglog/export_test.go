package slidinglog

import (
	"github.com/ratekit/ratelimit/internal/localstore"
	"github.com/ratekit/ratelimit/internal/unitlog"
	"github.com/ratekit/ratelimit/strategy"
)

// LogOf returns how many entries the twin holds for key (unsharded).
func LogOf(l *Local, key string) (entries int) {
	now := l.t.Clock.Now().UnixMilli()
	l.t.Store.Do(localstore.Key{Subject: key, Shard: strategy.NoShard}, now, func(g *unitlog.Log) int64 {
		entries = g.Len()
		if t, ok := g.Newest(); ok {
			return t + l.windowMs
		}
		return 0
	})
	return entries
}
