// Package targets names everything the benchmarks and the report measure
// side by side: the trivial EVALSHA floor, this module's strategies (one per
// strategy.Algorithms(), so new ones appear without a change here, plus the
// strategy packages the facade does not offer yet) and the peer libraries,
// each behind one Decider interface.
package targets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/mennanov/limiters"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

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

// Decider makes one rate-limit decision of one unit for subject. An
// answer that is not the backend's decision (the facade's failure policy
// answering for a failed Redis) comes with ErrDegraded.
type Decider interface {
	Decide(ctx context.Context, subject string) (allowed bool, err error)
}

// ErrDegraded is the error of a Decide whose answer the backend did not
// make: Redis failed (or the breaker was open) and the facade's failure
// policy answered, a Result with Degraded set; allowed is that answer. It
// is not a decision: the report counts such answers apart, never in
// decisions per second.
var ErrDegraded = errors.New("targets: degraded: the failure policy answered, not the backend")

// Kind sorts targets into the floor, ours and the peers.
type Kind string

// The kinds of target.
const (
	Floor  Kind = "floor"
	Ours   Kind = "ours"
	Facade Kind = "facade" // one of ours through the facade's Limiter
	Peer   Kind = "peer"
	Leased Kind = "leased" // one of ours through a lease.Limiter
	// Batched is the floor, one of ours or the facade sent through a
	// client that shares pipelines (Env.Batch, Env.AutoPipe).
	Batched Kind = "batched"
)

// Env is what a target is built on.
type Env struct {
	RDB    redis.UniversalClient // the client every decision goes through
	Limit  strategy.Limit        // Burst 0 means Limit
	Prefix string                // key namespace of our strategies; "" keeps their default
	// Via, when set, is the client the floor and ours send their scripts
	// through instead of RDB (a batched row sets it).
	Via redis.Scripter
	// Batch is RDB wrapped in a batch.Client, for the batched floor; nil
	// makes it n/a.
	Batch redis.Scripter
	// Default is a client like RDB with ContextTimeoutEnabled, as it is:
	// the constructors of ours and the facade batch it by default (the
	// batched rows); nil makes them n/a.
	Default redis.Scripter
	// AutoPipe is go-redis's AutoPipeline of RDB, for the rows that
	// evaluate it (see Evaluations); nil makes them n/a.
	AutoPipe redis.Scripter
	// Addrs are the addresses of the real Redis RDB reaches (a standalone
	// server's, or a cluster's masters), for the peers that bring a client
	// of their own (rueidis); none makes them n/a.
	Addrs []string
	// Clock, when set, is the time of the targets that take a client clock
	// (ours, mennanov/limiters). The others read the Redis server's TIME
	// (redis_rate) or rely on key TTLs (ulule/limiter); on miniredis the
	// caller steers those with SetTime and FastForward.
	Clock strategy.Clock
}

// Target is one row of the comparison.
type Target struct {
	Name      string // "floor", an Algorithm name, or "peer:<library> <algorithm>"
	Kind      Kind
	Algorithm string // the algorithm family
	Note      string // how the peer is set up, when it matters
	// OwnClient: the target sends through a client of its own (Env.Addrs),
	// whose round trips the report does not see.
	OwnClient bool
	// Stateless: the target keeps nothing per subject (a peer's floor), so
	// its row has no bytes per subject.
	Stateless bool
	New       func(Env) (Decider, error)
}

// All returns the floor, then ours in strategy.Algorithms() order, then
// one algorithm through the facade (fixed_window when registered), the
// batched and the leased rows, then the peers when peers is true.
func All(peers bool) []Target {
	ts := append([]Target{FloorTarget()}, OursTargets()...)
	algs := strategy.Algorithms()
	fa := algs[0]
	if slices.Contains(algs, "fixed_window") {
		fa = "fixed_window"
	}
	ts = append(ts, FacadeTarget(fa))
	ts = append(ts, BatchedTargets(fa)...)
	ts = append(ts, LeasedTargets()...)
	if peers {
		ts = append(ts, Peers()...)
		ts = append(ts, RueidisTargets()...)
	}
	return ts
}

var floorScript = redis.NewScript("return 1")

type floor struct{ rdb redis.Scripter }

func (f floor) Decide(ctx context.Context, subject string) (bool, error) {
	return true, floorScript.Run(ctx, f.rdb, []string{subject}).Err()
}

// FloorTarget is the cheapest possible decision: EVALSHA of `return 1` with
// the subject as its key, one round trip and one command.
func FloorTarget() Target {
	return Target{Name: "floor", Kind: Floor, Algorithm: "EVALSHA return 1",
		New: func(e Env) (Decider, error) { return floor{e.scripter()}, nil }}
}

