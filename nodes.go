package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/strategy"
)

// maxNodeBreakers bounds the masters a Limiter keeps a breaker for; the
// subjects of further masters share the Limiter's own.
const maxNodeBreakers = 1024

// nodeBreakers gives each master of a Redis Cluster a breaker of its own,
// so that one sick master does not send the subjects of the healthy ones to
// the failure policy. Until Redis first answers, and for a subject whose
// master is unknown, the Limiter's breaker (shared) counts.
type nodeBreakers struct {
	cc     *redis.ClusterClient
	shared *breaker.Breaker
	clock  strategy.Clock
	// ready: Redis has answered, so the cluster's slot map is loaded and
	// finding a subject's master does not wait on the network
	ready atomic.Bool
	mu    sync.RWMutex
	m     map[*redis.Client]*breaker.Breaker
}

// of returns the breaker of key's master.
func (n *nodeBreakers) of(ctx context.Context, key string) *breaker.Breaker {
	if n == nil {
		return nil
	}
	if !n.ready.Load() {
		return n.shared
	}
	// every key of a subject (not sharded) has the subject as its hash tag
	node, err := n.cc.MasterForKey(ctx, strategy.KeyFor("", "", key, strategy.NoShard))
	if err != nil {
		return n.shared
	}
	n.mu.RLock()
	b := n.m[node]
	n.mu.RUnlock()
	if b != nil {
		return b
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if b = n.m[node]; b == nil {
		if len(n.m) >= maxNodeBreakers {
			return n.shared
		}
		b, _ = breaker.New(0, 0, breaker.WithClock(n.clock))
		n.m[node] = b
	}
	return b
}

// breakerOf returns the breaker that counts a call for key.
func (f *failure) breakerOf(ctx context.Context, key string) *breaker.Breaker {
	if b := f.nodes.of(ctx, key); b != nil {
		return b
	}
	return f.breaker
}

// record counts a call's outcome o in b (probe: it was b's probe), and
// notes the first answer from Redis, after which a cluster's masters get
// their own breakers.
func (f *failure) record(b *breaker.Breaker, probe bool, o breaker.Outcome) {
	b.Record(probe, o)
	if o == breaker.Answered && f.nodes != nil && !f.nodes.ready.Load() {
		f.nodes.ready.Store(true)
	}
}
