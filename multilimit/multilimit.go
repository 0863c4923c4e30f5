package multilimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/exact"
	"github.com/ratekit/ratelimit/internal/fielderr"
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
)

// spec runs the rules on the engine; a Limiter's copy has Params return its
// rules.
var spec = engine.Spec[set, []ruleState]{
	Name:   "multilimit",
	Script: engine.Script(unitlog.KthLua, scriptSrc),
	// the sliding log's refund, the rules', then the decision as a peek
	Refund:   engine.Script(unitlog.KthLua, unitlog.RefundLua, refundSrc, scriptSrc),
	Capacity: func(s *set) int64 { return s.lim.Limit },
	Sweep:    func(s *set) time.Duration { return s.longest }, // idle subjects go within about the longest window
	Keys: func(s *set, prefix, subject string, shard int) []string {
		keys := make([]string, len(s.rules))
		for i, r := range s.rules {
			keys[i] = strategy.KeyFor(prefix, r.tag, subject, shard)
		}
		return keys
	},
	// ARGV: n, now, then the rules'; a refund's, then the units to give back
	Args:       func(s, _ *set, n int64, now any) []any { return append([]any{n, now}, s.args...) },
	RefundArgs: func(s, _ *set, n int64, now any) []any { return append(append([]any{0, now}, s.args...), n) },
}

// Limiter enforces every rule on each subject at once, in one script call on
// Redis. Limiter and Local are safe for concurrent use.
type Limiter struct {
	multi
	e engine.Redis[set, []ruleState]
}

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only (see the package doc).
type Local struct {
	multi
	e engine.Local[set, []ruleState]
}

// New returns a Limiter keeping its state in Redis through rdb (a
// *redis.Client, *redis.ClusterClient or *redis.Ring). It fails, naming the
// rule and field, when an option or a rule is invalid, when rules is empty
// or longer than MaxRules, or when two rules share algorithm and window.
func New(rdb redis.Scripter, rules []Rule, opts ...strategy.Option) (*Limiter, error) {
	l := new(Limiter)
	if rdb == nil { // reported first, by the engine
		return nil, l.e.Init(&spec, nil, strategy.Limit{}, nil)
	}
	l.multi = multi{run: l.redis}
	return build(l, &l.multi, rules, opts, func(s *engine.Spec[set, []ruleState], lim strategy.Limit) error { return l.e.Init(s, rdb, lim, opts) })
}

// NewLocal returns the in-process twin of New. Of the options, WithClock
// (default time.Now), WithMaxSubjects and WithOnEvict matter.
func NewLocal(rules []Rule, opts ...strategy.Option) (*Local, error) {
	l := new(Local)
	l.multi = multi{run: l.local}
	return build(l, &l.multi, rules, opts, func(s *engine.Spec[set, []ruleState], lim strategy.Limit) error { return l.e.Init(s, lim, opts) })
}

// build checks opts, then rules, then has init set the engine up under a
// copy of spec whose parameters are the rules, enforcing their Limit.
func build[T any](t *T, m *multi, rules []Rule, opts []strategy.Option, init func(*engine.Spec[set, []ruleState], strategy.Limit) error) (*T, error) {
	s, err := setOf(rules, opts)
	if err != nil {
		return nil, err
	}
	sp := spec
	sp.Params = func(strategy.Limit, *set) (set, error) { return s, nil }
	m.set = &s
	if err := init(&sp, s.lim); err != nil {
		return nil, err
	}
	return t, nil
}

// set is the rules validated: the engine's parameters. rule is one: a
// sliding log (log) or a fixed window, its key tag, its units per window ms.
type set struct {
	given   []Rule
	rules   []rule
	args    []any          // the script's ARGV per rule: kind, limit, window ms
	lim     strategy.Limit // the most restrictive rule's
	longest time.Duration
}

type rule struct {
	log           bool
	tag           string
	limit, window int64
}

