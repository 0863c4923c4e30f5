package ratelimit_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/multilimit"
	"github.com/ratekit/ratelimit/strategy"
)

// TestFieldErrorNamesTheField: an invalid Config is a *FieldError naming
// the field by its Go and JSON paths, wrapping the sentinel, its message
// naming Go fields.
func TestFieldErrorNamesTheField(t *testing.T) {
	ok := ratelimit.Config{Algorithm: ratelimit.TokenBucket, Limit: 5, Window: time.Minute}
	with := func(f func(*ratelimit.Config)) ratelimit.Config { c := ok; f(&c); return c }
	for _, c := range []struct {
		name        string
		cfg         ratelimit.Config
		field, json string
		says        string
		is          error
	}{
		{"unknown algorithm", with(func(c *ratelimit.Config) { c.Algorithm = "leaky" }), "Algorithm", "algorithm", "Algorithm must be one of", strategy.ErrInvalidOption},
		{"negative limit", with(func(c *ratelimit.Config) { c.Limit = -1 }), "Limit", "limit", "Limit must be >= 0", strategy.ErrInvalidLimit},
		{"zero window", with(func(c *ratelimit.Config) { c.Window = 0 }), "Window", "window", "Window must be > 0", strategy.ErrInvalidLimit},
		{"negative burst", with(func(c *ratelimit.Config) { c.Burst = -1 }), "Burst", "burst", "Burst must be >= 0", strategy.ErrInvalidLimit},
		{"negative shards", with(func(c *ratelimit.Config) { c.Shards = -1 }), "Shards", "shards", "Shards must be >= 0", strategy.ErrInvalidOption},
		{"braces in prefix", with(func(c *ratelimit.Config) { c.Prefix = "{x}" }), "Prefix", "prefix", "prefix must not contain", strategy.ErrInvalidOption},
		{"bad mode", with(func(c *ratelimit.Config) { c.Mode = "loud" }), "Mode", "mode", "Mode must be", strategy.ErrInvalidOption},
		{"bad on failure", with(func(c *ratelimit.Config) { c.OnFailure = "maybe" }), "OnFailure", "on_failure", "OnFailure must be", strategy.ErrInvalidOption},
		{"bad local share", with(func(c *ratelimit.Config) { c.LocalShare = 2 }), "LocalShare", "local_share", "LocalShare must be in [0, 1]", strategy.ErrInvalidOption},
		{"negative timeout", with(func(c *ratelimit.Config) { c.Timeout = -1 }), "Timeout", "timeout", "Timeout must be >= 0", strategy.ErrInvalidOption},
		{"tier limit", with(func(c *ratelimit.Config) { c.Tiers = map[string]ratelimit.Limit{"pro": {Limit: -1}} }), "Tiers.pro.Limit", "tiers.pro.limit", `Tiers: tier "pro": Limit must be >= 0`, strategy.ErrInvalidLimit},
		{"tier window", with(func(c *ratelimit.Config) {
			c.Tiers = map[string]ratelimit.Limit{"pro": {Limit: 5, Window: time.Second}}
		}), "Tiers.pro.Window", "tiers.pro.window", "Window must be 0 or the policy's", strategy.ErrInvalidLimit},
		{"candidate window", with(func(c *ratelimit.Config) {
			c.Candidate = &ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 5}
		}), "Candidate.Window", "candidate.window", "Window must be > 0", strategy.ErrInvalidLimit},
		{"candidate mode", with(func(c *ratelimit.Config) {
			c.Candidate = &ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Minute, Mode: "shadow"}
		}), "Candidate.Mode", "candidate.mode", "Candidate: Mode must be empty", strategy.ErrInvalidOption},
		{"multi with a limit", ratelimit.Config{Algorithm: ratelimit.Multi, Limit: 5,
			Rules: []multilimit.Rule{{Algorithm: ratelimit.SlidingLog, Limit: ratelimit.Limit{Limit: 1, Window: time.Second}}}}, "Limit", "limit", "must be 0", strategy.ErrInvalidOption},
		{"rule window", ratelimit.Config{Algorithm: ratelimit.Multi,
			Rules: []multilimit.Rule{{Algorithm: ratelimit.SlidingLog, Limit: ratelimit.Limit{Limit: 1}}}}, "Rules", "rules", "rules[0]: Window must be > 0", strategy.ErrInvalidLimit},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ratelimit.New(nil, c.cfg)
			var fe *ratelimit.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || fe.JSON != c.json {
				t.Fatalf("NewLocal: err = %v (%#v); want a *FieldError of %s (%s)", err, fe, c.field, c.json)
			}
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("NewLocal: err = %q; want it to wrap %v and say %q", err, c.is, c.says)
			}
			err = validate(ratelimit.Policies{"p": c.cfg})
			var pe *ratelimit.FieldError
			if !errors.As(err, &pe) || pe.JSON != c.json || pe.Policy != "p" || !errors.As(err, &fe) || fe.Field != c.field {
				t.Errorf("Validate: err = %v; want a *FieldError of field %q holding a *FieldError of %s", err, c.json, c.field)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("Validate: err = %q; want it to say %q (Go names)", err, c.says)
			}
		})
	}
}

// TestPoliciesRoundTrip: Policies encode to JSON that parses back to the
// same Policies, every field set.
func TestPoliciesRoundTrip(t *testing.T) {
	p := ratelimit.Policies{
		"login": {Algorithm: ratelimit.TokenBucket, Limit: 5, Window: time.Minute, Burst: 10, Prefix: "x:",
			Mode: "shadow", Tiers: map[string]ratelimit.Limit{"pro": {Limit: 50, Burst: 100}},
			OnFailure: ratelimit.FailLocal, LocalShare: 0.5, Timeout: 250 * time.Millisecond,
			Candidate: &ratelimit.Config{Algorithm: ratelimit.GCRA, Limit: 6, Window: time.Minute, Burst: 12}},
		"search": {Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Second, Shards: 4},
		"multi": {Algorithm: ratelimit.Multi, Rules: []multilimit.Rule{
			{Algorithm: ratelimit.SlidingLog, Limit: ratelimit.Limit{Limit: 10, Window: time.Second}},
			{Algorithm: ratelimit.FixedWindow, Limit: ratelimit.Limit{Limit: 1000, Window: time.Hour}},
		}},
	}
	b, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := parsePolicies(b)
	if err != nil {
		t.Fatalf("UnmarshalJSON(%s): %v", b, err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Errorf("round trip through %s = %+v; want %+v", b, got, p)
	}
	again, err := got.MarshalJSON()
	if err != nil || string(again) != string(b) {
		t.Errorf("encoded again = %s, %v; want %s", again, err, b)
	}
}
