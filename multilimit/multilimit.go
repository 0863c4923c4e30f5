package multilimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/fielderr"
	"github.com/ratekit/ratelimit/internal/localstore"
	"github.com/ratekit/ratelimit/internal/settings"
	"github.com/ratekit/ratelimit/internal/unitlog"
	"github.com/ratekit/ratelimit/strategy"
)

// MaxRules is the largest number of rules one Limiter checks.
const MaxRules = 16

// Tag is the first part of every key's tag: <prefix>ml:<sl|fw>:<window ms>:{<subject>}.
const Tag = "ml"

// Rule is one limit of a Limiter: Limit.Limit units per Limit.Window, kept by
// Algorithm, strategy.SlidingLog or strategy.FixedWindow (see the package
// doc). Limit.Burst is ignored.
type Rule struct {
	Algorithm strategy.Algorithm
	Limit     strategy.Limit
}

// String returns the rule as "sliding_log 10/1s".
func (r Rule) String() string { return fmt.Sprintf("%s %s", r.Algorithm, r.Limit) }

var (
	//go:embed multilimit.lua
	scriptSrc string
	//go:embed refund.lua
	refundSrc string
	// the sliding log's refund, the rules', then the decision as a peek
	script, refundScript = engine.Script(unitlog.KthLua, scriptSrc), engine.Script(unitlog.KthLua, unitlog.RefundLua, refundSrc, scriptSrc)
)

// Limiter enforces every rule on each subject at once, in one script call on
// Redis. Limiter and Local are safe for concurrent use.
type Limiter struct {
	set
	rdb redis.Scripter
}

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only (see the package doc).
type Local struct {
	set
	clock strategy.Clock
	store *localstore.Store[[]ruleState]
}

// New returns a Limiter keeping its state in Redis through rdb (a
// *redis.Client, *redis.ClusterClient or *redis.Ring). It fails, naming the
// rule and field, when an option or a rule is invalid, when rules is empty
// or longer than MaxRules, or when two rules share algorithm and window.
func New(rdb redis.Scripter, rules []Rule, opts ...strategy.Option) (*Limiter, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: multilimit: redis client is nil", strategy.ErrInvalidOption)
	}
	l := &Limiter{rdb: rdb}
	if err := l.setup(rules, opts, l.redis); err != nil {
		return nil, err
	}
	return l, nil
}

// NewLocal returns the in-process twin of New. Of the options, WithClock
// (default time.Now), WithMaxSubjects and WithOnEvict matter.
func NewLocal(rules []Rule, opts ...strategy.Option) (*Local, error) {
	l := &Local{clock: strategy.ClockFunc(time.Now)}
	if err := l.setup(rules, opts, l.local); err != nil {
		return nil, err
	}
	var w int64 // idle subjects are freed within about the longest window
	for _, r := range l.rules {
		w = max(w, r.window)
	}
	if l.opts.Clock != nil {
		l.clock = l.opts.Clock
	}
	now := func() int64 { return l.clock.Now().UnixMilli() }
	l.store = localstore.NewStore[[]ruleState](localstore.Config{MaxSubjects: l.opts.MaxSubjects, OnEvict: l.opts.OnEvict,
		Sweep: max(time.Duration(w)*time.Millisecond, localstore.MinSweep), Now: now})
	return l, nil
}

// set is what a Limiter and its twin share: the rules, the options, and run,
// the backend that decides q under every rule into each.
type set struct {
	rules []rule
	args  []any // the script's ARGV per rule: kind, limit, window ms
	opts  settings.Options
	run   func(ctx context.Context, q engine.Req, each []strategy.Result) (allowed bool, err error)
}

// rule is a validated Rule: a sliding log (log) or a fixed window, its key
// tag, and its units per window ms.
type rule struct {
	Rule
	log           bool
	tag           string
	limit, window int64
}

