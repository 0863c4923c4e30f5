package ratelimit_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/strategy"
)

// TestParsePoliciesCandidateFields: an error inside a candidate names the
// candidate's field by its JSON path, and JSON errors say JSON names.
func TestParsePoliciesCandidateFields(t *testing.T) {
	policy := `"algorithm": "sliding_log", "limit": 5, "window": "1m"`
	for _, c := range []struct {
		name      string
		candidate string
		field     string
		says      string // a substring of the message
		is        error
	}{
		{"unknown algorithm", `{"algorithm": "bogus", "limit": 5, "window": "1m"}`, "candidate.algorithm", "algorithm must be one of", strategy.ErrInvalidOption},
		{"negative limit", `{"algorithm": "fixed_window", "limit": -1, "window": "1m"}`, "candidate.limit", "limit must be >= 0", strategy.ErrInvalidLimit},
		{"zero window", `{"algorithm": "fixed_window", "limit": 5, "window": "0s"}`, "candidate.window", "window must be > 0", strategy.ErrInvalidLimit},
		{"negative burst", `{"algorithm": "token_bucket", "limit": 5, "window": "1m", "burst": -1}`, "candidate.burst", "burst must be >= 0", strategy.ErrInvalidLimit},
		{"braces in prefix", `{"algorithm": "fixed_window", "limit": 5, "window": "1m", "prefix": "{x}"}`, "candidate.prefix", "prefix", strategy.ErrInvalidOption},
		{"the policy's keys", `{"algorithm": "sliding_log", "limit": 6, "window": "1m"}`, "candidate.prefix", "prefix must differ", strategy.ErrInvalidOption},
		{"a mode", `{"algorithm": "fixed_window", "limit": 5, "window": "1m", "mode": "shadow"}`, "candidate.mode", "mode must be empty", strategy.ErrInvalidOption},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := fmt.Sprintf(`{"login": {%s, "candidate": %s}}`, policy, c.candidate)
			p, err := parsePolicies([]byte(doc))
			if err == nil {
				t.Fatalf("UnmarshalJSON(%s) = %+v; want an error", doc, p)
			}
			var pe *ratelimit.FieldError
			if !errors.As(err, &pe) || pe.Policy != "login" || pe.JSON != c.field {
				t.Errorf("err = %q; want a *FieldError of policy login, field %q", err, c.field)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("field %q", c.field)) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("err = %q; want it to say field %q and %q", err, c.field, c.says)
			}
			if !errors.Is(err, c.is) {
				t.Errorf("err = %q; want it to wrap %v", err, c.is)
			}
			for _, goName := range []string{"Candidate", "Algorithm must", "Limit must", "Window must", "Burst must", "Prefix must", "Mode must"} {
				if strings.Contains(err.Error(), goName) {
					t.Errorf("err = %q names the Go field %s, want the JSON one", err, goName)
				}
			}
		})
	}
}

// TestUnknownAlgorithmNamesAlgorithm: a policy with an unknown algorithm is
// rejected for its algorithm, listing the valid names, even when the fields
// an algorithm needs are missing; a reload keeps the old policies.
func TestUnknownAlgorithmNamesAlgorithm(t *testing.T) {
	set, err := ratelimit.NewSet(nil, ratelimit.Policies{"login": {Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, doc string }{
		{"alone", `{"login": {"algorithm": "bogus"}}`},
		{"with a limit", `{"login": {"algorithm": "bogus", "limit": 5}}`},
		{"complete", `{"login": {"algorithm": "bogus", "limit": 5, "window": "1m"}}`},
		{"in a candidate", `{"login": {"algorithm": "sliding_log", "limit": 5, "window": "1m", "candidate": {"algorithm": "bogus"}}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			field := "algorithm"
			if strings.Contains(c.doc, "candidate") {
				field = "candidate.algorithm"
			}
			for what, err := range map[string]error{
				"ParsePolicies": func() error { _, err := parsePolicies([]byte(c.doc)); return err }(),
				"UpdateJSON":    updateJSON(set, []byte(c.doc)),
			} {
				var pe *ratelimit.FieldError
				if !errors.As(err, &pe) || pe.JSON != field || !errors.Is(err, strategy.ErrInvalidOption) {
					t.Errorf("%s: err = %v; want a *FieldError of field %q wrapping ErrInvalidOption", what, err, field)
					continue
				}
				for _, a := range append(strategy.Algorithms(), ratelimit.Multi) {
					if !strings.Contains(err.Error(), fmt.Sprintf("%q", a)) {
						t.Errorf("%s: err = %q; want it to list %q", what, err, a)
					}
				}
			}
			if got := mustGet(t, set, "login").Config(); got.Algorithm != ratelimit.SlidingLog || got.Limit != 5 {
				t.Errorf("after a failed UpdateJSON, login = %+v; want the old policy", got)
			}
		})
	}
}
