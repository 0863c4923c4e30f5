// Package ratelimit is the facade of a library of interchangeable,
// Redis-backed rate-limiting strategies. A service builds one Limiter per
// endpoint from a Config, picking the exact sliding log or a cheaper
// approximation, and can swap one for another without touching call sites.
//
// The algorithms live in packages of their own, each with New (Redis) and
// NewLocal (an in-process twin); package strategy holds their contract. The
// Limiter adds what a service needs around them: configuration by name,
// sharding of hot subjects, and (see the package's options) the clock.
//
// A Limiter is safe for concurrent use.
package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/gcra"
	"github.com/ratekit/ratelimit/internal/quote"
	"github.com/ratekit/ratelimit/sharded"
	"github.com/ratekit/ratelimit/slidingcounter"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

// Result is the outcome of a decision; see strategy.Result.
type Result = strategy.Result

// Limit is what a strategy enforces; see strategy.Limit.
type Limit = strategy.Limit

// Never is the RetryAfter of a request that can never pass.
const Never = strategy.Never

// Algorithm names a rate-limiting algorithm.
type Algorithm string

// The algorithms a Config can name.
const (
	// SlidingLog is exact: a sorted set of every unit in the window. Memory
	// grows with the limit. Package slidinglog.
	SlidingLog Algorithm = "sliding_log"
	// CompactLog makes the sliding log's exact decisions from one compact
	// string per subject: 1 to 6 bytes per unit in the window (2 for
	// windows up to 65.5 s), Limit at most compactlog.MaxLimit. Package
	// compactlog.
	CompactLog Algorithm = "compact_log"
	// FixedWindow counts units per window aligned to multiples of Window
	// since the epoch: one integer per subject, but up to twice the limit
	// across a window boundary. Package fixedwindow.
	FixedWindow Algorithm = "fixed_window"
	// TokenBucket holds up to Burst (default Limit) tokens refilled at Limit
	// per Window, exactly: one small hash per subject. Package tokenbucket.
	TokenBucket Algorithm = "token_bucket"
	// GCRA is the generic cell rate algorithm: the token bucket's decisions
	// from one stored instant per subject. Package gcra.
	GCRA Algorithm = "gcra"
	// SlidingCounter approximates the sliding window from the current and
	// previous fixed windows' counts, interpolated: one integer per subject,
	// at most about twice the limit in the worst sliding window, the limit
	// in every aligned one. Package slidingcounter.
	SlidingCounter Algorithm = "sliding_counter"
)

// algorithm is how the facade builds one algorithm.
type algorithm struct {
	newRedis func(redis.Scripter, strategy.Limit, ...strategy.Option) (strategy.Strategy, error)
	newLocal func(strategy.Limit, ...strategy.Option) (strategy.Strategy, error)
}

var algorithms = map[Algorithm]algorithm{
	SlidingLog: {
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return slidinglog.New(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return slidinglog.NewLocal(lim, o...)
		},
	},
	CompactLog: {
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return compactlog.New(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return compactlog.NewLocal(lim, o...)
		},
	},
	FixedWindow: {
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return fixedwindow.New(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return fixedwindow.NewLocal(lim, o...)
		},
	},
	TokenBucket: {
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return tokenbucket.New(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return tokenbucket.NewLocal(lim, o...)
		},
	},
	SlidingCounter: {
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return slidingcounter.New(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return slidingcounter.NewLocal(lim, o...)
		},
	},
	GCRA: {
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return gcra.New(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return gcra.NewLocal(lim, o...)
		},
	},
}

// Algorithms returns the valid algorithm names, sorted.
func Algorithms() []Algorithm {
	names := make([]Algorithm, 0, len(algorithms))
	for a := range algorithms {
		names = append(names, a)
	}
	slices.Sort(names)
	return names
}

// Config describes one limiter. The zero Config is invalid: Algorithm,
// Limit and Window are required.
type Config struct {
	Name      string        // the policy's name, for telemetry and headers (e.g. "login"); optional
	Algorithm Algorithm     // one of Algorithms()
	Limit     int64         // units allowed per Window; >= 0
	Window    time.Duration // > 0, whole milliseconds
	Burst     int64         // token bucket and GCRA capacity; 0 means Limit
	Shards    int           // > 1 spreads each subject over Shards keys, at most sharded.MaxShards; 0 or 1: no sharding
	Prefix    string        // key namespace; default "rl:"

	// When Redis fails (New only; see FailurePolicy and Breaker):
	OnFailure  FailurePolicy // FailOpen (the default, ""), FailClosed or FailLocal
	LocalShare float64       // FailLocal: the share of Limit and Burst each process enforces alone, in [0, 1]; 0 means 1
	Timeout    time.Duration // longest wait on Redis per call, <= MaxTimeout; 0 means DefaultTimeout; the caller's ctx deadline wins when sooner
}

