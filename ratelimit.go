// Package ratelimit limits how often users, API keys or IPs may act, across
// many servers, through Redis.
//
//	l, err := ratelimit.New(rdb, ratelimit.Config{
//		Algorithm: ratelimit.SlidingLog, Limit: 100, Window: time.Minute,
//	})
//	r, err := l.Allow(ctx, "user:42")
//	if !r.Allowed { /* 429, retry after r.RetryAfter */ }
//
// New builds a Limiter from a Config (with a nil client, in this process
// only), Wrap from any strategy.Strategy, NewSet one per named policy of a
// Policies, which json.Unmarshal reads. Around its strategy a Limiter adds a
// failure policy for when Redis fails (FailurePolicy, package breaker), a
// denial cache (WithDenyCache), an Observer (package ratelimitotel), Wait,
// shadow mode, tiers (Tier, which fails for an unknown name), refunds and
// reloads (Set.Update). The algorithms, their packages and their costs are
// in docs/strategies.md; the other topics in docs/. A Limiter is safe for
// concurrent use.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/compare"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/gcra"
	"github.com/ratekit/ratelimit/internal/fielderr"
	"github.com/ratekit/ratelimit/internal/guard"
	"github.com/ratekit/ratelimit/internal/quote"
	"github.com/ratekit/ratelimit/lease"
	"github.com/ratekit/ratelimit/multilimit"
	"github.com/ratekit/ratelimit/sharded"
	"github.com/ratekit/ratelimit/slidingcounter"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

// Result is the outcome of one decision (see strategy.Result).
type Result = strategy.Result

// Limit is Limit units per Window, and a Burst (see strategy.Limit).
type Limit = strategy.Limit

// The algorithms a Config can name, each in a package of its own
// (slidinglog, compactlog...); docs/strategies.md compares them.
const (
	SlidingLog     = strategy.SlidingLog     // exact; a sorted set of the units in the window
	CompactLog     = strategy.CompactLog     // exact; 1 to 6 bytes per unit in the window, Limit at most compactlog.MaxLimit
	FixedWindow    = strategy.FixedWindow    // one counter per aligned window; up to twice the limit across a boundary
	TokenBucket    = strategy.TokenBucket    // Burst tokens refilled at Limit per Window; one small hash
	GCRA           = strategy.GCRA           // the token bucket's decisions from one stored instant
	SlidingCounter = strategy.SlidingCounter // two windows' counts, interpolated; at most about twice the limit
	// Multi enforces Config.Rules together, all or nothing (package multilimit).
	Multi strategy.Algorithm = "multi"
)

// algorithm is how the facade builds one algorithm.
type algorithm struct {
	newRedis func(redis.Scripter, strategy.Limit, ...strategy.Option) (strategy.Strategy, error)
	newLocal func(strategy.Limit, ...strategy.Option) (strategy.Strategy, error)
}

// pair adapts an algorithm package's two constructors.
func pair[R, L strategy.Strategy](
	r func(redis.Scripter, strategy.Limit, ...strategy.Option) (R, error),
	l func(strategy.Limit, ...strategy.Option) (L, error)) algorithm {
	return algorithm{
		newRedis: func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return r(rdb, lim, o...)
		},
		newLocal: func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return l(lim, o...)
		},
	}
}

var algorithms = map[strategy.Algorithm]algorithm{
	SlidingLog:     pair(slidinglog.New, slidinglog.NewLocal),
	CompactLog:     pair(compactlog.New, compactlog.NewLocal),
	FixedWindow:    pair(fixedwindow.New, fixedwindow.NewLocal),
	TokenBucket:    pair(tokenbucket.New, tokenbucket.NewLocal),
	SlidingCounter: pair(slidingcounter.New, slidingcounter.NewLocal),
	GCRA:           pair(gcra.New, gcra.NewLocal),
}

