package multilimit

import (
	_ "embed"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/rules"
	"github.com/ratekit/ratelimit/internal/unitlog"
	"github.com/ratekit/ratelimit/strategy"
)

// MaxRules is the largest number of rules one Limiter checks.
const MaxRules = rules.Max

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

// ruleSpec is the engine's Spec of the rules.
type ruleSpec = engine.Spec[rules.Set, rules.State]

// spec runs the rules on the engine (through Plan and Update, for each
// rule's Result); a Limiter's copy has Params return its rules.
var spec = ruleSpec{
	Name:   "multilimit",
	Script: engine.Script(unitlog.KthLua, scriptSrc),
	// the sliding log's refund, the rules', then the decision as a peek
	Refund:   engine.Script(unitlog.KthLua, unitlog.RefundLua, refundSrc, scriptSrc),
	Capacity: func(s *rules.Set) int64 { return s.Lim.Limit },
	Sweep:    func(s *rules.Set) time.Duration { return s.Longest }, // idle subjects go within about the longest window
	Keys:     (*rules.Set).Keys,
	// ARGV: n, now, then the rules'; a refund's, then the units to give back
	Args:       func(s, _ *rules.Set, n int64, now any) []any { return append([]any{n, now}, s.Args...) },
	RefundArgs: func(s, _ *rules.Set, n int64, now any) []any { return append(append([]any{0, now}, s.Args...), n) },
}

// Limiter enforces every rule on each subject at once, in one script call on
// Redis. Limiter and Local are safe for concurrent use.
type Limiter struct {
	multi
	e engine.Redis[rules.Set, rules.State]
}

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only (see the package doc).
type Local struct {
	multi
	e engine.Local[rules.Set, rules.State]
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
	l.Run = l.OnRedis(&l.e)
	return build(l, &l.multi, rules, opts, func(sp *ruleSpec) error { return l.e.Init(sp, rdb, l.Lim, opts) })
}

// NewLocal returns the in-process twin of New. Of the options, WithClock
// (default time.Now), WithMaxSubjects and WithOnEvict matter.
func NewLocal(rs []Rule, opts ...strategy.Option) (*Local, error) {
	l := new(Local)
	l.Run = rules.OnLocal(&l.e)
	return build(l, &l.multi, rs, opts, func(sp *ruleSpec) error { return l.e.Init(sp, l.Lim, opts) })
}

// multi is what a Limiter and its twin share: the rules' Strategy, and
// the rules as given.
type multi struct {
	rules.Strategy
	given []Rule
}

// build checks opts, then rs, then has init set t's engine up under a
// copy of spec whose parameters are the rules.
func build[T any](t *T, m *multi, rs []Rule, opts []strategy.Option, init func(*ruleSpec) error) (*T, error) {
	s, err := rules.Parse(Tag, opts, len(rs), func(i int) (strategy.Algorithm, strategy.Limit, string) {
		return rs[i].Algorithm, rs[i].Limit, rs[i].String()
	})
	if err != nil {
		return nil, err
	}
	m.Set, m.given = s, slices.Clone(rs)
	sp := spec
	sp.Params = func(strategy.Limit, *rules.Set) (rules.Set, error) { return s, nil }
	if err := init(&sp); err != nil {
		return nil, err
	}
	return t, nil
}

// Rules returns the rules enforced, in the order given to New.
func (m *multi) Rules() []Rule { return slices.Clone(m.given) }

// HonoursContext reports whether every call returns by its context's
// deadline or cancellation: whether the Redis client does.
func (l *Limiter) HonoursContext() bool { return l.e.HonoursContext() }

// Keys returns the Redis keys of subject's state, one per rule in rule
// order, all in the subject's hash slot.
func (l *Limiter) Keys(subject string) []string { return l.e.Keys(subject) }

// HonoursContext returns true: the twin never waits on a network.
func (*Local) HonoursContext() bool { return true }

// Subjects returns how many subjects the twin holds state for.
func (l *Local) Subjects() int { return l.e.Subjects() }
