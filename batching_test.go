package ratelimit

import (
	"runtime"
	"testing"
	"weak"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
)

// TestBatchedShared checks that the Limiters on one go-redis client with
// ContextTimeoutEnabled share one batch.Client, that other clients are
// passed through, and that the shared Client is forgotten once nothing uses
// it, without a Close.
func TestBatchedShared(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { plain.Close() })
	if got := batched(plain); got != plain {
		t.Fatalf("batched(client without ContextTimeoutEnabled) = %T, want it unchanged", got)
	}
	a, b := batched(rdb), batched(rdb)
	if _, ok := a.(*batch.Client); !ok || a != b {
		t.Fatalf("batched(client) = %T %p, %p; want one shared *batch.Client", a, a, b)
	}
	if other := batched(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})); other == a {
		t.Fatal("two go-redis clients share a batch.Client")
	}
	if got := batched(a); got != a {
		t.Fatalf("batched(batch.Client) = %p, want it unchanged", got)
	}
	if got := batched(nil); got != nil {
		t.Fatalf("batched(nil) = %v", got)
	}
	key := any(weak.Make(rdb))
	a, b = nil, nil
	for i := 0; i < 100 && registered(key); i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if registered(key) {
		t.Fatal("the shared batch.Client of a client no Limiter uses is never forgotten")
	}
	if c := batched(rdb); c == nil {
		t.Fatal("no batch.Client after the first was collected")
	}
}

func registered(key any) bool {
	batchers.mu.Lock()
	defer batchers.mu.Unlock()
	_, ok := batchers.m[key]
	return ok
}