// Config describes one limiter. Algorithm, Limit and Window are required
// by New; Wrap takes only Name, Mode, Tiers, OnFailure and Timeout. The
// strings after the field names are their names in a policy document
// (Policies). docs/changing-limits.md says more of Candidate, Mode and
// Tiers; docs/failure.md of the failure fields; docs/bounds.md of the bounds.
type Config struct {
	Name      string             // the policy's name, for telemetry and headers; in a Set, its policy's
	Algorithm strategy.Algorithm // "algorithm": one of the constants above
	Limit     int64              // "limit": units allowed per Window; >= 0
	Window    time.Duration      // "window": > 0, whole milliseconds
	Burst     int64              // "burst": token bucket and GCRA capacity; 0 means Limit
	Shards    int                // "shards": > 1 spreads each subject over Shards keys (at most sharded.MaxShards)
	Lease     bool               // "lease": hot subjects decided in process from leases (docs/lease.md); on Redis only
	Prefix    string             // "prefix": key namespace; default "rl:"
	Rules     []multilimit.Rule  // "rules": Multi's rules; Limit, Window, Burst and Shards are then 0

	// MaxSubjects ("max_subjects") bounds the subjects a twin (NewLocal's,
	// FailLocal's) holds, 0 meaning strategy.DefaultMaxSubjects, evicting the
	// least recently used (Decision.Evicted); and those holding a lease (0:
	// 10,000), beyond which a subject is decided by Redis, one call each.
	MaxSubjects int

	// Candidate ("candidate") is an algorithm or limit tried in shadow
	// beside this one on the same traffic, on its own keys (Prefix
	// defaults to this Config's); the Observer gets each agreement
	// (Decision.Op "compare"). Only its strategy fields may be set.
	Candidate *Config

	// Mode ("mode") is "enforce" (the default, "") or "shadow": decide and
	// record, but let every request through, a denial marked
	// Result.Shadow.
	Mode string
	// Tiers ("tiers": {"pro": {"limit", "burst"}}) are other limits for
	// some subjects, at most 64: see Limiter.Tier. A tier's Window is 0 or
	// Config's.
	Tiers map[string]Limit

	OnFailure  FailurePolicy // "on_failure": when Redis fails: FailOpen (the default, ""), FailClosed or FailLocal
	LocalShare float64       // "local_share": FailLocal's share of the limits per process, in [0, 1]; 0 means 1
	Timeout    time.Duration // "timeout": the longest wait on Redis per call, at most 1m; 0 means 250ms

	// Replicas ("replicas") > 0: a decision that records units waits for that many replicas to
	// have it, at most ReplicaTimeout ("replica_timeout", < Timeout); docs/failover.md.
	Replicas       int
	ReplicaTimeout time.Duration
}

// The modes of Config.Mode.
const (
	modeEnforce = "enforce"
	modeShadow  = "shadow"
)

// maxTiers is the most tiers a Config may name.
const maxTiers = 64

// limit returns the strategy.Limit of c.
func (c Config) limit() strategy.Limit {
	return strategy.Limit{Limit: c.Limit, Window: c.Window, Burst: c.Burst}
}

