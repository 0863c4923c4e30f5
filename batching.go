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
// *redis.Client, *redis.ClusterClient or *redis.Ring, rdb itself otherwise
// (nil, a batch.Client, a wrapper of the caller's).
func batched(rdb redis.Scripter) redis.Scripter {
	var key any
	switch c := rdb.(type) {
	case *redis.Client:
		key = weak.Make(c)
	case *redis.ClusterClient:
		key = weak.Make(c)
	case *redis.Ring:
		key = weak.Make(c)
	default:
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