// setOf checks opts, then rules, and returns the rules' set.
func setOf(rules []Rule, opts []strategy.Option) (set, error) {
	s := set{given: slices.Clone(rules)}
	switch o := settings.Apply(opts); {
	case o.Err != nil:
		return s, o.Err
	case len(rules) == 0:
		return s, fmt.Errorf("%w: multilimit: rules must not be empty", strategy.ErrInvalidLimit)
	case len(rules) > MaxRules:
		return s, fmt.Errorf("%w: multilimit: at most %d rules, got %d", strategy.ErrInvalidLimit, MaxRules, len(rules))
	}
	seen := make(map[string]int, len(rules))
	for i, r := range rules {
		scope, fe := fmt.Sprintf("multilimit: rules[%d]: ", i), (*fielderr.Error)(nil)
		if err := r.Limit.Validate(); errors.As(err, &fe) { // the rule named, the field kept
			return s, fielderr.New(fe.Sentinel, scope+fe.Scope, fe.Field, fe.Text)
		} else if err != nil {
			return s, err
		}
		x, kind := rule{log: r.Algorithm == strategy.SlidingLog, tag: "sl", limit: r.Limit.Limit, window: r.Limit.Window.Milliseconds()}, 1
		if r.Algorithm == strategy.FixedWindow {
			x.tag, kind = "fw", 2
		} else if !x.log {
			return s, fielderr.New(strategy.ErrInvalidOption, scope, "Algorithm", func(name func(string) string) string {
				return fmt.Sprintf("%s must be %q or %q, got %q", name("Algorithm"), strategy.SlidingLog, strategy.FixedWindow, r.Algorithm)
			})
		}
		x.tag = Tag + ":" + x.tag + ":" + strconv.FormatInt(x.window, 10)
		if j, dup := seen[x.tag]; dup {
			return s, fmt.Errorf("%w: multilimit: rules[%d] (%s) has the algorithm and window of rules[%d] (%s): keep the smaller limit only",
				strategy.ErrInvalidLimit, i, r, j, rules[j])
		}
		if i == 0 || x.limit < s.lim.Limit || x.limit == s.lim.Limit && r.Limit.Window > s.lim.Window {
			s.lim = strategy.Limit{Limit: x.limit, Window: r.Limit.Window} // on a tie, the longest Window
		}
		seen[x.tag], s.rules, s.args, s.longest = i, append(s.rules, x), append(s.args, kind, x.limit, x.window), max(s.longest, r.Limit.Window)
	}
	return s, nil
}

// Rules returns the rules enforced, in the order given to New.
func (s *set) Rules() []Rule { return slices.Clone(s.given) }

// multi is what a Limiter and its twin share: the rules, and run, which
// decides q under every rule.
type multi struct {
	*set
	run func(ctx context.Context, q engine.Req) (allowed bool, each []strategy.Result, err error)
}

// Limit returns the Limit of the most restrictive rule: the smallest
// Limit.Limit (on a tie, the longest Window), with Burst 0.
func (m *multi) Limit() strategy.Limit { return m.lim }

// AllowN records n units for key under every rule if every rule allows
// them, and under none otherwise; n = 0 is Peek. The Result is the most
// restrictive of the rules' (see the package doc).
func (m *multi) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	r, _, err := m.AllowNEach(ctx, key, n)
	return r, err
}

// AllowNEach is AllowN that also returns each rule's Result, in rule order.
func (m *multi) AllowNEach(ctx context.Context, key string, n int64) (strategy.Result, []strategy.Result, error) {
	return m.do(ctx, engine.Req{Op: engine.OpAllow, Key: key, N: n})
}

// Peek reports key's state now under every rule, combined as by AllowN.
func (m *multi) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return m.AllowN(ctx, key, 0)
}

// RefundN gives back up to n units under every rule, each by its own rule
// (see the package doc), and returns key's state after, as Peek reports it.
func (m *multi) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	r, _, err := m.RefundNEach(ctx, key, n)
	return r, err
}

// RefundNEach is RefundN that also returns each rule's Result, in rule order.
func (m *multi) RefundNEach(ctx context.Context, key string, n int64) (strategy.Result, []strategy.Result, error) {
	return m.do(ctx, engine.Req{Op: engine.OpRefund, Key: key, N: n})
}

