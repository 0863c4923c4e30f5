package multilimit

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekit/ratelimit/internal/localstore"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/internal/unitlog"
	"github.com/ratekit/ratelimit/strategy"
)

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only. It is safe for concurrent use. A subject
// costs 64 bytes per rule, plus 16 bytes per allowed request in a sliding
// log rule's window (whatever its cost), plus a small header, and is
// dropped once no rule's state matters. A decision never
// allocates in proportion to its cost n, and takes O(log entries) time per
// rule (amortized), whichever way the clock moved.
type Local struct {
	rules []rule
	clock strategy.Clock
	store *localstore.Store[state]
}

var (
	_ strategy.Strategy        = (*Local)(nil)
	_ strategy.ContextHonourer = (*Local)(nil)
)

// state is one subject's state under every rule, in rule order.
type state struct {
	rules []ruleState
}

type ruleState struct {
	log   unitlog.Log // sliding log (see package unitlog)
	start int64       // fixed window: start of the window count belongs to
	count int64       // fixed window: units recorded in that window
}

// NewLocal returns the in-process twin of New. Of the options, WithClock
// (the default clock is time.Now), WithMaxSubjects and WithOnEvict matter:
// the twin holds at most that many subjects, evicting the least recently
// used, and frees idle ones within about the longest window.
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
	store := localstore.NewStore[state](localstore.Config{
		MaxSubjects: o.MaxSubjects,
		Sweep:       max(time.Duration(w)*time.Millisecond, localstore.MinSweep),
		Now:         func() int64 { return c.Now().UnixMilli() },
		OnEvict:     o.OnEvict,
	})
	return &Local{rules: rs, clock: c, store: store}, nil
}

// Rules returns the rules the twin enforces, in the order given to NewLocal.
func (l *Local) Rules() []Rule { return publicRules(l.rules) }

// Limit returns the Limit of the most restrictive rule (see Limiter.Limit).
func (l *Local) Limit() strategy.Limit { return limitOf(l.rules) }

// HonoursContext returns true: the twin never waits on a network.
func (*Local) HonoursContext() bool { return true }

// AllowN records n units for key under every rule if every rule allows them,
// and under none otherwise. The Result is the most restrictive of the rules:
// see the package doc.
func (l *Local) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	r, _, err := l.AllowNEach(ctx, key, n)
	return r, err
}

// check is one rule's verdict before anything is recorded.
type check struct {
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
				c.count = rs.log.Count(floor)
				if c.count > 0 {
					t, _ := rs.log.Newest()
					c.reset = t + r.windowMs - now
				}
				switch {
				case want > r.limit:
					c.retry = -1
				case c.count+want <= r.limit:
				default: // the (count + want - limit)-th oldest live unit must leave
					c.retry = rs.log.Leaves(floor, c.count+want-r.limit) + r.windowMs - now
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
					rs.log.Evict(now - r.windowMs)
					reset = rs.log.Record(now, n) + r.windowMs - now
				} else {
					start := windowStart(now, r.windowMs)
					rs.start, rs.count = start, c.count+n
					reset = start + r.windowMs - now
				}
			}
			each[i] = redisx.ResultOf(retry == 0, r.limit, remaining, retry, reset)
			if t, ok := rs.log.Newest(); r.kind == kindSlidingLog && ok {
				expires = max(expires, t+r.windowMs)
			} else if r.kind == kindFixedWindow && rs.count > 0 {
				expires = max(expires, rs.start+r.windowMs)
			}
		}
		return expires
	})
	return combine(allowed, each), each, nil
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
