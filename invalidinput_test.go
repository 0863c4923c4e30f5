package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

// overrideOnly is a strategy whose check ahead accepts every per-call
// limit, as one of another module may: its refusals then come at each
// call.
type overrideOnly struct {
	strategy.Strategy
	strategy.LimitOverrider
}

// ValidateLimit accepts every limit: the calls refuse it.
func (overrideOnly) ValidateLimit(strategy.Limit) error { return nil }

// failing returns err from every call for the key "bad", and decides the
// other keys with st.
type failing struct {
	strategy.Strategy
	err error
}

func (f failing) AllowN(ctx context.Context, key string, n int64) (ratelimit.Result, error) {
	if key == "bad" {
		return ratelimit.Result{}, f.err
	}
	return f.Strategy.AllowN(ctx, key, n)
}

// TestInvalidInputNeverDegrades: an invalid-argument error at call time is
// the caller's, whatever the strategy: it comes back as the error, never as
// a degraded Result of the failure policy, and never opens the breaker, so
// other subjects are still decided by Redis.
func TestInvalidInputNeverDegrades(t *testing.T) {
	ctx := context.Background()
	_, rdb := conformance.Miniredis(t)
	cl, err := compactlog.New(rdb, strategy.Limit{Limit: 2, Window: time.Minute}, strategy.WithPrefix("nd:"))
	if err != nil {
		t.Fatal(err)
	}
	tierCase := func(policy ratelimit.FailurePolicy) (*ratelimit.Limiter, func() (ratelimit.Result, error), error) {
		l, err := ratelimit.Wrap(overrideOnly{cl, cl}, ratelimit.Config{OnFailure: policy,
			Tiers: map[string]ratelimit.Limit{"pro": {Limit: compactlog.MaxLimit * 2}}})
		if err != nil {
			return nil, nil, err
		}
		return l, func() (ratelimit.Result, error) { return mustTier(t, l, "pro").AllowN(ctx, "bad", 1) }, nil
	}
	type build func(ratelimit.FailurePolicy) (*ratelimit.Limiter, func() (ratelimit.Result, error), error)
	type testCase struct {
		name string
		want error // what the invalid call's error wraps
		mk   build // the Limiter, and its invalid call
	}
	cases := []testCase{{"tier above compactlog.MaxLimit", strategy.ErrInvalidLimit, tierCase}}
	for _, sentinel := range []error{strategy.ErrInvalidLimit, strategy.ErrInvalidOption, strategy.ErrInvalidKey, strategy.ErrInvalidCost} {
		cases = append(cases, testCase{"a strategy returning " + sentinel.Error(), sentinel, func(policy ratelimit.FailurePolicy) (*ratelimit.Limiter, func() (ratelimit.Result, error), error) {
			l, err := ratelimit.Wrap(failing{cl, fmt.Errorf("%w: test", sentinel)}, ratelimit.Config{OnFailure: policy})
			if err != nil {
				return nil, nil, err
			}
			return l, func() (ratelimit.Result, error) { return l.Allow(ctx, "bad") }, nil
		}})
	}
	for _, c := range cases {
		for _, policy := range []ratelimit.FailurePolicy{ratelimit.FailOpen, ratelimit.FailClosed} {
			t.Run(c.name+"/"+string(policy), func(t *testing.T) {
				l, bad, err := c.mk(policy)
				if err != nil {
					t.Fatal(err)
				}
				for i := range 10 { // twice what opens the default breaker
					r, err := bad()
					if !errors.Is(err, c.want) || r.Degraded || r.Allowed {
						t.Fatalf("call %d = %+v, %v; want no Result and an error wrapping %v", i, r, err, c.want)
					}
				}
				key := "fresh:" + t.Name()
				r, err := l.Allow(ctx, key)
				if err != nil || !r.Allowed || r.Degraded || r.Remaining != 1 {
					t.Fatalf("Allow of a fresh subject after the invalid calls = %+v, %v; want allowed by Redis, Remaining 1, not Degraded", r, err)
				}
			})
		}
	}
}