// Limiter enforces one strategy; it is safe for concurrent use.
type Limiter struct {
	cfg      Config
	st       strategy.Strategy
	obs      Observer
	capacity int64    // st's (or the tier's): what a degraded Result reports
	checked  bool     // st validates key and cost itself
	shadow   bool     // Config.Mode is "shadow"
	fail     *failure // New with a client, and Wrap: timeout, breaker, policy, denial cache
	ev       *evictions

	tier     string           // the tier this Limiter decides under, or ""
	lim      strategy.Limit   // the tier's Limit (Window 0: the strategy's own)
	localLim strategy.Limit   // the tier's share under FailLocal
	tiers    map[string]*tier // by name, built once
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

// New returns a Limiter for cfg on Redis through rdb: a *redis.Client,
// *redis.ClusterClient or *redis.Ring, batched when it has
// ContextTimeoutEnabled unless WithoutBatching (see package batch), or any
// redis.Scripter; with a nil rdb, in this process only (the algorithm's
// twin), its decisions never failing. An invalid cfg is a *FieldError.
func New(rdb redis.Scripter, cfg Config, opts ...Option) (*Limiter, error) {
	o, err := apply(opts)
	if err != nil {
		return nil, err
	}
	if err := checkFailure(cfg, false); err != nil {
		return nil, err
	}
	ev := new(evictions)
	rep := new(compareReport)
	st, err := buildCompared(rdb, cfg, o, ev, rep)
	if err != nil {
		return nil, err
	}
	var l *Limiter
	switch {
	case rdb != nil:
		var fallback strategy.Strategy
		if cfg.OnFailure == FailLocal {
			if fallback, err = build(nil, cfg.local(), o, ev); err != nil {
				return nil, err
			}
		}
		o.rdb = rdb
		if l, err = wrap(st, cfg, o, fallback, ev); err != nil {
			return nil, err
		}
	default:
		lim := st.Limit()
		if cfg.Algorithm != Multi {
			cfg.Limit, cfg.Window, cfg.Burst = lim.Limit, lim.Window, lim.Burst
		}
		l = &Limiter{cfg: cfg, st: st, obs: o.observer, capacity: lim.Capacity(), checked: true, ev: ev}
		if l, err = l.withTiers(); err != nil {
			return nil, err
		}
	}
	rep.l = l
	return l, nil
}

// Wrap returns a Limiter that enforces st (sharded, multilimit, your own
// strategy) with what New adds around a strategy. Of cfg it takes Name,
// Mode, Tiers, OnFailure and Timeout, the others zero; FailLocal needs
// WithFallback. st is called on the caller's goroutine if it honours its
// context (strategy.ContextHonourer), else on a worker, so Timeout holds.
func Wrap(st strategy.Strategy, cfg Config, opts ...Option) (*Limiter, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: Wrap: strategy is nil", strategy.ErrInvalidOption)
	}
	o, err := apply(opts)
	if err != nil {
		return nil, err
	}
	if err := checkFailure(cfg, true); err != nil {
		return nil, err
	}
	return wrap(st, cfg, o, o.fallback, new(evictions))
}

// local returns the Config one process enforces under FailLocal:
// LocalShare of each limit, rounded up so that a process allows at least
// one unit of a non-zero limit.
func (c Config) local() Config {
	share := c.LocalShare
	if share == 0 || share == 1 {
		return c
	}
	scale := func(v int64) int64 {
		if v == 0 {
			return 0
		}
		return max(1, int64(math.Ceil(float64(v)*share-1e-9)))
	}
	c.Limit, c.Burst = scale(c.Limit), scale(c.Burst)
	if len(c.Rules) > 0 {
		rules := slices.Clone(c.Rules)
		for i := range rules {
			rules[i].Limit.Limit = scale(rules[i].Limit.Limit)
		}
		c.Rules = rules
	}
	return c
}

