package ratelimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

func TestParsePoliciesEveryAlgorithm(t *testing.T) {
	for _, a := range strategy.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			data := fmt.Sprintf(`{
				"login":  {"algorithm": %q, "limit": 5, "window": "1m"},
				"search": {"algorithm": %q, "limit": 100, "window": "1s", "burst": 200, "shards": 4},
				"upload": {"algorithm": %q, "limit": 1000, "window": "1h30m", "prefix": "svc:",
				           "on_failure": "local", "local_share": 0.25, "timeout": "250ms"}
			}`, a, a, a)
			got, err := parsePolicies([]byte(data))
			if err != nil {
				t.Fatal(err)
			}
			want := ratelimit.Policies{
				"login":  {Algorithm: a, Limit: 5, Window: time.Minute},
				"search": {Algorithm: a, Limit: 100, Window: time.Second, Burst: 200, Shards: 4},
				"upload": {Algorithm: a, Limit: 1000, Window: 90 * time.Minute, Prefix: "svc:",
					OnFailure: ratelimit.FailLocal, LocalShare: 0.25, Timeout: 250 * time.Millisecond},
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("UnmarshalJSON =\n%+v\nwant\n%+v", got, want)
			}
			// and back: MarshalJSON writes what UnmarshalJSON reads
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			again, err := parsePolicies(b)
			if err != nil || !reflect.DeepEqual(again, want) {
				t.Fatalf("round trip through %s = %+v, %v; want %+v", b, again, err, want)
			}
		})
	}
}

