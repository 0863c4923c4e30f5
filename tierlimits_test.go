package ratelimit_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

// invalidTiers are tiers within Limit.Validate's bounds that their
// algorithm refuses by its own rules.
var invalidTiers = []struct {
	name      string
	algorithm strategy.Algorithm
	tier      ratelimit.Limit
	field     string // the JSON field at fault
}{
	{"compact log above MaxLimit", ratelimit.CompactLog, ratelimit.Limit{Limit: compactlog.MaxLimit + 1}, "tiers.pro.limit"},
	{"token bucket beyond exact carries", ratelimit.TokenBucket, ratelimit.Limit{Limit: 200_000_000_000}, "tiers.pro.limit"},
	{"token bucket burst beyond exact carries", ratelimit.TokenBucket, ratelimit.Limit{Limit: 10, Burst: 200_000_000_000}, "tiers.pro.burst"},
	{"gcra beyond exact carries", ratelimit.GCRA, ratelimit.Limit{Limit: 200_000_000_000}, "tiers.pro.limit"},
	{"sliding counter beyond MaxProduct", ratelimit.SlidingCounter, ratelimit.Limit{Limit: 100_000_000_000}, "tiers.pro.limit"},
}

func tierConfig(a strategy.Algorithm, tier ratelimit.Limit) ratelimit.Config {
	return ratelimit.Config{Algorithm: a, Limit: 100, Window: time.Minute,
		Tiers: map[string]ratelimit.Limit{"pro": tier}}
}

// TestTierValidation: a tier the algorithm cannot decide under fails every
// constructor, naming the tier and its field, instead of failing each call.
func TestTierValidation(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	for _, c := range invalidTiers {
		t.Run(c.name, func(t *testing.T) {
			cfg := tierConfig(c.algorithm, c.tier)
			goField := "Limit"
			if c.tier.Burst != 0 {
				goField = "Burst"
			}
			check := func(what string, err error, words ...string) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s: err = nil, want one wrapping ErrInvalidLimit", what)
				}
				if !errors.Is(err, strategy.ErrInvalidLimit) {
					t.Errorf("%s: err = %v, want one wrapping ErrInvalidLimit", what, err)
				}
				for _, w := range words {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: err = %q, want it to say %s", what, err, w)
					}
				}
			}
			_, err := ratelimit.New(rdb, cfg)
			check("New", err, `tier "pro"`, goField)
			_, err = ratelimit.New(nil, cfg)
			check("NewLocal", err, `tier "pro"`, goField)
			_, err = ratelimit.NewSet(rdb, ratelimit.Policies{"api": cfg})
			check("NewSet", err, `policy "api"`, fmt.Sprintf("field %q", c.field))
			err = validate(ratelimit.Policies{"api": cfg})
			check("Validate", err, `policy "api"`, fmt.Sprintf("field %q", c.field))
			var pe *ratelimit.FieldError
			if !errors.As(err, &pe) || pe.JSON != c.field || pe.Policy != "api" {
				t.Errorf("Validate: err = %#v, want a *FieldError of policy api with JSON %q", err, c.field)
			}

			doc := fmt.Sprintf(`{"api": {"algorithm": %q, "limit": 100, "window": "1m", "tiers": {"pro": {"limit": %d, "burst": %d}}}}`,
				c.algorithm, c.tier.Limit, c.tier.Burst)
			_, err = parsePolicies([]byte(doc))
			check("ParsePolicies", err, `policy "api"`, fmt.Sprintf("field %q", c.field))
			if err != nil && (strings.Contains(err.Error(), "Tiers") || strings.Contains(err.Error(), goField+" must")) {
				t.Errorf("ParsePolicies: err = %q names Go fields, want JSON ones", err)
			}

			set, err := ratelimit.NewSet(nil, ratelimit.Policies{"api": tierConfig(c.algorithm, ratelimit.Limit{Limit: 10})})
			if err != nil {
				t.Fatal(err)
			}
			err = set.Update(ratelimit.Policies{"api": cfg})
			check("Set.Update", err, fmt.Sprintf("field %q", c.field))
			if got := ratelimit.SetPolicies(set)["api"].Tiers["pro"]; got.Limit != 10 {
				t.Errorf("after a failed Update, tier pro = %+v, want the old Limit 10", got)
			}
			err = updateJSON(set, []byte(doc))
			check("Set.UpdateJSON", err, fmt.Sprintf("field %q", c.field))
		})
	}
}

// mustTier returns l's tier name, failing the test when it has none.
func mustTier(t testing.TB, l *ratelimit.Limiter, name string) strategy.Strategy {
	t.Helper()
	st, err := l.Tier(name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