// Limit returns the strategy.Limit of c.
func (c Config) limit() strategy.Limit {
	return strategy.Limit{Limit: c.Limit, Window: c.Window, Burst: c.Burst}
}

// Option configures a Limiter beyond its Config.
type Option func(*options)

type options struct {
	clock    strategy.Clock
	observer Observer

	breaker     *Breaker // WithBreaker
	denyCache   int      // WithDenyCache: max subjects; 0 is off
	maxSubjects int      // WithMaxSubjects; 0 is the default
	err         error    // the first invalid option
}

// WithMaxSubjects bounds the subjects the limiter holds in this process:
// the twin of a Limiter built by NewLocal, and the FailLocal twin of one
// built by New (default strategy.DefaultMaxSubjects, 1,048,576; the denial
// cache has its own bound, see WithDenyCache). When the bound is reached, a
// new subject evicts the least recently used one of the 1/64 of subjects
// that share its stripe, in O(1), and the eviction is counted in
// Decision.Evicted and Limiter.Evicted. An evicted subject starts fresh, with
// its full capacity, on its next request: the limiter then allows more
// than the limit to the subjects it evicted, which is why the bound should
// sit well above the subjects active within one window, so that only an
// abusive rotation of keys (random IPs, forged API keys) evicts. Idle
// subjects are freed within about one window whatever the bound. n must be
// >= 1. Subjects in Redis are not bounded by it: each has a TTL.
func WithMaxSubjects(n int) Option {
	return func(o *options) {
		if n < 1 && o.err == nil {
			o.err = fmt.Errorf("%w: WithMaxSubjects: n must be >= 1, got %d", strategy.ErrInvalidOption, n)
		}
		o.maxSubjects = n
	}
}

// WithObserver makes the limiter report every decision to obs (telemetry,
// logging). A nil obs is ignored.
func WithObserver(obs Observer) Option {
	return func(o *options) {
		if obs != nil {
			o.observer = obs
		}
	}
}

// Decision is what a Limiter reports to its Observer after each decision.
// It holds no subject key: keys are unbounded in number and may be personal
// data, so telemetry must never see them.
type Decision struct {
	Policy    string        // Config.Name
	Algorithm Algorithm     // Config.Algorithm
	Op        string        // "allow", "peek" or "reset"
	N         int64         // the cost asked for (AllowN)
	Result    Result        // the outcome; zero when Err is set
	Err       error         // the error returned to the caller, if any
	Start     time.Time     // when the decision started
	Duration  time.Duration // how long it took

	Degraded bool         // the failure policy decided (Result.Degraded); Cause says why
	Cause    error        // Degraded: the Redis failure, or ErrCircuitOpen (wrapped)
	Cached   bool         // the denial cache decided, without a round trip (WithDenyCache)
	Breaker  BreakerState // the circuit breaker's state after the decision (New only)

	// Evicted is how many subjects the limiter's in-process structures (its
	// twin, FailLocal twin or denial cache) evicted to make room for others
	// since the previous decision reported to the Observer: summed over
	// decisions it counts every eviction once, so a metric can add it up.
	// Evictions mean more subjects than the bound within a window (see
	// WithMaxSubjects).
	Evicted int64
}

// Observer is told of every decision of a Limiter. Observe runs on the
// caller's goroutine after the decision, with the caller's ctx, so it must
// be quick and safe for concurrent use. Package ratelimitotel implements it
// with OpenTelemetry.
type Observer interface {
	Observe(ctx context.Context, d Decision)
}