func TestParsePoliciesErrorsNameThePolicyAndField(t *testing.T) {
	a := strategy.Algorithms()[0]
	ok := fmt.Sprintf(`"algorithm": %q, "limit": 5, "window": "1m"`, a)
	for _, c := range []struct {
		name string
		json string
		want []string // substrings of the message
		is   error
	}{
		{"unknown algorithm", `{"login": {"algorithm": "leaky", "limit": 5, "window": "1m"}}`,
			[]string{`policy "login"`, `field "algorithm"`, "algorithm must be one of", `"leaky"`}, strategy.ErrInvalidOption},
		{"unparsable duration", fmt.Sprintf(`{"login": {"algorithm": %q, "limit": 5, "window": "1x"}}`, a),
			[]string{`policy "login"`, `field "window"`, `"1x"`}, strategy.ErrInvalidOption},
		{"unknown failure policy", `{"login": {` + ok + `, "on_failure": "maybe"}}`,
			[]string{`policy "login"`, `field "on_failure"`, "on_failure must be", `"maybe"`}, strategy.ErrInvalidOption},
		{"local share out of range", `{"login": {` + ok + `, "on_failure": "local", "local_share": 2}}`,
			[]string{`policy "login"`, `field "local_share"`, "local_share must be in [0, 1]"}, strategy.ErrInvalidOption},
		{"local share as string", `{"login": {` + ok + `, "local_share": "half"}}`,
			[]string{`policy "login"`, `field "local_share"`, "want a number"}, strategy.ErrInvalidOption},
		{"negative timeout", `{"login": {` + ok + `, "timeout": "-1s"}}`,
			[]string{`policy "login"`, `field "timeout"`, "timeout must be >= 0"}, strategy.ErrInvalidOption},
		{"unparsable timeout", `{"login": {` + ok + `, "timeout": "soon"}}`,
			[]string{`policy "login"`, `field "timeout"`, `"soon"`}, strategy.ErrInvalidOption},
		{"duration as number", fmt.Sprintf(`{"login": {"algorithm": %q, "limit": 5, "window": 60}}`, a),
			[]string{`policy "login"`, `field "window"`, "got 60"}, strategy.ErrInvalidOption},
		{"zero window", fmt.Sprintf(`{"search": {"algorithm": %q, "limit": 5, "window": "0s"}}`, a),
			[]string{`policy "search"`, `field "window"`, "window must be > 0"}, strategy.ErrInvalidLimit},
		{"sub-millisecond window", fmt.Sprintf(`{"search": {"algorithm": %q, "limit": 5, "window": "1.5ms"}}`, a),
			[]string{`policy "search"`, `field "window"`, "window must be a whole number of milliseconds"}, strategy.ErrInvalidLimit},
		{"limit as string", fmt.Sprintf(`{"login": {"algorithm": %q, "limit": "5", "window": "1m"}}`, a),
			[]string{`policy "login"`, `field "limit"`, "want an integer"}, strategy.ErrInvalidOption},
		{"fractional limit", fmt.Sprintf(`{"login": {"algorithm": %q, "limit": 5.5, "window": "1m"}}`, a),
			[]string{`policy "login"`, `field "limit"`}, strategy.ErrInvalidOption},
		{"negative limit", fmt.Sprintf(`{"login": {"algorithm": %q, "limit": -1, "window": "1m"}}`, a),
			[]string{`policy "login"`, `field "limit"`, "limit must be >= 0"}, strategy.ErrInvalidLimit},
		{"negative burst", fmt.Sprintf(`{"upload": {"algorithm": %q, "limit": 5, "window": "1m", "burst": -2}}`, a),
			[]string{`policy "upload"`, `field "burst"`, "burst must be >= 0"}, strategy.ErrInvalidLimit},
		{"negative shards", fmt.Sprintf(`{"upload": {"algorithm": %q, "limit": 5, "window": "1m", "shards": -1}}`, a),
			[]string{`policy "upload"`, `field "shards"`, "shards must be >= 0"}, strategy.ErrInvalidOption},
		{"braces in prefix", fmt.Sprintf(`{"upload": {"algorithm": %q, "limit": 5, "window": "1m", "prefix": "{x}"}}`, a),
			[]string{`policy "upload"`, "prefix"}, strategy.ErrInvalidOption},
		{"unknown field", `{"login": {` + ok + `, "limt": 5}}`,
			[]string{`policy "login"`, `field "limt"`, "unknown field"}, strategy.ErrInvalidOption},
		{"field in the wrong case", `{"login": {"Algorithm": "x", "limit": 5, "window": "1m"}}`,
			[]string{`policy "login"`, `field "Algorithm"`, "unknown field"}, strategy.ErrInvalidOption},
		{"missing window", fmt.Sprintf(`{"login": {"algorithm": %q, "limit": 5}}`, a),
			[]string{`policy "login"`, `field "window"`, "missing"}, strategy.ErrInvalidOption},
		{"missing algorithm", `{"login": {"limit": 5, "window": "1m"}}`,
			[]string{`policy "login"`, `field "algorithm"`, "missing"}, strategy.ErrInvalidOption},
		{"null limit", fmt.Sprintf(`{"login": {"algorithm": %q, "limit": null, "window": "1m"}}`, a),
			[]string{`policy "login"`, `field "limit"`, "null"}, strategy.ErrInvalidOption},
		{"repeated field", `{"login": {` + ok + `, "limit": 6}}`,
			[]string{`policy "login"`, `field "limit"`, "twice"}, strategy.ErrInvalidOption},
		{"repeated policy", `{"login": {` + ok + `}, "login": {` + ok + `}}`,
			[]string{`policy "login"`, "twice"}, strategy.ErrInvalidOption},
		{"policy not an object", `{"login": 5}`,
			[]string{`policy "login"`, "want a JSON object"}, strategy.ErrInvalidOption},
		{"bad policy name", `{"log in": {` + ok + `}}`,
			[]string{`policy "log in"`, "policy name"}, strategy.ErrInvalidOption},
		{"not an object", `[]`, []string{"policies", "want a JSON object"}, strategy.ErrInvalidOption},
		{"not JSON", `{"login": `, []string{"policies", "invalid JSON"}, strategy.ErrInvalidOption},
		{"data after the object", `{} {}`, []string{"policies", "after the object"}, strategy.ErrInvalidOption},
		{"unknown mode", `{"login": {` + ok + `, "mode": "loud"}}`,
			[]string{`policy "login"`, `field "mode"`, `"loud"`}, strategy.ErrInvalidOption},
		{"tier not an object", `{"login": {` + ok + `, "tiers": {"pro": 5}}}`,
			[]string{`policy "login"`, `field "tiers.pro"`, "want a JSON object"}, strategy.ErrInvalidOption},
		{"tier without a limit", `{"login": {` + ok + `, "tiers": {"pro": {"burst": 5}}}}`,
			[]string{`policy "login"`, `field "tiers.pro.limit"`, "missing"}, strategy.ErrInvalidOption},
		{"tier with an unknown field", `{"login": {` + ok + `, "tiers": {"pro": {"limit": 5, "window": "1m"}}}}`,
			[]string{`policy "login"`, `field "tiers.pro.window"`, `unknown field "window"`}, strategy.ErrInvalidOption},
		{"negative tier limit", `{"login": {` + ok + `, "tiers": {"pro": {"limit": -5}}}}`,
			[]string{`policy "login"`, `field "tiers.pro.limit"`, `tier "pro"`, "limit must be >= 0"}, strategy.ErrInvalidLimit},
		{"shared namespace", `{"ab": {` + ok + `}, "b": {` + ok + `, "prefix": "rl:a"}}`,
			[]string{`policy "b"`, `field "prefix"`, `"rl:ab:"`, `policy "ab"`}, strategy.ErrInvalidOption},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := parsePolicies([]byte(c.json))
			if err == nil {
				t.Fatalf("UnmarshalJSON(%s) = %+v; want an error", c.json, p)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %s", err, w)
				}
			}
			if !errors.Is(err, c.is) {
				t.Errorf("error %q does not wrap %v", err, c.is)
			}
			var pe *ratelimit.FieldError
			if strings.Contains(c.want[0], "policy ") && (!errors.As(err, &pe) || !strings.Contains(c.want[0], fmt.Sprintf("%q", pe.Policy))) {
				t.Errorf("error %q is not a *FieldError for %s", err, c.want[0])
			}
			for _, goName := range []string{"OnFailure", "LocalShare", "Timeout must", "Window must", "Algorithm must", "Shards must", "Burst must"} {
				if strings.Contains(err.Error(), goName) {
					t.Errorf("error %q names the Go field %s, want the JSON one", err, goName)
				}
			}
			if strings.Count(err.Error(), "ratelimit:") != 1 {
				t.Errorf("error %q repeats its prefix", err)
			}
		})
	}
}

