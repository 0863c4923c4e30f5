// Package rules is the pure part of package multilimit: a set of rules
// (sliding logs and fixed windows) checked together for one subject. It
// validates them, decides for the in-process twin as multilimit.lua does,
// reads the script's reply and combines the rules' Results.
package rules

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/exact"
	"github.com/ratekit/ratelimit/internal/fielderr"
	"github.com/ratekit/ratelimit/internal/settings"
	"github.com/ratekit/ratelimit/internal/unitlog"
	"github.com/ratekit/ratelimit/strategy"
)

// Max is the largest number of rules of one set.
const Max = 16

// Set is the rules validated.
type Set struct {
	Rules   []Rule
	Args    []any          // the script's ARGV per rule: kind, limit, window ms
	Lim     strategy.Limit // the most restrictive rule's
	Longest time.Duration
}

// Rule is one rule: a sliding log (Log) or a fixed window, its key tag,
// its units per window ms.
type Rule struct {
	Log           bool
	Tag           string
	Limit, Window int64
}

// Parse checks opts, then n rules, rule i being alg and lim, named desc in
// errors, and returns their set, each rule's key tag starting with tag.
func Parse(tag string, opts []strategy.Option, n int, rule func(i int) (alg strategy.Algorithm, lim strategy.Limit, desc string)) (Set, error) {
	var s Set
	switch o := settings.Apply(opts); {
	case o.Err != nil:
		return s, o.Err
	case n == 0:
		return s, fmt.Errorf("%w: multilimit: rules must not be empty", strategy.ErrInvalidLimit)
	case n > Max:
		return s, fmt.Errorf("%w: multilimit: at most %d rules, got %d", strategy.ErrInvalidLimit, Max, n)
	}
	seen, descs := make(map[string]int, n), make([]string, n)
	for i := range n {
		alg, lim, desc := rule(i)
		scope, fe := fmt.Sprintf("multilimit: rules[%d]: ", i), (*fielderr.Error)(nil)
		if err := lim.Validate(); errors.As(err, &fe) { // the rule named, the field kept
			return s, fielderr.New(fe.Sentinel, scope+fe.Scope, fe.Field, fe.Text)
		} else if err != nil {
			return s, err
		}
		descs[i] = desc
		x, kind := Rule{Log: alg == strategy.SlidingLog, Tag: "sl", Limit: lim.Limit, Window: lim.Window.Milliseconds()}, 1
		if alg == strategy.FixedWindow {
			x.Tag, kind = "fw", 2
		} else if !x.Log {
			return s, fielderr.New(strategy.ErrInvalidOption, scope, "Algorithm", func(name func(string) string) string {
				return fmt.Sprintf("%s must be %q or %q, got %q", name("Algorithm"), strategy.SlidingLog, strategy.FixedWindow, alg)
			})
		}
		x.Tag = tag + ":" + x.Tag + ":" + strconv.FormatInt(x.Window, 10)
		if j, dup := seen[x.Tag]; dup {
			return s, fmt.Errorf("%w: multilimit: rules[%d] (%s) has the algorithm and window of rules[%d] (%s): keep the smaller limit only",
				strategy.ErrInvalidLimit, i, desc, j, descs[j])
		}
		if i == 0 || x.Limit < s.Lim.Limit || x.Limit == s.Lim.Limit && lim.Window > s.Lim.Window {
			s.Lim = strategy.Limit{Limit: x.Limit, Window: lim.Window} // on a tie, the longest Window
		}
		seen[x.Tag], s.Rules, s.Args, s.Longest = i, append(s.Rules, x), append(s.Args, kind, x.Limit, x.Window), max(s.Longest, lim.Window)
	}
	return s, nil
}

// Keys returns the keys of subject's state, one per rule in rule order.
func (s *Set) Keys(prefix, subject string, shard int) []string {
	keys := make([]string, len(s.Rules))
	for i, r := range s.Rules {
		keys[i] = strategy.KeyFor(prefix, r.Tag, subject, shard)
	}
	return keys
}

// Decode reads the script's reply: allowed, then each rule's Result.
func (s *Set) Decode(reply any) (bool, []strategy.Result, error) {
	v := make([]int64, 1+3*len(s.Rules))
	if err := engine.DecodeInts(reply, v); err != nil {
		return false, nil, err
	}
	each := make([]strategy.Result, len(s.Rules))
	for i, r := range s.Rules {
		each[i] = engine.ResultOf(v[2+3*i] == 0, r.Limit, v[1+3*i], v[2+3*i], v[3+3*i])
	}
	return v[0] == 1, each, nil
}

// State is a subject's state under every rule of a set; the zero State is
// a subject never seen.
type State []ruleState

// ruleState is a subject's state under one rule: a sliding log, or a fixed
// window's count.
type ruleState struct {
	log unitlog.Log
	win exact.Counter
}

// Entries returns how many entries st holds under rule i, a sliding log.
func (st State) Entries(i int) int { return st[i].log.Len() }

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

// Decide decides on st as the scripts do: every rule peeks (after its
// refund of n units, when refund), then, for n units, records them if every
// rule allows them, or reports its own denial. It returns whether the
// request is allowed, each rule's Result and until when st matters.
func (s *Set) Decide(st *State, now, n int64, refund bool) (allowed bool, each []strategy.Result, expires int64) {
	if *st == nil {
		*st = make(State, len(s.Rules))
	}
	allowed, each = true, make([]strategy.Result, len(s.Rules))
	for i, r := range s.Rules {
		if w := (*st)[i].of(r.Log); refund {
			each[i] = w.Give(r.Limit, r.Window, now, n)
		} else {
			each[i] = w.Decide(r.Limit, r.Window, now, 0)
		}
		allowed = allowed && each[i].Allowed && (refund || each[i].Remaining >= n)
	}
	for i, r := range s.Rules {
		w := (*st)[i].of(r.Log)
		if !refund && n > 0 && (allowed || !each[i].Allowed || each[i].Remaining < n) {
			each[i] = w.Decide(r.Limit, r.Window, now, n) // records n when allowed; else the rule's own denial
		}
		expires = max(expires, w.Expires(r.Window))
	}
	return allowed, each, expires
}

// Combine returns the Result of a decision from each rule's (not empty),
// as multilimit's doc says: Allowed as given, the smallest Remaining with
// its rule's Limit, the largest RetryAfter of the rules that deny (Never
// wins), the largest ResetAfter.
func Combine(allowed bool, each []strategy.Result) strategy.Result {
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
