package rules

import (
	"context"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/strategy"
)

// Strategy is what multilimit's Limiter and its twin share: the rules, and
// Run, which decides a request under every rule (one script call, or the
// twin's Decide).
type Strategy struct {
	Set
	Run func(ctx context.Context, q engine.Req) (allowed bool, each []strategy.Result, err error)
}

// Limit returns the Limit of the most restrictive rule: the smallest
// Limit.Limit (on a tie, the longest Window), with Burst 0.
func (m *Strategy) Limit() strategy.Limit { return m.Lim }

// AllowN records n units for key under every rule if every rule allows
// them, and under none otherwise; n = 0 is Peek. The Result is the most
// restrictive of the rules' (Combine).
func (m *Strategy) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	r, _, err := m.AllowNEach(ctx, key, n)
	return r, err
}

// AllowNEach is AllowN that also returns each rule's Result, in rule order.
func (m *Strategy) AllowNEach(ctx context.Context, key string, n int64) (strategy.Result, []strategy.Result, error) {
	return m.do(ctx, engine.Req{Op: engine.OpAllow, Key: key, N: n})
}

// Peek reports key's state now under every rule, combined as by AllowN.
func (m *Strategy) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return m.AllowN(ctx, key, 0)
}

// RefundN gives back up to n units under every rule, each by its own rule,
// and returns key's state after, as Peek reports it.
func (m *Strategy) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	r, _, err := m.RefundNEach(ctx, key, n)
	return r, err
}

// RefundNEach is RefundN that also returns each rule's Result, in rule order.
func (m *Strategy) RefundNEach(ctx context.Context, key string, n int64) (strategy.Result, []strategy.Result, error) {
	return m.do(ctx, engine.Req{Op: engine.OpRefund, Key: key, N: n})
}

// Reset forgets key under every rule.
func (m *Strategy) Reset(ctx context.Context, key string) error {
	_, _, err := m.do(ctx, engine.Req{Op: engine.OpReset, Key: key})
	return err
}

// do runs q and combines the rules' Results.
func (m *Strategy) do(ctx context.Context, q engine.Req) (strategy.Result, []strategy.Result, error) {
	allowed, each, err := m.Run(ctx, q)
	if err != nil || q.Op == engine.OpReset {
		return strategy.Result{}, nil, err
	}
	return Combine(allowed, each), each, nil
}

// OnRedis returns the Run of a Strategy on e: each request one script call,
// whose reply is every rule's.
func (s *Set) OnRedis(e engine.Planner) func(context.Context, engine.Req) (bool, []strategy.Result, error) {
	return func(ctx context.Context, q engine.Req) (bool, []strategy.Result, error) {
		c, err := e.Plan(q)
		if err != nil {
			return false, nil, err
		}
		c.Decode = false // the rules' reply
		if c = engine.Run(ctx, e.Client(), c); c.Err != nil || q.Op == engine.OpReset {
			return false, nil, c.Err
		}
		return s.Decode(c.Reply)
	}
}

// OnLocal returns the Run of a Strategy on the twin e: Decide.
func OnLocal(e *engine.Local[Set, State]) func(context.Context, engine.Req) (bool, []strategy.Result, error) {
	return func(ctx context.Context, q engine.Req) (allowed bool, each []strategy.Result, err error) {
		err = e.Update(ctx, q, func(st *State, p *Set, now int64) (expires int64) {
			allowed, each, expires = p.Decide(st, now, q.N, q.Op == engine.OpRefund)
			return expires
		})
		return allowed, each, err
	}
}