func TestParsePoliciesInsideALargerConfig(t *testing.T) {
	a := strategy.Algorithms()[0]
	var cfg struct {
		Listen string             `json:"listen"`
		Limits ratelimit.Policies `json:"limits"`
	}
	data := fmt.Sprintf(`{"listen": ":8080", "limits": {"login": {"algorithm": %q, "limit": 5, "window": "1m"}}}`, a)
	if err := json.Unmarshal([]byte(data), &cfg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Limits["login"]; got.Limit != 5 || got.Window != time.Minute || got.Algorithm != a {
		t.Fatalf("limits.login = %+v", got)
	}
	bad := `{"limits": {"login": {"algorithm": "leaky", "limit": 5, "window": "1m"}}}`
	if err := json.Unmarshal([]byte(bad), &cfg); err == nil || !strings.Contains(err.Error(), `policy "login"`) {
		t.Fatalf("json.Unmarshal of a bad policy = %v; want an error naming the policy", err)
	}
}

func TestSetGivesEachPolicyItsOwnKeys(t *testing.T) {
	for _, a := range strategy.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			mr, rdb := conformance.Miniredis(t)
			clock := conformance.NewClock(conformance.Epoch)
			obs := &recorder{}
			p := ratelimit.Policies{
				// Timeout: a first EVAL on a loaded machine can outlast the 250ms default
				"login":  {Algorithm: a, Limit: 2, Window: time.Minute, Timeout: 10 * time.Second},
				"search": {Algorithm: a, Limit: 3, Window: time.Second, Prefix: "svc:", Timeout: 10 * time.Second},
			}
			set, err := ratelimit.NewSet(rdb, p, ratelimit.WithClock(clock), ratelimit.WithObserver(obs))
			if err != nil {
				t.Fatal(err)
			}
			if got := ratelimit.SetNames(set); !reflect.DeepEqual(got, []string{"login", "search"}) {
				t.Fatalf("Names() = %v", got)
			}
			login, err := set.Get("login")
			if err != nil {
				t.Fatal(err)
			}
			search, err := set.Get("search")
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				l          *ratelimit.Limiter
				name, pfx  string
				limit      int64
				wantWindow time.Duration
			}{{login, "login", "rl:login:", 2, time.Minute}, {search, "search", "svc:search:", 3, time.Second}} {
				cfg := c.l.Config()
				if cfg.Name != c.name || cfg.Prefix != c.pfx || cfg.Limit != c.limit || cfg.Window != c.wantWindow || cfg.Algorithm != a {
					t.Errorf("%s: Config() = %+v; want Name %q, Prefix %q", c.name, cfg, c.name, c.pfx)
				}
			}
			ctx := context.Background()
			// the same subject, exhausted on login, is untouched on search
			for i := range 3 {
				r, err := login.Allow(ctx, "user:42")
				if err != nil || r.Allowed != (i < 2) {
					t.Fatalf("login request %d: %+v, %v", i+1, r, err)
				}
			}
			if r, err := search.Allow(ctx, "user:42"); err != nil || !r.Allowed || r.Remaining != 2 {
				t.Fatalf("search after login is exhausted: %+v, %v; want allowed, Remaining 2", r, err)
			}
			keys := mr.Keys()
			if len(keys) != 2 {
				t.Fatalf("keys = %q; want one per policy", keys)
			}
			for _, k := range keys {
				if !strings.HasPrefix(k, "rl:login:") && !strings.HasPrefix(k, "svc:search:") {
					t.Errorf("key %q is outside the policies' namespaces", k)
				}
			}
			// the observer is told which policy decided, never the subject
			obs.mu.Lock()
			defer obs.mu.Unlock()
			if len(obs.policies) != 4 || obs.policies[0] != "login" || obs.policies[3] != "search" {
				t.Errorf("observed policies %q; want login x3, search", obs.policies)
			}
		})
	}
}