// build returns the strategy cfg describes: on Redis through rdb, or an
// in-process twin when rdb is nil.
func build(rdb redis.Scripter, cfg Config, o options, ev *evictions) (strategy.Strategy, error) {
	so := []strategy.Option{strategy.WithClock(o.clock), strategy.WithOnEvict(ev.add)}
	if o.direct {
		so = append(so, strategy.WithoutBatching())
	}
	if n := cfg.MaxSubjects; n != 0 {
		if n < 0 {
			return nil, newFieldError(strategy.ErrInvalidOption, "MaxSubjects", jsonName("MaxSubjects"), func(name func(string) string) string {
				return fmt.Sprintf("%s must be >= 0 (0 means %d), got %d", name("MaxSubjects"), strategy.DefaultMaxSubjects, n)
			})
		}
		so = append(so, strategy.WithMaxSubjects(n))
	}
	if cfg.Prefix != "" {
		so = append(so, strategy.WithPrefix(cfg.Prefix))
	}
	if cfg.Replicas > 0 && rdb != nil {
		so = append(so, strategy.WithReplicas(cfg.Replicas, cfg.ReplicaTimeout))
	}
	if err := checkLease(cfg); err != nil {
		return nil, err
	}
	if cfg.Algorithm == Multi || len(cfg.Rules) > 0 {
		return buildMulti(rdb, cfg, so)
	}
	if err := checkAlgorithm(cfg.Algorithm); err != nil {
		return nil, err
	}
	a := algorithms[cfg.Algorithm]
	shards := func(text func(name func(string) string) string) error {
		return newFieldError(strategy.ErrInvalidOption, "Shards", jsonName("Shards"), text)
	}
	switch n := cfg.Shards; { // the messages capture n, so that cfg stays on the stack
	case n < 0:
		return nil, shards(func(name func(string) string) string {
			return fmt.Sprintf("%s must be >= 0, got %d", name("Shards"), n)
		})
	case n > sharded.MaxShards:
		return nil, shards(func(name func(string) string) string {
			return fmt.Sprintf("%s must be <= %d (sharded.MaxShards), got %d", name("Shards"), sharded.MaxShards, n)
		})
	}
	mk := func(lim strategy.Limit) (strategy.Strategy, error) {
		if rdb == nil {
			return a.newLocal(lim, so...)
		}
		return a.newRedis(rdb, lim, so...)
	}
	var st strategy.Strategy
	var err error
	switch {
	case cfg.Shards > 1:
		// each shard's strategy through the same constructor, with its share
		st, err = sharded.New(cfg.Shards, cfg.limit(), mk)
	case cfg.Lease && rdb != nil: // an in-process twin is as fast as a lease
		st, err = lease.New(cfg.limit(), mk, lease.WithClock(o.clock), leaseSubjects(cfg.MaxSubjects), leaseEvents(o.observer, cfg))
	default:
		st, err = mk(cfg.limit())
	}
	if err != nil {
		if fe := asFieldError(err); fe != nil { // an invalid Limit, Window, Burst or Prefix
			return nil, fe
		}
		return nil, err
	}
	return st, nil
}

// leaseSubjects is the lease option of MaxSubjects n (0: the lease's
// default).
func leaseSubjects(n int) lease.Option {
	if n == 0 {
		return nil
	}
	return lease.WithMaxSubjects(n)
}

// leasable are the algorithms package lease can lease, in the order an
// error lists them.
var leasable = []strategy.Algorithm{SlidingLog, CompactLog, FixedWindow, SlidingCounter, TokenBucket, GCRA}

// checkLease reports whether cfg may lease (Config.Lease): one of the
// leasable algorithms, unsharded, without tiers (a lease decides under one
// limit). The error names Lease.
func checkLease(cfg Config) error {
	if !cfg.Lease {
		return nil
	}
	if _, ok := algorithms[cfg.Algorithm]; !ok && cfg.Algorithm != Multi {
		return nil // an unknown algorithm is Algorithm's error
	}
	invalid := func(text func(name func(string) string) string) error {
		return newFieldError(strategy.ErrInvalidOption, "Lease", jsonName("Lease"), text)
	}
	switch a, n := cfg.Algorithm, cfg.Shards; {
	case !slices.Contains(leasable, a) || len(cfg.Rules) > 0:
		names := make([]string, len(leasable))
		for i, l := range leasable {
			names[i] = fmt.Sprintf("%q", l)
		}
		return invalid(func(name func(string) string) string {
			return fmt.Sprintf("%s needs %s %s, got %s", name("Lease"), name("Algorithm"), strings.Join(names, ", "), quote.Value(string(a)))
		})
	case n > 1:
		return invalid(func(name func(string) string) string {
			return fmt.Sprintf("%s needs %s 0 or 1, got %d", name("Lease"), name("Shards"), n)
		})
	case len(cfg.Tiers) > 0:
		return invalid(func(name func(string) string) string {
			return fmt.Sprintf("%s needs no %s: a lease decides under one limit", name("Lease"), name("Tiers"))
		})
	}
	return nil
}

// checkAlgorithm reports whether a names an algorithm (strategy.Algorithms,
// or Multi); the error lists the names.
func checkAlgorithm(a strategy.Algorithm) error {
	if _, ok := algorithms[a]; ok || a == Multi {
		return nil
	}
	names := make([]string, 0, len(algorithms)+1)
	for _, n := range append(strategy.Algorithms(), Multi) {
		names = append(names, fmt.Sprintf("%q", n))
	}
	return newFieldError(strategy.ErrInvalidOption, "Algorithm", jsonName("Algorithm"), func(name func(string) string) string {
		return fmt.Sprintf("%s must be one of %s, got %s", name("Algorithm"), strings.Join(names, ", "), quote.Value(string(a)))
	})
}

