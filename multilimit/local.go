package multilimit

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/ratekit/ratelimit/internal/localstore"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only. It is safe for concurrent use. A subject
// costs 8 bytes per live sliding log entry and 16 bytes per fixed window
// rule, plus a small header, and is dropped once no rule's state matters.
type Local struct {
	rules []rule
	clock strategy.Clock
	store *localstore.Store[state]
}

var _ strategy.Strategy = (*Local)(nil)

// state is one subject's state under every rule, in rule order.
type state struct {
	rules []ruleState
}

type ruleState struct {
	log   []int64 // sliding log: entry times in ms, ascending
	start int64   // fixed window: start of the window count belongs to
	count int64   // fixed window: units recorded in that window
}

// NewLocal returns the in-process twin of New. Of the options, only
// WithClock matters; the default clock is time.Now.
func NewLocal(rules []Rule, opts ...strategy.Option) (*Local, error) {
	rs, o, err := setup(rules, opts)
	if err != nil {
		return nil, err
	}
	c := o.Clock
	if c == nil {
		c = strategy.ClockFunc(time.Now)
	}
	var w int64
	for _, r := range rs {
		w = max(w, r.windowMs)
	}
	return &Local{rules: rs, clock: c, store: localstore.New[state](w)}, nil
}

// Rules returns the rules the twin enforces, in the order given to NewLocal.
func (l *Local) Rules() []Rule { return publicRules(l.rules) }

// AllowN records n units for key under every rule if every rule allows them,
// and under none otherwise. The Result is the most restrictive of the rules:
// see Combine.
func (l *Local) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	r, _, err := l.AllowNEach(ctx, key, n)
	return r, err
}

// check is one rule's verdict before anything is recorded.
type check struct {
	first int64 // sliding log: index of the oldest live entry
	count int64
	retry int64
	reset int64
}

// AllowNEach is AllowN that also returns each rule's Result, in rule order;
// see Limiter.AllowNEach.
func (l *Local) AllowNEach(ctx context.Context, key string, n int64) (strategy.Result, []strategy.Result, error) {
	if err := strategy.ValidateKey(key); err != nil {
		return strategy.Result{}, nil, err
	}
	if err := strategy.ValidateCost(n); err != nil {
		return strategy.Result{}, nil, err
	}
	if err := ctx.Err(); err != nil {
		return strategy.Result{}, nil, fmt.Errorf("%w: %w", strategy.ErrBackend, err)
	}
	now := l.clock.Now().UnixMilli()
	want := max(n, 1)
	each := make([]strategy.Result, len(l.rules))
	allowed := true
	l.store.Do(localstore.Key{Subject: key, Shard: strategy.NoShard}, now, func(s *state) int64 {
		if s.rules == nil {
			s.rules = make([]ruleState, len(l.rules))
		}
		checks := make([]check, len(l.rules))
		for i, r := range l.rules {
			c, rs := &checks[i], &s.rules[i]
			if r.kind == kindSlidingLog {
				floor := now - r.windowMs
				c.first = int64(sort.Search(len(rs.log), func(j int) bool { return rs.log[j] > floor }))
				c.count = int64(len(rs.log)) - c.first
				if c.count > 0 {
					c.reset = rs.log[len(rs.log)-1] + r.windowMs - now
				}
				switch {
				case want > r.limit:
					c.retry = -1
				case c.count+want <= r.limit:
				default:
					k := c.count + want - r.limit
					c.retry = rs.log[c.first+k-1] + r.windowMs - now
				}
			} else {
				start := windowStart(now, r.windowMs)
				if rs.start == start {
					c.count = rs.count
				}
				if c.count > 0 {
					c.reset = start + r.windowMs - now
				}
				switch {
				case want > r.limit:
					c.retry = -1
				case c.count+want <= r.limit:
				default:
					c.retry = start + r.windowMs - now
				}
			}
			if c.retry != 0 {
				allowed = false
			}
		}
		var expires int64
		for i, r := range l.rules {
			c, rs := checks[i], &s.rules[i]
			remaining, retry, reset := max(r.limit-c.count, 0), c.retry, c.reset
			if allowed && n > 0 {
				remaining = r.limit - c.count - n
				if r.kind == kindSlidingLog {
					rs.log = insert(rs.log[c.first:], now, n)
					reset = max(reset, r.windowMs)
				} else {
					start := windowStart(now, r.windowMs)
					rs.start, rs.count = start, c.count+n
					reset = start + r.windowMs - now
				}
			}
			each[i] = redisx.ResultOf(retry == 0, r.limit, remaining, retry, reset)
			if r.kind == kindSlidingLog && len(rs.log) > 0 {
				expires = max(expires, rs.log[len(rs.log)-1]+r.windowMs)
			} else if r.kind == kindFixedWindow && rs.count > 0 {
				expires = max(expires, rs.start+r.windowMs)
			}
		}
		return expires
	})
	return Combine(allowed, each), each, nil
}

// insert records n entries at now in log, keeping it ascending even when the
// clock went backwards.
func insert(log []int64, now, n int64) []int64 {
	at := sort.Search(len(log), func(j int) bool { return log[j] > now })
	if len(log) == 0 {
		log = nil // let a drained log's old array go
	}
	return slices.Insert(log, at, slices.Repeat([]int64{now}, int(n))...)
}

// Peek reports key's state now under every rule without recording anything.
func (l *Local) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset forgets key under every rule.
func (l *Local) Reset(ctx context.Context, key string) error {
	if err := strategy.ValidateKey(key); err != nil {
		return err
	}
	l.store.Delete(localstore.Key{Subject: key, Shard: strategy.NoShard})
	return nil
}

// Subjects returns how many subjects the twin holds state for.
func (l *Local) Subjects() int { return l.store.Len() }
