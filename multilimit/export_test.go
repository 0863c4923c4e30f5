package multilimit

import (
	"github.com/ratekit/ratelimit/internal/localstore"
	"github.com/ratekit/ratelimit/strategy"
)

// Combine is combine, for the tests.
var Combine = combine

// LogOf returns how many entries the twin holds for key under rule i (a
// sliding log).
func LogOf(l *Local, key string, i int) (entries int) {
	now := l.clock.Now().UnixMilli()
	l.store.Do(localstore.Key{Subject: key, Shard: strategy.NoShard}, now, func(s *[]ruleState) int64 {
		var expires int64
		for j := range *s {
			if j == i {
				entries = (*s)[j].log.Len()
			}
			expires = max(expires, (*s)[j].expires(&l.rules[j]))
		}
		return expires
	})
	return entries
}