// buildCompared returns the strategy cfg describes, with its candidate
// beside it when it has one (see Config.Candidate), reporting each
// comparison through rep.
func buildCompared(rdb redis.Scripter, cfg Config, o options, ev *evictions, rep *compareReport) (strategy.Strategy, error) {
	st, err := o.prebuilt, error(nil)
	if st == nil {
		st, err = build(rdb, cfg, o, ev)
	}
	if err != nil || cfg.Candidate == nil {
		return st, err
	}
	cc, err := cfg.candidate()
	if err != nil {
		return nil, err
	}
	cand, err := build(rdb, cc, o, ev)
	if err != nil {
		return nil, candidateError(err)
	}
	opts := []compare.Option{compare.WithReport(rep.report)}
	if rdb == nil {
		opts = append(opts, compare.WithInline()) // twins: exact, and as cheap as the call
	}
	return compare.New(st, cand, opts...)
}

// strategyFields returns the fields of c that say which strategy it
// builds, the others zero.
func (c Config) strategyFields() Config {
	return Config{Algorithm: c.Algorithm, Limit: c.Limit, Window: c.Window, Burst: c.Burst,
		Shards: c.Shards, Lease: c.Lease, Prefix: c.Prefix, Rules: c.Rules}
}

// candidate returns the Config of c's candidate, its Prefix defaulted to
// c's, or an error naming what it must not set.
func (c Config) candidate() (Config, error) {
	cc := *c.Candidate
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"Name", cc.Name != ""}, {"Mode", cc.Mode != ""}, {"Tiers", len(cc.Tiers) != 0},
		{"OnFailure", cc.OnFailure != ""}, {"LocalShare", cc.LocalShare != 0},
		{"Timeout", cc.Timeout != 0}, {"MaxSubjects", cc.MaxSubjects != 0}, {"Candidate", cc.Candidate != nil},
		{"Replicas", cc.Replicas != 0}, {"ReplicaTimeout", cc.ReplicaTimeout != 0}, {"Lease", cc.Lease},
	} {
		if f.set {
			field := f.name
			return cc, newFieldError(strategy.ErrInvalidOption, "Candidate."+field, "candidate."+jsonName(field),
				func(name func(string) string) string {
					return name("Candidate") + ": " + name(field) + " must be empty: a candidate is only an algorithm and its limit"
				})
		}
	}
	if cc.Prefix == "" {
		cc.Prefix = c.Prefix
	}
	cc.MaxSubjects = c.MaxSubjects // the policy's bound
	if cc.Algorithm == c.Algorithm && cc.Prefix == c.Prefix {
		a := c.Algorithm
		return cc, newFieldError(strategy.ErrInvalidOption, "Candidate.Prefix", "candidate.prefix",
			func(name func(string) string) string {
				return fmt.Sprintf("%s: %s must differ from the policy's when %s is the same (%q), or the two share keys", name("Candidate"), name("Prefix"), name("Algorithm"), a)
			})
	}
	return cc, nil
}

// candidateError returns err, from building a candidate, as a *FieldError
// of the candidate's field at fault ("Candidate.Window"), or of Candidate
// when err names no field.
func candidateError(err error) error {
	wrapped := fmt.Errorf("%w (Candidate)", err)
	if fe := asFieldError(err); fe != nil {
		return fe.within("Candidate", wrapped, func(name func(string) string) string { return " (" + name("Candidate") + ")" })
	}
	return &FieldError{Field: "Candidate", JSON: jsonName("Candidate"), Err: wrapped}
}

// compareReport tells a Limiter's Observer of each comparison its
// candidate made. l is set once the Limiter is built.
type compareReport struct{ l *Limiter }

