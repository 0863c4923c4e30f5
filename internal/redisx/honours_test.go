package redisx_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/multilimit"
	"github.com/ratekit/ratelimit/sharded"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// tracing stands for a wrapper around a *redis.Client (a tracing or
// metrics hook wrapper): it honours contexts when the client does.
type tracing struct{ *redis.Client }

// says is a client that says whether it honours contexts.
type says struct {
	redis.Scripter
	honours bool
}

func (s says) HonoursContext() bool { return s.honours }

// foreign is a user's Strategy that does not implement
// strategy.ContextHonourer.
type foreign struct{ strategy.Strategy }

// TestHonoursContext checks which clients are called on the caller's
// goroutine: decided by what a client says or its options, never by its
// concrete type; and that strategies answer for their client.
func TestHonoursContext(t *testing.T) {
	client := func(timeouts bool) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: timeouts})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cluster.Close() })
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = ring.Close() })
	batched, err := batch.New(client(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = batched.Close() })

	for _, c := range []struct {
		name string
		rdb  redis.Scripter
		want bool
	}{
		{"Client with ContextTimeoutEnabled", client(true), true},
		{"Client without", client(false), false},
		{"wrapper embedding a Client with ContextTimeoutEnabled", tracing{client(true)}, true},
		{"wrapper embedding a Client without", tracing{client(false)}, false},
		{"ClusterClient", cluster, false},
		{"Ring", ring, false},
		{"says true", says{client(false), true}, true},
		{"says false", says{client(true), false}, false},
		{"batch.Client on a Client", batched, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := redisx.HonoursContext(c.rdb); got != c.want {
				t.Errorf("HonoursContext = %v, want %v", got, c.want)
			}
			sl, err := slidinglog.New(c.rdb, strategy.PerSecond(10))
			if err != nil {
				t.Fatal(err)
			}
			if got := sl.HonoursContext(); got != c.want {
				t.Errorf("slidinglog.Limiter.HonoursContext = %v, want %v", got, c.want)
			}
			ml, err := multilimit.New(c.rdb, []multilimit.Rule{{Algorithm: strategy.SlidingLog, Limit: strategy.PerSecond(10)}})
			if err != nil {
				t.Fatal(err)
			}
			if got := ml.HonoursContext(); got != c.want {
				t.Errorf("multilimit.Limiter.HonoursContext = %v, want %v", got, c.want)
			}
			sh, err := sharded.New(3, strategy.PerSecond(10), func(l strategy.Limit) (strategy.Strategy, error) {
				return slidinglog.New(c.rdb, l)
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := sh.HonoursContext(); got != c.want {
				t.Errorf("sharded.Limiter.HonoursContext = %v, want %v", got, c.want)
			}
		})
	}

	t.Run("twins", func(t *testing.T) {
		sl, err := slidinglog.NewLocal(strategy.PerSecond(10))
		if err != nil {
			t.Fatal(err)
		}
		ml, err := multilimit.NewLocal([]multilimit.Rule{{Algorithm: strategy.FixedWindow, Limit: strategy.PerSecond(10)}})
		if err != nil {
			t.Fatal(err)
		}
		for name, h := range map[string]strategy.ContextHonourer{"slidinglog.Local": sl, "multilimit.Local": ml} {
			if !h.HonoursContext() {
				t.Errorf("%s.HonoursContext = false, want true", name)
			}
		}
	})

	t.Run("sharded over a strategy that does not say", func(t *testing.T) {
		sh, err := sharded.New(3, strategy.PerSecond(10), func(l strategy.Limit) (strategy.Strategy, error) {
			st, err := slidinglog.NewLocal(l)
			return foreign{st}, err
		})
		if err != nil {
			t.Fatal(err)
		}
		if sh.HonoursContext() {
			t.Error("HonoursContext = true, want false: a wrapped strategy does not implement ContextHonourer")
		}
	})
}
