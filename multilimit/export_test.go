package multilimit

import (
	"context"

	"github.com/ratekit/ratelimit/internal/engine"
)

// Combine is combine, for the tests.
var Combine = combine

// LogOf returns how many entries the twin holds for key under rule i (a
// sliding log).
func LogOf(l *Local, key string, i int) (entries int) {
	l.e.Update(context.Background(), engine.Req{Op: engine.OpAllow, Key: key}, func(s *[]ruleState, p *set, _ int64) int64 {
		var expires int64
		for j := range *s {
			if j == i {
				entries = (*s)[j].log.Len()
			}
			expires = max(expires, (*s)[j].of(p.rules[j].log).Expires(p.rules[j].window))
		}
		return expires
	})
	return entries
}