func (c *compareReport) report(ctx context.Context, n int64, _, candidate strategy.Result, o compare.Outcome) {
	l := c.l
	if l == nil || l.obs == nil {
		return
	}
	l.obs.Observe(ctx, Decision{Policy: l.cfg.Name, Algorithm: l.cfg.Candidate.Algorithm, Op: guard.Compare.String(),
		N: n, Result: candidate, Agreement: o.String(), Start: time.Now()})
}

// buildMulti returns the multilimit strategy of a Multi cfg.
func buildMulti(rdb redis.Scripter, cfg Config, so []strategy.Option) (strategy.Strategy, error) {
	invalid := func(field string, text func(name func(string) string) string) error {
		return newFieldError(strategy.ErrInvalidOption, field, jsonName(field), text)
	}
	switch {
	case cfg.Algorithm != Multi:
		a := cfg.Algorithm // captured by the message alone: cfg stays on the stack
		return nil, invalid("Rules", func(name func(string) string) string {
			return fmt.Sprintf("%s need %s %q, got %s", name("Rules"), name("Algorithm"), Multi, quote.Value(string(a)))
		})
	case len(cfg.Rules) == 0:
		return nil, invalid("Rules", func(name func(string) string) string {
			return fmt.Sprintf("%s: %s %q needs at least one rule", name("Rules"), name("Algorithm"), Multi)
		})
	case cfg.Limit != 0 || cfg.Window != 0 || cfg.Burst != 0:
		field := "Limit"
		if cfg.Limit == 0 {
			field = "Window"
			if cfg.Window == 0 {
				field = "Burst"
			}
		}
		return nil, invalid(field, func(name func(string) string) string {
			return fmt.Sprintf("%s, %s and %s must be 0 with %s %q: each rule has its own", name("Limit"), name("Window"), name("Burst"), name("Algorithm"), Multi)
		})
	case cfg.Shards > 1:
		return nil, invalid("Shards", func(name func(string) string) string {
			return fmt.Sprintf("%s must be 0 or 1 with %s %q", name("Shards"), name("Algorithm"), Multi)
		})
	}
	var st strategy.Strategy
	var err error
	if rdb == nil {
		st, err = multilimit.NewLocal(cfg.Rules, so...)
	} else {
		st, err = multilimit.New(rdb, cfg.Rules, so...)
	}
	if err != nil {
		if fe := (*fielderr.Error)(nil); errors.As(err, &fe) && fe.Field == "Prefix" {
			return nil, asFieldError(err)
		}
		return nil, ruleError(err)
	}
	return st, nil
}

// ruleError returns err, from multilimit's constructor, as a *FieldError
// of Rules.
func ruleError(err error) *FieldError {
	fe := &FieldError{Field: "Rules", JSON: jsonName("Rules"), Err: err}
	if inner := asFieldError(err); inner != nil {
		fe.sentinel, fe.text = inner.sentinel, inner.text
	}
	return fe
}

// Config returns the Config the Limiter enforces (scoped by NewSet; for
// Wrap, Limit, Window and Burst are the strategy's).
func (l *Limiter) Config() Config { return l.cfg }

// Limit returns the strategy's limit, so that a Limiter is a Strategy too.
func (l *Limiter) Limit() Limit {
	if l.tier != "" {
		return l.lim
	}
	return l.st.Limit()
}

var _ strategy.Strategy = (*Limiter)(nil)

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (Result, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN decides whether key may spend n units now and records them only if
// allowed. A denial is a Result, not an error: the error is for invalid
// input or a caller's ended ctx; when Redis fails, the FailurePolicy decides.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Result, error) {
	return l.decide(ctx, guard.Call{Op: guard.Allow, Key: key, N: n})
}

// Peek reports key's state now and consumes nothing, failures as in AllowN.
func (l *Limiter) Peek(ctx context.Context, key string) (Result, error) {
	return l.decide(ctx, guard.Call{Op: guard.Peek, Key: key})
}

// Reset forgets key, in Redis and in this process; like RefundN it has no
// failure policy.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	_, err := l.decide(ctx, guard.Call{Op: guard.Reset, Key: key})
	return err
}