// BatchedTargets returns the floor, ours and the facade's algorithm fa
// again, batched: the floor through Env.Batch (a batch.Client), ours and
// the facade built by their constructors on Env.Default, which they batch
// by default. Named "<name> batched", measured in the same interleaved
// slices as the rest.
func BatchedTargets(fa strategy.Algorithm) []Target {
	dflt := func(e Env) redis.Scripter { return e.Default }
	ts := []Target{via("batched", "batch.New(rdb)", func(e Env) redis.Scripter { return e.Batch }, FloorTarget())}
	for _, t := range OursTargets() {
		ts = append(ts, via("batched", "New(rdb), rdb with ContextTimeoutEnabled: batched by default", dflt, t))
	}
	return append(ts, via("batched", "ratelimit.New(rdb), rdb with ContextTimeoutEnabled: batched by default, called on the caller's goroutine",
		dflt, FacadeTarget(fa)))
}

// Evaluations are targets measured only when named (report -only): go-redis's
// AutoPipeline as the batching client, for the floor and the fixed window.
func Evaluations() []Target {
	get := func(e Env) redis.Scripter { return e.AutoPipe }
	var ts []Target
	for _, t := range append([]Target{FloorTarget()}, OursTargets()...) {
		if t.Name == "floor" || t.Name == "fixed_window" || t.Name == "gcra" {
			ts = append(ts, via("autopipeline", "go-redis v9 Client.AutoPipeline() (experimental), default options", get, t))
		}
	}
	return ts
}

// via is t with its decisions sent through the client client(e) returns.
func via(suffix, note string, client func(Env) redis.Scripter, t Target) Target {
	inner := t.New
	return Target{Name: t.Name + " " + suffix, Kind: Batched, Algorithm: t.Algorithm, Note: note,
		New: func(e Env) (Decider, error) {
			c := client(e)
			if c == nil {
				return nil, fmt.Errorf("targets: no %s client on this backend", suffix)
			}
			e.Via = c
			return inner(e)
		}}
}

// scripter is the client the floor and ours send their scripts through.
func (e Env) scripter() redis.Scripter {
	if e.Via != nil {
		return e.Via
	}
	return e.RDB
}

// strategyDecider adapts a strategy.
type strategyDecider struct{ s strategy.Strategy }

func (d strategyDecider) Decide(ctx context.Context, subject string) (bool, error) {
	r, err := d.s.AllowN(ctx, subject, 1)
	return r.Allowed, err
}

// facadeDecider adapts a facade Limiter.
type facadeDecider struct{ l *ratelimit.Limiter }

func (d facadeDecider) Decide(ctx context.Context, subject string) (bool, error) {
	r, err := d.l.Allow(ctx, subject)
	if err == nil && r.Degraded {
		return r.Allowed, ErrDegraded
	}
	return r.Allowed, err
}

// Config returns the facade Config of algorithm a.
func Config(a strategy.Algorithm, lim strategy.Limit, prefix string) ratelimit.Config {
	return ratelimit.Config{Algorithm: a, Limit: lim.Limit, Window: lim.Window, Burst: lim.Burst, Prefix: prefix}
}

// builder builds a strategy from its package.
type builder struct {
	newRedis func(redis.Scripter, strategy.Limit, ...strategy.Option) (strategy.Strategy, error)
	newLocal func(strategy.Limit, ...strategy.Option) (strategy.Strategy, error)
}

// pair adapts an algorithm package's two constructors.
func pair[R, L strategy.Strategy](
	r func(redis.Scripter, strategy.Limit, ...strategy.Option) (R, error),
	l func(strategy.Limit, ...strategy.Option) (L, error)) builder {
	return builder{
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return r(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) { return l(lim, o...) },
	}
}

// packages are the strategy-level constructors, by the facade's name of
// their algorithm: the strategies are measured called directly, as the
// facade calls them.
var packages = map[strategy.Algorithm]builder{
	strategy.SlidingLog:     pair(slidinglog.New, slidinglog.NewLocal),
	strategy.CompactLog:     pair(compactlog.New, compactlog.NewLocal),
	strategy.FixedWindow:    pair(fixedwindow.New, fixedwindow.NewLocal),
	strategy.TokenBucket:    pair(tokenbucket.New, tokenbucket.NewLocal),
	strategy.SlidingCounter: pair(slidingcounter.New, slidingcounter.NewLocal),
	strategy.GCRA:           pair(gcra.New, gcra.NewLocal),
}

