package engine

import (
	"runtime"
	"testing"
	"weak"

	"github.com/redis/go-redis/v9"
)

// TestBatchedShared checks that the strategies on one go-redis client with
// ContextTimeoutEnabled share one Batcher, that other clients are passed
// through, and that the shared Batcher is forgotten once nothing uses it,
// without a Close.
func TestBatchedShared(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { plain.Close() })
	if got := Batched(plain); got != plain {
		t.Fatalf("Batched(client without ContextTimeoutEnabled) = %T, want it unchanged", got)
	}
	a, b := Batched(rdb), Batched(rdb)
	if _, ok := a.(*Batcher); !ok || a != b {
		t.Fatalf("Batched(client) = %T %p, %p; want one shared *Batcher", a, a, b)
	}
	if other := Batched(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})); other == a {
		t.Fatal("two go-redis clients share a Batcher")
	}
	if got := Batched(a); got != a {
		t.Fatalf("Batched(Batcher) = %p, want it unchanged", got)
	}
	if got := Batched(nil); got != nil {
		t.Fatalf("Batched(nil) = %v", got)
	}
	key := any(weak.Make(rdb))
	a, b = nil, nil
	for i := 0; i < 100 && registered(key); i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if registered(key) {
		t.Fatal("the shared Batcher of a client no strategy uses is never forgotten")
	}
	if c := Batched(rdb); c == nil {
		t.Fatal("no Batcher after the first was collected")
	}
}

func registered(key any) bool {
	batchers.mu.Lock()
	defer batchers.mu.Unlock()
	_, ok := batchers.m[key]
	return ok
}
