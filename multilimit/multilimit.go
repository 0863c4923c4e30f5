package multilimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/fielderr"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/internal/settings"
	"github.com/ratekit/ratelimit/strategy"
)

// MaxRules is the largest number of rules one Limiter checks.
const MaxRules = 16

// Tag is the first part of every key's algorithm tag:
// <prefix>ml:<sl|fw>:<window ms>:{<subject>}.
const Tag = "ml"

// Rule is one limit of a Limiter: Limit.Limit units per Limit.Window, kept
// by Algorithm, which must be strategy.SlidingLog (the exact sliding
// window: a sorted set of every request in the window with its cost) or
// strategy.FixedWindow (a count per window aligned to multiples of Window
// since the Unix epoch: one small hash per subject, whatever the limit).
// Limit.Burst is ignored.
type Rule struct {
	Algorithm strategy.Algorithm
	Limit     strategy.Limit
}

// String returns the rule as "sliding_log 10/1s".
func (r Rule) String() string { return fmt.Sprintf("%s %s", r.Algorithm, r.Limit) }

const (
	kindSlidingLog  = 1
	kindFixedWindow = 2
)

// rule is a validated Rule with what the script and the twin need.
type rule struct {
	Rule
	kind     int
	tag      string
	limit    int64
	windowMs int64
}

//go:embed multilimit.lua
var scriptSrc string

var script = redis.NewScript(scriptSrc)

// Limiter enforces several limits on each subject at once, in one script run
// on Redis. It is safe for concurrent use.
type Limiter struct {
	rdb   redis.Scripter
	rules []rule
	opts  settings.Options
	args  []any // the per-rule script arguments, after n and now
}

var (
	_ strategy.Strategy        = (*Limiter)(nil)
	_ strategy.ContextHonourer = (*Limiter)(nil)
)

// New returns a Limiter that enforces every rule on each subject, keeping
// its state in Redis through rdb (a *redis.Client, *redis.ClusterClient or
// *redis.Ring). It fails, naming the rule and field, when a rule or an
// option is invalid, when rules is empty or longer than MaxRules, or when
// two rules have the same algorithm and window (the smaller limit alone
// would do).
func New(rdb redis.Scripter, rules []Rule, opts ...strategy.Option) (*Limiter, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: multilimit: redis client is nil", strategy.ErrInvalidOption)
	}
	rs, o, err := setup(rules, opts)
	if err != nil {
		return nil, err
	}
	args := make([]any, 0, 3*len(rs))
	for _, r := range rs {
		args = append(args, r.kind, r.limit, r.windowMs)
	}
	return &Limiter{rdb: rdb, rules: rs, opts: o, args: args}, nil
}

func setup(rules []Rule, opts []strategy.Option) ([]rule, settings.Options, error) {
	o := settings.Apply(opts)
	if o.Err != nil {
		return nil, o, o.Err
	}
	switch {
	case len(rules) == 0:
		return nil, o, fmt.Errorf("%w: multilimit: rules must not be empty", strategy.ErrInvalidLimit)
	case len(rules) > MaxRules:
		return nil, o, fmt.Errorf("%w: multilimit: at most %d rules, got %d", strategy.ErrInvalidLimit, MaxRules, len(rules))
	}
	rs := make([]rule, len(rules))
	seen := make(map[string]int, len(rules))
	for i, r := range rules {
		if err := r.Limit.Validate(); err != nil {
			// name the rule in the detail, keeping the one prefix and the
			// field at fault
			var fe *fielderr.Error
			if errors.As(err, &fe) {
				return nil, o, fielderr.New(fe.Sentinel, fmt.Sprintf("multilimit: rules[%d]: %s", i, fe.Scope), fe.Field, fe.Text)
			}
			return nil, o, err
		}
		w := r.Limit.Window.Milliseconds()
		x := rule{Rule: r, limit: r.Limit.Limit, windowMs: w}
		switch r.Algorithm {
		case strategy.SlidingLog:
			x.kind, x.tag = kindSlidingLog, "sl"
		case strategy.FixedWindow:
			x.kind, x.tag = kindFixedWindow, "fw"
		default:
			return nil, o, fielderr.New(strategy.ErrInvalidOption, fmt.Sprintf("multilimit: rules[%d]: ", i), "Algorithm", func(name func(string) string) string {
				return fmt.Sprintf("%s must be %q or %q, got %q", name("Algorithm"), strategy.SlidingLog, strategy.FixedWindow, r.Algorithm)
			})
		}
		x.tag = Tag + ":" + x.tag + ":" + strconv.FormatInt(w, 10)
		if j, dup := seen[x.tag]; dup {
			return nil, o, fmt.Errorf("%w: multilimit: rules[%d] (%s) has the algorithm and window of rules[%d] (%s): keep the smaller limit only",
				strategy.ErrInvalidLimit, i, r, j, rules[j])
		}
		seen[x.tag] = i
		rs[i] = x
	}
	return rs, o, nil
}