// Names returns our strategies: strategy.Algorithms() and the strategy
// packages the facade does not offer yet, sorted.
func Names() []strategy.Algorithm {
	names := strategy.Algorithms()
	for a := range packages {
		if !slices.Contains(names, a) {
			names = append(names, a)
		}
	}
	slices.Sort(names)
	return names
}

func inFacade(a strategy.Algorithm) bool { return slices.Contains(strategy.Algorithms(), a) }

func strategyOptions(prefix string, clock strategy.Clock) []strategy.Option {
	o := []strategy.Option{strategy.WithClock(clock)}
	if prefix != "" {
		o = append(o, strategy.WithPrefix(prefix))
	}
	return o
}

// NewStrategy builds our strategy a on rdb from a's package, spread over
// shards keys when shards > 1, as the facade builds it for a Config.
func NewStrategy(a strategy.Algorithm, rdb redis.Scripter, lim strategy.Limit, prefix string, clock strategy.Clock, shards int) (strategy.Strategy, error) {
	b, ok := packages[a]
	if !ok {
		return nil, fmt.Errorf("targets: unknown strategy %q", a)
	}
	opts := strategyOptions(prefix, clock)
	if shards > 1 {
		return sharded.New(shards, lim, func(l strategy.Limit) (strategy.Strategy, error) { return b.newRedis(rdb, l, opts...) })
	}
	return b.newRedis(rdb, lim, opts...)
}

// NewLocalStrategy is NewStrategy for the in-process twin.
func NewLocalStrategy(a strategy.Algorithm, lim strategy.Limit, clock strategy.Clock, shards int) (strategy.Strategy, error) {
	b, ok := packages[a]
	if !ok {
		return nil, fmt.Errorf("targets: unknown strategy %q", a)
	}
	opts := strategyOptions("", clock)
	if shards > 1 {
		return sharded.New(shards, lim, func(l strategy.Limit) (strategy.Strategy, error) { return b.newLocal(l, opts...) })
	}
	return b.newLocal(lim, opts...)
}

// OursTargets returns one target per strategy of Names(), called directly
// (not through the facade's Limiter), so that the row measures the
// algorithm and its script; FacadeTarget measures what the facade adds.
// They read the Redis server's TIME unless Env.Clock is set.
func OursTargets() []Target {
	var ts []Target
	for _, a := range Names() {
		t := Target{Name: string(a), Kind: Ours, Algorithm: string(a),
			New: func(e Env) (Decider, error) {
				st, err := NewStrategy(a, e.scripter(), e.Limit, e.Prefix, e.Clock, 0)
				if err != nil {
					return nil, err
				}
				return strategyDecider{st}, nil
			}}
		if !inFacade(a) {
			t.Note = "built with its package's New: the facade does not offer it yet"
		}
		ts = append(ts, t)
	}
	return ts
}

// FacadeTarget is algorithm a through the facade's Limiter.Allow with its
// default failure handling (per-call timeout, breaker, fail open): the
// facade's cost on top of the strategy's. It reads as "facade <a>".
func FacadeTarget(a strategy.Algorithm) Target {
	return Target{Name: "facade " + string(a), Kind: Facade, Algorithm: string(a),
		Note: "ratelimit.New(...).Allow with the default failure policy, timeout and breaker",
		New: func(e Env) (Decider, error) {
			l, err := ratelimit.New(e.scripter(), Config(a, e.Limit, e.Prefix), ratelimit.WithClock(e.Clock))
			if err != nil {
				return nil, err
			}
			return facadeDecider{l}, nil
		}}
}

// Local returns the in-process twin of our strategy a, called directly, as
// a Decider.
func Local(a strategy.Algorithm, lim strategy.Limit, clock strategy.Clock) (Decider, error) {
	st, err := NewLocalStrategy(a, lim, clock, 0)
	if err != nil {
		return nil, err
	}
	return strategyDecider{st}, nil
}