type recorder struct {
	mu       sync.Mutex
	policies []string
}

func (r *recorder) Observe(_ context.Context, d ratelimit.Decision) {
	r.mu.Lock()
	r.policies = append(r.policies, d.Policy)
	r.mu.Unlock()
}

// Swapping an endpoint's algorithm is a config change: the new limiter
// works on the same Redis, policy and subject, without WRONGTYPE.
func TestSetSwapAlgorithm(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	clock := conformance.NewClock(conformance.Epoch)
	ctx := context.Background()
	algs := strategy.Algorithms()
	for i, from := range algs {
		to := algs[(i+1)%len(algs)]
		t.Run(string(from)+"->"+string(to), func(t *testing.T) {
			for j, a := range []strategy.Algorithm{from, to} {
				set, err := ratelimit.NewSet(rdb, ratelimit.Policies{"search": {Algorithm: a, Limit: 1, Window: time.Minute, Timeout: 10 * time.Second}}, ratelimit.WithClock(clock))
				if err != nil {
					t.Fatal(err)
				}
				l, _ := set.Get("search")
				r, err := l.Allow(ctx, "swap:"+string(from))
				if err != nil {
					t.Fatalf("%s: %v", a, err)
				}
				if j == 0 && !r.Allowed {
					t.Fatalf("%s: first request denied: %+v", a, r)
				}
			}
		})
	}
}

func TestSetErrors(t *testing.T) {
	_, rdb := conformance.Miniredis(t)
	a := strategy.Algorithms()[0]
	valid := ratelimit.Config{Algorithm: a, Limit: 1, Window: time.Second}
	for _, c := range []struct {
		name string
		p    ratelimit.Policies
		want []string
	}{
		{"name mismatch", ratelimit.Policies{"login": {Name: "signin", Algorithm: a, Limit: 1, Window: time.Second}},
			[]string{`policy "login"`, `"signin"`}},
		{"empty name", ratelimit.Policies{"": valid}, []string{`policy ""`, "policy name"}},
		{"bad limit", ratelimit.Policies{"ok": valid, "upload": {Algorithm: a, Limit: -5, Window: time.Second}},
			[]string{`policy "upload"`, "Limit must be >= 0"}},
		{"bad algorithm", ratelimit.Policies{"upload": {Algorithm: "leaky", Limit: 5, Window: time.Second}},
			[]string{`policy "upload"`, "Algorithm"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, build := range []struct {
				name string
				fn   func() (*ratelimit.Set, error)
			}{
				{"NewSet", func() (*ratelimit.Set, error) { return ratelimit.NewSet(rdb, c.p) }},
				{"NewSet in process", func() (*ratelimit.Set, error) { return ratelimit.NewSet(nil, c.p) }},
				{"Validate", func() (*ratelimit.Set, error) { return nil, validate(c.p) }},
			} {
				_, err := build.fn()
				if err == nil {
					t.Fatalf("%s: no error", build.name)
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q does not say %s", build.name, err, w)
					}
				}
			}
		})
	}
	// no client: in process
	if local, err := ratelimit.NewSet(nil, ratelimit.Policies{"x": valid}); err != nil {
		t.Errorf("NewSet(nil) = %v; want an in-process Set", err)
	} else if r, err := mustGet(t, local, "x").Allow(context.Background(), "u"); err != nil || !r.Allowed || r.Degraded {
		t.Errorf("NewSet(nil): Allow = %+v, %v; want allowed in process", r, err)
	}
	set, err := ratelimit.NewSet(nil, ratelimit.Policies{"login": valid, "search": valid})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Get("logn"); !errors.Is(err, strategy.ErrInvalidOption) ||
		!strings.Contains(err.Error(), `"logn"`) || !strings.Contains(err.Error(), `"login", "search"`) {
		t.Errorf(`Get("logn") = %v; want an error naming it and listing the policies`, err)
	}
}

// parsePolicies decodes a policy document as json.Unmarshal does, calling
// UnmarshalJSON directly so that malformed JSON reaches it too.
func parsePolicies(data []byte) (ratelimit.Policies, error) {
	var p ratelimit.Policies
	if err := p.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return p, nil
}

// validate reports what NewSet reports of p, on no Redis.
func validate(p ratelimit.Policies) error {
	_, err := ratelimit.NewSet(nil, p)
	return err
}

// updateJSON reloads set from a policy document.
func updateJSON(set *ratelimit.Set, data []byte) error {
	p, err := parsePolicies(data)
	if err != nil {
		return err
	}
	return set.Update(p)
}