// setup checks opts, then rules, and sets s up on run.
func (s *set) setup(rules []Rule, opts []strategy.Option, run func(context.Context, engine.Req, []strategy.Result) (bool, error)) error {
	s.opts, s.run = settings.Apply(opts), run
	switch {
	case s.opts.Err != nil:
		return s.opts.Err
	case len(rules) == 0:
		return fmt.Errorf("%w: multilimit: rules must not be empty", strategy.ErrInvalidLimit)
	case len(rules) > MaxRules:
		return fmt.Errorf("%w: multilimit: at most %d rules, got %d", strategy.ErrInvalidLimit, MaxRules, len(rules))
	}
	seen := make(map[string]int, len(rules))
	for i, r := range rules {
		scope, fe := fmt.Sprintf("multilimit: rules[%d]: ", i), (*fielderr.Error)(nil)
		if err := r.Limit.Validate(); errors.As(err, &fe) { // the rule named, the field kept
			return fielderr.New(fe.Sentinel, scope+fe.Scope, fe.Field, fe.Text)
		} else if err != nil {
			return err
		}
		x, kind := rule{Rule: r, log: r.Algorithm == strategy.SlidingLog, tag: "sl", limit: r.Limit.Limit, window: r.Limit.Window.Milliseconds()}, 1
		if r.Algorithm == strategy.FixedWindow {
			x.tag, kind = "fw", 2
		} else if !x.log {
			return fielderr.New(strategy.ErrInvalidOption, scope, "Algorithm", func(name func(string) string) string {
				return fmt.Sprintf("%s must be %q or %q, got %q", name("Algorithm"), strategy.SlidingLog, strategy.FixedWindow, r.Algorithm)
			})
		}
		x.tag = Tag + ":" + x.tag + ":" + strconv.FormatInt(x.window, 10)
		if j, dup := seen[x.tag]; dup {
			return fmt.Errorf("%w: multilimit: rules[%d] (%s) has the algorithm and window of rules[%d] (%s): keep the smaller limit only",
				strategy.ErrInvalidLimit, i, r, j, rules[j])
		}
		seen[x.tag], s.rules, s.args = i, append(s.rules, x), append(s.args, kind, x.limit, x.window)
	}
	return nil
}

// Rules returns the rules enforced, in the order given to New.
func (s *set) Rules() []Rule {
	out := make([]Rule, len(s.rules))
	for i, r := range s.rules {
		out[i] = r.Rule
	}
	return out
}

// Limit returns the Limit of the most restrictive rule: the smallest
// Limit.Limit (on a tie, the longest Window), with Burst 0.
func (s *set) Limit() strategy.Limit {
	var out strategy.Limit
	for i, r := range s.rules {
		if i == 0 || r.limit < out.Limit || r.limit == out.Limit && r.Limit.Window > out.Window {
			out = strategy.Limit{Limit: r.limit, Window: r.Limit.Window}
		}
	}
	return out
}

// AllowN records n units for key under every rule if every rule allows
// them, and under none otherwise; n = 0 is Peek. The Result is the most
// restrictive of the rules' (see the package doc).
func (s *set) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	r, _, err := s.AllowNEach(ctx, key, n)
	return r, err
}

// AllowNEach is AllowN that also returns each rule's Result, in rule order.
func (s *set) AllowNEach(ctx context.Context, key string, n int64) (strategy.Result, []strategy.Result, error) {
	return s.do(ctx, engine.Req{Op: engine.OpAllow, Key: key, N: n})
}

// Peek reports key's state now under every rule, combined as by AllowN.
func (s *set) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return s.AllowN(ctx, key, 0)
}

// RefundN gives back up to n units under every rule, each by its own rule
// (see the package doc), and returns key's state after, as Peek reports it.
func (s *set) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	r, _, err := s.RefundNEach(ctx, key, n)
	return r, err
}

// RefundNEach is RefundN that also returns each rule's Result, in rule order.
func (s *set) RefundNEach(ctx context.Context, key string, n int64) (strategy.Result, []strategy.Result, error) {
	return s.do(ctx, engine.Req{Op: engine.OpRefund, Key: key, N: n})
}

// Reset forgets key under every rule.
func (s *set) Reset(ctx context.Context, key string) error {
	_, _, err := s.do(ctx, engine.Req{Op: engine.OpReset, Key: key})
	return err
}

// do checks q's key and cost, runs it, and combines the rules' Results.
func (s *set) do(ctx context.Context, q engine.Req) (strategy.Result, []strategy.Result, error) {
	if err := strategy.ValidateKey(q.Key); err != nil {
		return strategy.Result{}, nil, err
	} else if err := strategy.ValidateCost(q.N); err != nil {
		return strategy.Result{}, nil, err
	}
	each := make([]strategy.Result, len(s.rules))
	allowed, err := s.run(ctx, q, each)
	if err != nil || q.Op == engine.OpReset {
		return strategy.Result{}, nil, err
	}
	return combine(allowed, each), each, nil
}

// HonoursContext reports whether every call returns by its context's
// deadline or cancellation: whether the Redis client does.
func (l *Limiter) HonoursContext() bool { return engine.HonoursContext(l.rdb) }

// Keys returns the Redis keys of subject's state, one per rule in rule
// order, all in the subject's hash slot.
func (l *Limiter) Keys(subject string) []string {
	keys := make([]string, len(l.rules))
	for i, r := range l.rules {
		keys[i] = strategy.KeyFor(l.opts.Prefix, r.tag, subject, strategy.NoShard)
	}
	return keys
}