// Reset forgets key under every rule.
func (m *multi) Reset(ctx context.Context, key string) error {
	_, _, err := m.do(ctx, engine.Req{Op: engine.OpReset, Key: key})
	return err
}

// do runs q and combines the rules' Results.
func (m *multi) do(ctx context.Context, q engine.Req) (strategy.Result, []strategy.Result, error) {
	allowed, each, err := m.run(ctx, q)
	if err != nil || q.Op == engine.OpReset {
		return strategy.Result{}, nil, err
	}
	return combine(allowed, each), each, nil
}

// HonoursContext reports whether every call returns by its context's
// deadline or cancellation: whether the Redis client does.
func (l *Limiter) HonoursContext() bool { return l.e.HonoursContext() }

// Keys returns the Redis keys of subject's state, one per rule in rule
// order, all in the subject's hash slot.
func (l *Limiter) Keys(subject string) []string { return l.e.Keys(subject) }

// redis runs q as one script call, whose reply is every rule's.
func (l *Limiter) redis(ctx context.Context, q engine.Req) (bool, []strategy.Result, error) {
	c, err := l.e.Plan(q)
	if err != nil {
		return false, nil, err
	}
	c.Decode = false // the rules' reply, decoded below
	c = engine.Run(ctx, l.e.Client(), c)
	v := make([]int64, 1+3*len(l.rules))
	if c.Err != nil || q.Op == engine.OpReset {
		return false, nil, c.Err
	} else if err := engine.DecodeInts(c.Reply, v); err != nil {
		return false, nil, err
	}
	each := make([]strategy.Result, len(l.rules))
	for i, r := range l.rules {
		each[i] = engine.ResultOf(v[2+3*i] == 0, r.limit, v[1+3*i], v[2+3*i], v[3+3*i])
	}
	return v[0] == 1, each, nil
}

// HonoursContext returns true: the twin never waits on a network.
func (*Local) HonoursContext() bool { return true }

// Subjects returns how many subjects the twin holds state for.
func (l *Local) Subjects() int { return l.e.Subjects() }

// local decides q as the scripts do: every rule peeks (after its refund),
// then, for n units, records them if every rule allows them, or reports
// its own denial.
func (l *Local) local(ctx context.Context, q engine.Req) (allowed bool, each []strategy.Result, err error) {
	n, each, refund := q.N, make([]strategy.Result, len(l.rules)), q.Op == engine.OpRefund
	err = l.e.Update(ctx, q, func(s *[]ruleState, p *set, now int64) (expires int64) {
		if *s == nil {
			*s = make([]ruleState, len(p.rules))
		}
		allowed = true
		for i, r := range p.rules {
			if w := (*s)[i].of(r.log); refund {
				each[i] = w.Give(r.limit, r.window, now, n)
			} else {
				each[i] = w.Decide(r.limit, r.window, now, 0)
			}
			allowed = allowed && each[i].Allowed && (refund || each[i].Remaining >= n)
		}
		for i, r := range p.rules {
			w := (*s)[i].of(r.log)
			if !refund && n > 0 && (allowed || !each[i].Allowed || each[i].Remaining < n) {
				each[i] = w.Decide(r.limit, r.window, now, n) // records n when allowed; else the rule's own denial
			}
			expires = max(expires, w.Expires(r.window))
		}
		return expires
	})
	return allowed, each, err
}

// ruleState is a subject's state under one rule: a sliding log, or a fixed
// window's count.
type ruleState struct {
	log unitlog.Log
	win exact.Counter
}

// of returns st's state of a sliding log (log) or a fixed window, whose
// decision, refund and expiry are the rule's script's.
func (st *ruleState) of(log bool) interface {
	Decide(limit, window, now, n int64) strategy.Result
	Give(limit, window, now, n int64) strategy.Result
	Expires(window int64) int64
} {
	if log {
		return &st.log
	}
	return &st.win
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
		if !allowed && out.RetryAfter != strategy.Never && (r.RetryAfter == strategy.Never || r.RetryAfter > out.RetryAfter) {
			out.RetryAfter = r.RetryAfter
		}
	}
	return out
}