// Peers returns the peer libraries' targets: go-redis/redis_rate v10 (GCRA),
// ulule/limiter v3 with its Redis store (fixed window) and
// mennanov/limiters (sliding window, token bucket) with their go-redis
// backends.
func Peers() []Target {
	return []Target{
		{Name: "peer:redis_rate gcra", Kind: Peer, Algorithm: "gcra",
			Note: "go-redis/redis_rate v10, Allow with burst = limit; server TIME",
			New:  newRedisRate},
		{Name: "peer:ulule fixed_window", Kind: Peer, Algorithm: "fixed_window",
			Note: "ulule/limiter v3 Redis store; window starts at a subject's first request; denied requests are counted",
			New:  newUlule},
		{Name: "peer:mennanov sliding_window", Kind: Peer, Algorithm: "sliding_counter",
			Note: "mennanov/limiters SlidingWindow + SlidingWindowRedis (pipeline INCR, PEXPIRE, GET), one limiter per subject; denied requests are counted",
			New:  newMennanovSW},
		{Name: "peer:mennanov token_bucket", Kind: Peer, Algorithm: "token_bucket",
			Note: "mennanov/limiters TokenBucket + TokenBucketRedis (MGET then MULTI SET SET EXEC), LockNoop, no race check: not atomic across processes",
			New:  newMennanovTB},
	}
}

type redisRate struct {
	l   *redis_rate.Limiter
	lim redis_rate.Limit
}

func (d redisRate) Decide(ctx context.Context, subject string) (bool, error) {
	r, err := d.l.Allow(ctx, subject, d.lim)
	if err != nil {
		return false, err
	}
	return r.Allowed > 0, nil
}

func newRedisRate(e Env) (Decider, error) {
	if e.Limit.Limit > int64(^uint32(0)>>1) || e.Limit.Capacity() > int64(^uint32(0)>>1) {
		return nil, fmt.Errorf("redis_rate: limit %v does not fit an int", e.Limit)
	}
	return redisRate{redis_rate.NewLimiter(e.RDB),
		redis_rate.Limit{Rate: int(e.Limit.Limit), Period: e.Limit.Window, Burst: int(e.Limit.Capacity())}}, nil
}

type ulule struct{ l *limiter.Limiter }

func (d ulule) Decide(ctx context.Context, subject string) (bool, error) {
	c, err := d.l.Get(ctx, subject)
	if err != nil {
		return false, err
	}
	return !c.Reached, nil
}

func newUlule(e Env) (Decider, error) {
	store, err := ulredis.NewStoreWithOptions(e.RDB, limiter.StoreOptions{Prefix: limiter.DefaultPrefix, MaxRetry: limiter.DefaultMaxRetry})
	if err != nil {
		return nil, err
	}
	return ulule{limiter.New(store, limiter.Rate{Period: e.Limit.Window, Limit: e.Limit.Limit})}, nil
}

// perSubject holds one peer limiter per subject (mennanov/limiters binds a
// limiter to one key).
type perSubject[L any] struct {
	m   sync.Map
	new func(subject string) L
}

func (p *perSubject[L]) get(subject string) L {
	if v, ok := p.m.Load(subject); ok {
		return v.(L)
	}
	v, _ := p.m.LoadOrStore(subject, p.new(subject))
	return v.(L)
}

type mennanovSW struct {
	p *perSubject[*limiters.SlidingWindow]
}

func (d mennanovSW) Decide(ctx context.Context, subject string) (bool, error) {
	return limited(d.p.get(subject).Limit(ctx))
}

func limited(_ time.Duration, err error) (bool, error) {
	if errors.Is(err, limiters.ErrLimitExhausted) {
		return false, nil
	}
	return err == nil, err
}

func clockOf(e Env) limiters.Clock {
	if e.Clock != nil {
		return e.Clock
	}
	return limiters.NewSystemClock()
}

func newMennanovSW(e Env) (Decider, error) {
	clk := clockOf(e)
	return mennanovSW{&perSubject[*limiters.SlidingWindow]{new: func(s string) *limiters.SlidingWindow {
		return limiters.NewSlidingWindow(e.Limit.Limit, e.Limit.Window, limiters.NewSlidingWindowRedis(e.RDB, s), clk, 1e-9)
	}}}, nil
}

type mennanovTB struct {
	p *perSubject[*limiters.TokenBucket]
}

func (d mennanovTB) Decide(ctx context.Context, subject string) (bool, error) {
	return limited(d.p.get(subject).Limit(ctx))
}

func newMennanovTB(e Env) (Decider, error) {
	if e.Limit.Limit == 0 {
		return nil, errors.New("mennanov token bucket: limit 0 has no refill rate")
	}
	clk := clockOf(e)
	refill := e.Limit.Window / time.Duration(e.Limit.Limit)
	return mennanovTB{&perSubject[*limiters.TokenBucket]{new: func(s string) *limiters.TokenBucket {
		return limiters.NewTokenBucket(e.Limit.Capacity(), refill, limiters.NewLockNoop(),
			limiters.NewTokenBucketRedis(e.RDB, s, e.Limit.Window, false), clk, limiters.NewStdLogger())
	}}}, nil
}
