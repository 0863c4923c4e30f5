package engine

import (
	"runtime"
	"sync"
	"weak"

	"github.com/redis/go-redis/v9"
)

// batchers holds the Batcher that the constructors put in front of each
// go-redis client, so that every strategy on one client (a Set's, a
// reload's, a sharded limiter's shards) shares its queues. It holds both
// weakly: a Batcher lives as long as a strategy uses it, and a go-redis
// client is collected when its owner drops it. A Batcher holds a goroutine
// only while calls wait, so one no strategy uses is collected without a
// Close.
var batchers struct {
	mu sync.Mutex
	m  map[any]weak.Pointer[Batcher] // by weak.Pointer to the go-redis client
}

// Batched returns the shared Batcher in front of rdb when rdb is a
// *redis.Client, *redis.ClusterClient or *redis.Ring with
// ContextTimeoutEnabled, rdb itself otherwise (nil, a Batcher, a
// batch.Client, a wrapper of the caller's, a client that ignores
// deadlines: through a Batcher its every call would be a hand-off to a
// flusher, measured slower than alone up to 8 callers).
func Batched(rdb redis.Scripter) redis.Scripter {
	var key any
	cte := false // a Batcher sends a lone call on its caller's goroutine only then
	switch c := rdb.(type) {
	case *redis.Client:
		key, cte = weak.Make(c), c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		key, cte = weak.Make(c), c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		key, cte = weak.Make(c), c.Options().ContextTimeoutEnabled
	}
	if !cte {
		return rdb
	}
	batchers.mu.Lock()
	defer batchers.mu.Unlock()
	if b := batchers.m[key].Value(); b != nil {
		return b
	}
	b := NewBatcher(rdb, DefaultBatchInFlight, DefaultBatchMax, DefaultBatchQueue)
	if batchers.m == nil {
		batchers.m = map[any]weak.Pointer[Batcher]{}
	}
	batchers.m[key] = weak.Make(b)
	runtime.AddCleanup(b, forget, key)
	return b
}

// forget drops key's entry once its Batcher is collected, unless a newer
// one took its place.
func forget(key any) {
	batchers.mu.Lock()
	defer batchers.mu.Unlock()
	if batchers.m[key].Value() == nil {
		delete(batchers.m, key)
	}
}
