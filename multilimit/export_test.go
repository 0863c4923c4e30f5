package multilimit

import (
	"context"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/rules"
)

// Combine is rules.Combine, for the tests.
var Combine = rules.Combine

// LogOf returns how many entries the twin holds for key under rule i (a
// sliding log).
func LogOf(l *Local, key string, i int) (entries int) {
	l.e.Update(context.Background(), engine.Req{Op: engine.OpAllow, Key: key}, func(s *rules.State, p *rules.Set, now int64) int64 {
		_, _, expires := p.Decide(s, now, 0, false) // a peek: nothing recorded
		entries = s.Entries(i)
		return expires
	})
	return entries
}