// redis runs q as one script call.
func (l *Limiter) redis(ctx context.Context, q engine.Req, each []strategy.Result) (bool, error) {
	c := engine.Del(l.Keys(q.Key)...)
	switch q.Op {
	case engine.OpAllow: // ARGV: n, now, then the rules'
		c.Script, c.Args = script, append([]any{q.N, engine.NowArg(l.opts.Clock)}, l.args...)
	case engine.OpRefund: // a peek's, then the units to give back
		c.Script, c.Args = script, append(append([]any{0, engine.NowArg(l.opts.Clock)}, l.args...), q.N)
		if q.N > 0 {
			c.Script = refundScript
		}
	}
	c = engine.Run(ctx, l.rdb, c)
	v := make([]int64, 1+3*len(l.rules))
	if c.Err != nil || q.Op == engine.OpReset {
		return false, c.Err
	} else if err := engine.DecodeInts(c.Reply, v); err != nil {
		return false, err
	}
	for i, r := range l.rules {
		each[i] = engine.ResultOf(v[2+3*i] == 0, r.limit, v[1+3*i], v[2+3*i], v[3+3*i])
	}
	return v[0] == 1, nil
}

// HonoursContext returns true: the twin never waits on a network.
func (*Local) HonoursContext() bool { return true }

// Subjects returns how many subjects the twin holds state for.
func (l *Local) Subjects() int { return l.store.Len() }

// local decides q as the scripts do: every rule peeks (after its refund),
// then, for n units, records them if every rule allows them, or reports
// its own denial.
func (l *Local) local(ctx context.Context, q engine.Req, each []strategy.Result) (allowed bool, err error) {
	k, n := localstore.Key{Subject: q.Key, Shard: strategy.NoShard}, q.N
	if q.Op == engine.OpReset {
		l.store.Delete(k)
		return false, nil
	} else if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("%w: %w", strategy.ErrBackend, err)
	}
	now := l.clock.Now().UnixMilli()
	l.store.Do(k, now, func(s *[]ruleState) (expires int64) {
		if *s == nil {
			*s = make([]ruleState, len(l.rules))
		}
		allowed = true
		for i := range l.rules {
			st, r := &(*s)[i], &l.rules[i]
			if q.Op == engine.OpRefund {
				st.give(r, now, n)
			}
			each[i] = st.decide(r, now, 0)
			allowed = allowed && each[i].Allowed && (q.Op == engine.OpRefund || each[i].Remaining >= n)
		}
		for i := range l.rules {
			st, r := &(*s)[i], &l.rules[i]
			if q.Op == engine.OpAllow && n > 0 && (allowed || !each[i].Allowed || each[i].Remaining < n) {
				each[i] = st.decide(r, now, n) // records n when allowed; else the rule's own denial
			}
			expires = max(expires, st.expires(r))
		}
		return expires
	})
	return allowed, nil
}

// ruleState is a subject's state under one rule: a sliding log, or a fixed
// window's start (ms) and the units counted in it.
type ruleState struct {
	log          unitlog.Log
	start, count int64
}

// decide is r's own decision for n units at now, as multilimit.lua's: it
// records them when r allows them and n > 0.
func (st *ruleState) decide(r *rule, now, n int64) strategy.Result {
	if r.log {
		return st.log.Decide(r.limit, r.window, now, n)
	}
	start := now - now%r.window // windows aligned to multiples of window since the epoch
	count, left, retry, reset := int64(0), start+r.window-now, int64(0), int64(0)
	if st.start == start {
		count = st.count
	}
	if count > 0 {
		reset = left
	}
	switch want := max(n, 1); {
	case want > r.limit:
		retry = -1
	case count+want > r.limit:
		retry = left
	case n > 0:
		st.start, st.count = start, count+n
		return engine.ResultOf(true, r.limit, r.limit-count-n, 0, left)
	}
	return engine.ResultOf(retry == 0, r.limit, max(r.limit-count, 0), retry, reset)
}

// give is r's refund of up to n units at now, of those still in its window.
func (st *ruleState) give(r *rule, now, n int64) {
	if r.log {
		st.log.Refund(now-r.window, n)
	} else if st.start == now-now%r.window {
		st.count -= min(n, st.count)
	}
}

// expires is until when st matters under r (Unix ms; 0: it does not).
func (st *ruleState) expires(r *rule) int64 {
	if r.log {
		return st.log.Expires(r.window)
	} else if st.count > 0 {
		return st.start + r.window
	}
	return 0
}

// combine returns the Result of a decision from each rule's (not empty), as
// the package doc says: Allowed as given, the smallest Remaining with its
// rule's Limit, the largest RetryAfter of the rules that deny (Never wins),
// the largest ResetAfter.
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
