package ratelimit

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/strategy"
)

// fakeHonourer is a client that says whether it honours contexts.
type fakeHonourer struct {
	redis.Scripter
	honours bool
}

func (f fakeHonourer) HonoursContext() bool { return f.honours }

// traced wraps a client, as a tracing or metrics wrapper would.
type traced struct{ *redis.Client }

// TestInlineByBehaviour checks which clients a Limiter calls on the
// caller's goroutine: those that say they honour contexts, or that are (or
// embed) a *redis.Client with ContextTimeoutEnabled. New batches a Client
// or a Ring with ContextTimeoutEnabled by default, and a batch.Client over
// either honours contexts.
func TestInlineByBehaviour(t *testing.T) {
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	withCtx := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	ringCtx := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { plain.Close(); withCtx.Close(); cluster.Close(); ring.Close(); ringCtx.Close() })
	mustBatch := func(rdb redis.Scripter) redis.Scripter {
		b, err := batch.New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	direct := []Option{WithoutBatching()}
	for _, tc := range []struct {
		name string
		rdb  redis.Scripter
		want bool
		opts []Option
	}{
		{"Client", plain, false, nil},
		{"Client with ContextTimeoutEnabled", withCtx, true, nil},
		{"Client with ContextTimeoutEnabled/WithoutBatching", withCtx, true, direct},
		{"a wrapper embedding a Client with ContextTimeoutEnabled", traced{withCtx}, true, nil},
		{"a wrapper embedding a plain Client", traced{plain}, false, nil},
		{"ClusterClient", cluster, false, nil},
		{"Ring", ring, false, nil},
		{"Ring with ContextTimeoutEnabled", ringCtx, true, nil}, // batched
		{"Ring with ContextTimeoutEnabled/WithoutBatching", ringCtx, false, direct},
		{"batch over Client", mustBatch(plain), true, nil},
		{"batch over Ring", mustBatch(ring), true, nil},
		{"batch over ClusterClient", mustBatch(cluster), false, nil},
		{"a client that says it honours contexts", fakeHonourer{plain, true}, true, nil},
		{"a client that says it does not", fakeHonourer{withCtx, false}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range strategy.Algorithms() {
				l, err := New(tc.rdb, Config{Algorithm: a, Limit: 10, Window: time.Second}, tc.opts...)
				if err != nil {
					t.Fatal(err)
				}
				if got := Inline(l); got != tc.want {
					t.Errorf("%s: inline = %v, want %v", a, got, tc.want)
				}
			}
		})
	}
}
