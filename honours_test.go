package ratelimit

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
)

// fakeHonourer is a client that says whether it honours contexts.
type fakeHonourer struct {
	redis.Scripter
	honours bool
}

func (f fakeHonourer) HonoursContext() bool { return f.honours }

func TestHonoursDeadlinesByBehaviour(t *testing.T) {
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	withCtx := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { plain.Close(); withCtx.Close(); cluster.Close(); ring.Close() })
	mustBatch := func(rdb redis.Scripter) redis.Scripter {
		b, err := batch.New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	for _, tc := range []struct {
		name string
		rdb  redis.Scripter
		want bool
	}{
		{"Client", plain, false},
		{"Client with ContextTimeoutEnabled", withCtx, true},
		{"ClusterClient", cluster, false},
		{"Ring", ring, false},
		{"batch over Client", mustBatch(plain), true},
		{"batch over Ring", mustBatch(ring), true},
		{"batch over ClusterClient", mustBatch(cluster), false},
		{"a client that says it honours contexts", fakeHonourer{plain, true}, true},
		{"a client that says it does not", fakeHonourer{withCtx, false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := honoursDeadlines(tc.rdb); got != tc.want {
				t.Errorf("honoursDeadlines = %v, want %v", got, tc.want)
			}
		})
	}
}