// WithClock makes the limiter use c instead of the Redis server's TIME. A nil
// c is ignored. See strategy.WithClock.
func WithClock(c strategy.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// Limiter enforces one Config. It is safe for concurrent use.
type Limiter struct {
	cfg  Config
	st   strategy.Strategy
	obs  Observer
	fail *failure // New only: timeout, breaker, policy, denial cache
	ev   *evictions
}

// evictions counts the subjects a Limiter's in-process structures evicted.
type evictions struct {
	total      atomic.Uint64
	unreported atomic.Int64 // not yet in a Decision
}

// add counts one eviction.
func (e *evictions) add() {
	e.total.Add(1)
	e.unreported.Add(1)
}

// take returns the evictions not yet reported, and marks them reported.
func (e *evictions) take() int64 {
	if e.unreported.Load() == 0 { // the common case: no write to a shared line
		return 0
	}
	return e.unreported.Swap(0)
}

// Evicted returns how many subjects the limiter evicted from this process
// since it was built, to keep within WithMaxSubjects (its twin or FailLocal
// twin) and WithDenyCache. Redis strategies evict nothing: 0 unless one of
// those is in use.
func (l *Limiter) Evicted() uint64 { return l.ev.total.Load() }

// twinBound returns the strategy options that bound an in-process twin of
// l, as o sets them, and count its evictions.
func (l *Limiter) twinBound(o options) []strategy.Option {
	so := []strategy.Option{strategy.WithOnEvict(l.ev.add)}
	if o.maxSubjects > 0 {
		so = append(so, strategy.WithMaxSubjects(o.maxSubjects))
	}
	return so
}

// New returns a Limiter for cfg that keeps its state in Redis through rdb (a
// *redis.Client, *redis.ClusterClient or *redis.Ring). It fails, naming the
// field, when cfg is invalid.
func New(rdb redis.Scripter, cfg Config, opts ...Option) (*Limiter, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: ratelimit: redis client is nil (use NewLocal for an in-process limiter)", strategy.ErrInvalidOption)
	}
	l, err := build(cfg, opts, func(a algorithm, lim strategy.Limit, so []strategy.Option) (strategy.Strategy, error) {
		return a.newRedis(rdb, lim, so...)
	})
	if err != nil {
		return nil, err
	}
	if err := l.setupFailure(rdb, opts); err != nil {
		return nil, err
	}
	return l, nil
}

// NewLocal returns a Limiter for cfg whose state lives in this process only:
// each process enforces cfg on its own.
func NewLocal(cfg Config, opts ...Option) (*Limiter, error) {
	return build(cfg, opts, func(a algorithm, lim strategy.Limit, so []strategy.Option) (strategy.Strategy, error) {
		return a.newLocal(lim, so...)
	})
}

func build(cfg Config, opts []Option, mk func(algorithm, strategy.Limit, []strategy.Option) (strategy.Strategy, error)) (*Limiter, error) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	a, ok := algorithms[cfg.Algorithm]
	if !ok {
		names := make([]string, 0, len(algorithms))
		for _, n := range Algorithms() {
			names = append(names, fmt.Sprintf("%q", n))
		}
		return nil, fmt.Errorf("%w: ratelimit: Algorithm must be one of %s, got %s", strategy.ErrInvalidOption, strings.Join(names, ", "), quote.Value(string(cfg.Algorithm)))
	}
	if cfg.Shards < 0 {
		return nil, fmt.Errorf("%w: ratelimit: Shards must be >= 0, got %d", strategy.ErrInvalidOption, cfg.Shards)
	}
	if cfg.Shards > sharded.MaxShards {
		return nil, fmt.Errorf("%w: Shards must be <= %d (sharded.MaxShards), got %d", strategy.ErrInvalidOption, sharded.MaxShards, cfg.Shards)
	}
	if err := cfg.limit().Validate(); err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	if err := checkFailure(cfg, &o); err != nil {
		return nil, err
	}
	l := &Limiter{cfg: cfg, obs: o.observer, ev: new(evictions)}
	so := append([]strategy.Option{strategy.WithClock(o.clock)}, l.twinBound(o)...)
	if cfg.Prefix != "" {
		so = append(so, strategy.WithPrefix(cfg.Prefix))
	}
	var st strategy.Strategy
	var err error
	if cfg.Shards > 1 {
		// each shard's strategy through the same constructor, with its share
		st, err = sharded.New(cfg.Shards, cfg.limit(), func(lim strategy.Limit) (strategy.Strategy, error) {
			return mk(a, lim, so)
		})
	} else {
		st, err = mk(a, cfg.limit(), so)
	}
	if err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	l.st = st
	return l, nil
}

// Config returns the configuration the Limiter enforces.
func (l *Limiter) Config() Config { return l.cfg }

// Strategy returns the strategy that makes the decisions.
func (l *Limiter) Strategy() strategy.Strategy { return l.st }

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Result, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN decides whether key may spend n units now and records them only if
// allowed. A denial is a Result with Allowed false, not an error. On a
// Limiter built by New, the error is non-nil only for invalid input (an
// empty or too long key, n < 0 or too large): when Redis fails or is too
// slow, the failure policy decides and the Result has Degraded set (see
// FailurePolicy, Config.Timeout, Breaker, WithDenyCache).
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Result, error) {
	return l.decide(ctx, opAllow, key, n)
}

// Peek reports key's state now and consumes nothing. Failures are handled
// as in AllowN.
func (l *Limiter) Peek(ctx context.Context, key string) (Result, error) {
	return l.decide(ctx, opPeek, key, 0)
}

// Reset forgets key, in Redis and in this process (denial cache, FailLocal
// twin). Unlike a decision it has no failure policy: when Redis fails, or
// the breaker is open, it returns an error wrapping strategy.ErrBackend.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	return l.reset(ctx, key)
}
