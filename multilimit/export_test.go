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
	l.store.Do(localstore.Key{Subject: key, Shard: strategy.NoShard}, now, func(s *state) int64 {
		var expires int64
		for j, r := range l.rules {
			if s.rules == nil {
				break
			}
			if j == i {
				entries = s.rules[j].log.Len()
			}
			if t, ok := s.rules[j].log.Newest(); r.kind == kindSlidingLog && ok {
				expires = max(expires, t+r.windowMs)
			} else if r.kind == kindFixedWindow && s.rules[j].count > 0 {
				expires = max(expires, s.rules[j].start+r.windowMs)
			}
		}
		return expires
	})
	return entries
}