// Rules returns the rules the Limiter enforces, in the order given to New.
func (l *Limiter) Rules() []Rule { return publicRules(l.rules) }

// Limit returns the Limit of the most restrictive rule: the smallest
// Limit.Limit (on a tie, the longest Window), with Burst 0. Its Capacity
// is the most units a subject can hold.
func (l *Limiter) Limit() strategy.Limit { return limitOf(l.rules) }

// HonoursContext reports whether every call returns by its context's
// deadline or cancellation: whether the Redis client does (see
// strategy.ContextHonourer).
func (l *Limiter) HonoursContext() bool { return redisx.HonoursContext(l.rdb) }

// limitOf returns the Limit of the most restrictive of rs (see
// Limiter.Limit).
func limitOf(rs []rule) strategy.Limit {
	var out strategy.Limit
	for i, r := range rs {
		lim := strategy.Limit{Limit: r.Limit.Limit, Window: r.Limit.Window}
		if i == 0 || lim.Limit < out.Limit || lim.Limit == out.Limit && lim.Window > out.Window {
			out = lim
		}
	}
	return out
}

func publicRules(rs []rule) []Rule {
	out := make([]Rule, len(rs))
	for i, r := range rs {
		out[i] = r.Rule
	}
	return out
}

// Keys returns the Redis keys that hold subject's state, one per rule in
// rule order. They share the subject's hash tag, so they live in one Redis
// Cluster slot.
func (l *Limiter) Keys(subject string) []string {
	keys := make([]string, len(l.rules))
	for i, r := range l.rules {
		keys[i] = strategy.KeyFor(l.opts.Prefix, r.tag, subject, strategy.NoShard)
	}
	return keys
}

// AllowN records n units for key under every rule if every rule allows them,
// and under none otherwise, in one script run. The Result is the most
// restrictive of the rules (see the package doc).
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	r, _, err := l.AllowNEach(ctx, key, n)
	return r, err
}

// AllowNEach is AllowN that also returns each rule's Result, in rule order:
// what the rule reports after the decision (Allowed says whether that rule
// alone would have allowed the request).
func (l *Limiter) AllowNEach(ctx context.Context, key string, n int64) (strategy.Result, []strategy.Result, error) {
	if err := strategy.ValidateKey(key); err != nil {
		return strategy.Result{}, nil, err
	}
	if err := strategy.ValidateCost(n); err != nil {
		return strategy.Result{}, nil, err
	}
	args := make([]any, 0, 2+len(l.args))
	args = append(args, n, redisx.NowArg(l.opts.Clock))
	args = append(args, l.args...)
	v := make([]int64, 1+3*len(l.rules))
	if err := redisx.Run(ctx, l.rdb, script, l.Keys(key), v, args...); err != nil {
		return strategy.Result{}, nil, err
	}
	each := make([]strategy.Result, len(l.rules))
	for i, r := range l.rules {
		rem, retry, reset := v[1+3*i], v[2+3*i], v[3+3*i]
		each[i] = redisx.ResultOf(retry == 0, r.limit, rem, retry, reset)
	}
	return combine(v[0] == 1, each), each, nil
}

// Peek reports key's state now under every rule, combined as by AllowN,
// without recording anything or writing to Redis.
func (l *Limiter) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset deletes key's state under every rule.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if err := strategy.ValidateKey(key); err != nil {
		return err
	}
	return redisx.Del(ctx, l.rdb, l.Keys(key)...)
}

// combine returns the Result of a multi-limit decision from each rule's
// Result: Allowed as given (every rule allowed and, unless a peek, the units
// were recorded under every rule); Remaining the smallest Remaining, and
// Limit the capacity of the rule that has it (on a tie, the smaller
// capacity, then the earlier rule); RetryAfter the largest RetryAfter of the
// rules that deny, strategy.Never if any of them can never pass, 0 when
// allowed; ResetAfter the largest ResetAfter, when every rule is back to
// full capacity. each must not be empty.
func combine(allowed bool, each []strategy.Result) strategy.Result {
	out := strategy.Result{Allowed: allowed, Limit: each[0].Limit, Remaining: each[0].Remaining}
	for i, r := range each {
		if i > 0 && (r.Remaining < out.Remaining || r.Remaining == out.Remaining && r.Limit < out.Limit) {
			out.Limit, out.Remaining = r.Limit, r.Remaining
		}
		out.ResetAfter = max(out.ResetAfter, r.ResetAfter)
		if !allowed && out.RetryAfter != strategy.Never {
			if r.RetryAfter == strategy.Never {
				out.RetryAfter = strategy.Never
			} else {
				out.RetryAfter = max(out.RetryAfter, r.RetryAfter)
			}
		}
	}
	return out
}

// windowStart is the start (ms) of the fixed window that holds now.
func windowStart(now, windowMs int64) int64 { return now - now%windowMs }
