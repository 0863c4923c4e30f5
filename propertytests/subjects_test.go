package propertytests

import (
	"fmt"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/gcra"
	"github.com/ratekit/ratelimit/sharded"
	"github.com/ratekit/ratelimit/slidingcounter"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

// kind is the algorithm family, which decides the invariants that apply.
type kind int

const (
	slidingLog kind = iota
	fixedWindow
	slidingCounter
	tokenBucket
	gcraKind
)

// usesBurst reports whether the capacity is Limit.Burst when set.
func (k kind) usesBurst() bool { return k == tokenBucket || k == gcraKind }

// capacity is the most units a subject can spend at once.
func (k kind) capacity(lim strategy.Limit) int64 {
	if k.usesBurst() {
		return lim.Capacity()
	}
	return lim.Limit
}

// subject is one strategy under test: an algorithm, sharded or not.
type subject struct {
	name      string
	algorithm strategy.Algorithm
	kind      kind
	newRedis  func(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error)
	newLocal  func(lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error)
	// exactRetry: waiting 1 ms less than RetryAfter does not let the
	// request pass.
	exactRetry bool
	// shards > 1 wraps the strategy in the sharded strategy.
	shards int
	// lease: every host decides through package lease (see
	// leaseSubjects); only the properties that say so apply.
	lease bool
}

func (s subject) sharded() bool { return s.shards > 1 }

// algorithms lists every algorithm, one entry per package. Sharded variants
// are derived from them (see allSubjects).
var algorithms = []subject{
	{
		name: "slidinglog", algorithm: ratelimit.SlidingLog, kind: slidingLog, exactRetry: true,
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return slidinglog.New(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return slidinglog.NewLocal(lim, o...)
		},
	},
	{
		// the sliding log's decisions from a compact string: the same kind,
		// so the same bound and exact model
		name: "compactlog", algorithm: ratelimit.CompactLog, kind: slidingLog, exactRetry: true,
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return compactlog.New(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return compactlog.NewLocal(lim, o...)
		},
	},
	{
		name: "tokenbucket", algorithm: ratelimit.TokenBucket, kind: tokenBucket, exactRetry: true,
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return tokenbucket.New(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return tokenbucket.NewLocal(lim, o...)
		},
	},
	{
		name: "fixedwindow", algorithm: ratelimit.FixedWindow, kind: fixedWindow, exactRetry: true,
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return fixedwindow.New(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return fixedwindow.NewLocal(lim, o...)
		},
	},
	{
		name: "gcra", algorithm: ratelimit.GCRA, kind: gcraKind, exactRetry: true,
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return gcra.New(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return gcra.NewLocal(lim, o...)
		},
	},
	{
		name: "slidingcounter", algorithm: ratelimit.SlidingCounter, kind: slidingCounter, exactRetry: true,
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return slidingcounter.New(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return slidingcounter.NewLocal(lim, o...)
		},
	},
}

// shards is the shard count of the sharded subjects (fewer when the limit
// is smaller: see sharded.Count).
const shards = 3

// allSubjects returns every subject under test: each algorithm, then each
// algorithm wrapped in the sharded strategy, then the leasable ones behind
// package lease.
func allSubjects() []subject {
	out := slices.Clone(algorithms)
	for _, a := range algorithms {
		a.name, a.shards = "sharded-"+a.name, shards
		out = append(out, a)
	}
	return append(out, leaseSubjects()...)
}

// limits returns the limit of each shard of s under lim: lim itself when s
// is not sharded.
func (s subject) limits(lim strategy.Limit) []strategy.Limit {
	if !s.sharded() {
		return []strategy.Limit{lim}
	}
	// the shares sharded.New gives its shards (any strategy will do)
	l, err := sharded.New(s.shards, lim, func(sl strategy.Limit) (strategy.Strategy, error) {
		return fixedwindow.NewLocal(sl)
	})
	if err != nil {
		panic(fmt.Sprintf("sharded.New(%d, %v): %v", s.shards, lim, err)) // lim is valid
	}
	return l.Limits()
}

// TestEveryAlgorithmIsCovered fails when the facade offers an algorithm that
// has no entry here: a strategy without properties is a hole.
func TestEveryAlgorithmIsCovered(t *testing.T) {
	have := map[strategy.Algorithm]bool{}
	for _, s := range algorithms {
		have[s.algorithm] = true
	}
	for _, a := range strategy.Algorithms() {
		if !have[a] {
			t.Errorf("algorithm %q is registered in the facade but has no entry in propertytests' algorithms table", a)
		}
	}
	if len(algorithms) == 0 {
		t.Fatal("no algorithms under test")
	}
}
