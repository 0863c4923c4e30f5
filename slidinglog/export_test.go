package slidinglog

import (
	"context"

	"github.com/ratekit/ratelimit/internal/unitlog"
	"github.com/ratekit/ratelimit/strategy"
)

// LogOf returns how many entries the twin holds for key (unsharded): the
// length of the log a peek decides on. It swaps the twin's decide for the
// peek's duration, so no other Local may decide meanwhile.
func LogOf(l *Local, key string) (entries int) {
	decide := spec.Decide
	defer func() { spec.Decide = decide }()
	spec.Decide = func(g *unitlog.Log, p, own *params, now, n int64) (strategy.Result, int64) {
		entries = g.Len()
		return decide(g, p, own, now, n)
	}
	if _, err := l.Peek(context.Background(), key); err != nil {
		panic(err)
	}
	return entries
}
