package ratelimit

import (
	"runtime"
	"sync"
	"weak"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
)

// batchers holds the batch.Client that New puts in front of each go-redis
// client, so that every Limiter on one client (a Set's, a reload's) shares
// its queues. It holds both weakly: a batch.Client lives as long as a
// Limiter uses it, and a go-redis client is collected when its owner drops
// it. A batch.Client holds a goroutine only while calls wait, so one no
// Limiter uses is collected without a Close.
var batchers struct {
	mu sync.Mutex
	m  map[any]weak.Pointer[batch.Client] // by weak.Pointer to the go-redis client
}

// batched returns the shared batch.Client in front of rdb when rdb is a
// *redis.Client, *redis.ClusterClient or *redis.Ring with
// ContextTimeoutEnabled, rdb itself otherwise (nil, a batch.Client, a
// wrapper of the caller's, a client that ignores deadlines: through a
// batch.Client its every call would be a hand-off to a flusher, measured
// slower than alone up to 8 callers).
func batched(rdb redis.Scripter) redis.Scripter {
	var key any
	cte := false // batch sends a lone call on its caller's goroutine only then
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
	b, err := batch.New(rdb)
	if err != nil { // cannot happen for these clients with no options
		return rdb
	}
	if batchers.m == nil {
		batchers.m = map[any]weak.Pointer[batch.Client]{}
	}
	batchers.m[key] = weak.Make(b)
	runtime.AddCleanup(b, forget, key)
	return b
}

// forget drops key's entry once its batch.Client is collected, unless a
// newer one took its place.
func forget(key any) {
	batchers.mu.Lock()
	defer batchers.mu.Unlock()
	if batchers.m[key].Value() == nil {
		delete(batchers.m, key)
	}
}
