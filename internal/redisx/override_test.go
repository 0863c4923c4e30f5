package redisx

import (
	"testing"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// TestCache: what was put is found by its limit, and at most maxCached
// limits are kept, the oldest dropped first.
func TestCache(t *testing.T) {
	var c Cache[int64]
	lim := func(i int) strategy.Limit { return strategy.Limit{Limit: int64(i), Window: time.Second} }
	if _, ok := c.Get(lim(1)); ok {
		t.Fatal("empty cache: Get found something")
	}
	for i := range maxCached + 4 {
		c.Put(lim(i), int64(i)*10)
	}
	for i := range maxCached + 4 {
		v, ok := c.Get(lim(i))
		switch want := i >= 4; {
		case ok != want:
			t.Errorf("Get(limit %d): found %v, want %v", i, ok, want)
		case ok && v != int64(i)*10:
			t.Errorf("Get(limit %d) = %d, want %d", i, v, i*10)
		}
	}
	if _, ok := c.Get(strategy.Limit{Limit: 5, Window: time.Second, Burst: 1}); ok {
		t.Error("a limit that differs only in Burst was found")
	}
}
