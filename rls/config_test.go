package rls_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/rls"
)

// TestEnvoyExample loads envoyproxy/ratelimit's own example configuration
// (testdata/envoy, copied unchanged from its examples/ratelimit/config)
// and checks the answers its README and integration tests give.
func TestEnvoyExample(t *testing.T) {
	rdb := shared(t)
	cfg, err := rls.Load("testdata/envoy", rls.NewBuilder(rdb, "test:envoyexample:"))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := strings.Join(cfg.Domains(), ","); got != "mongo_cps,rl" {
		t.Fatalf("domains: got %s, want mongo_cps,rl", got)
	}
	e := start(t, rdb, map[string]string{
		"config.yaml":  readFile(t, "testdata/envoy/config.yaml"),
		"example.yaml": readFile(t, "testdata/envoy/example.yaml"),
	})
	type want struct {
		limit  uint32
		unit   rlsv3.RateLimitResponse_RateLimit_Unit
		code   rlsv3.RateLimitResponse_Code
		remain uint32
	}
	cases := []struct {
		name   string
		domain string
		kv     []string
		want   want
	}{
		{"database users", "mongo_cps", []string{"database", "users"}, want{500, rlsv3.RateLimitResponse_RateLimit_SECOND, ok, 499}},
		{"database default", "mongo_cps", []string{"database", "default"}, want{500, rlsv3.RateLimitResponse_RateLimit_SECOND, ok, 499}},
		{"database other", "mongo_cps", []string{"database", "other"}, want{code: ok}},
		{"foo", "rl", []string{"foo", "f1"}, want{2, rlsv3.RateLimitResponse_RateLimit_MINUTE, ok, 1}},
		{"foo bar", "rl", []string{"foo", "f1", "bar", "b1"}, want{3, rlsv3.RateLimitResponse_RateLimit_MINUTE, ok, 2}},
		{"foo bar bkthomps", "rl", []string{"foo", "f1", "bar", "bkthomps"}, want{1, rlsv3.RateLimitResponse_RateLimit_MINUTE, ok, 0}},
		{"foo bar banned", "rl", []string{"foo", "f1", "bar", "banned"}, want{0, rlsv3.RateLimitResponse_RateLimit_MINUTE, over, 0}},
		{"foo baz", "rl", []string{"foo", "f1", "baz", "z"}, want{1, rlsv3.RateLimitResponse_RateLimit_SECOND, ok, 0}},
		{"foo baz shady (shadow)", "rl", []string{"foo", "f1", "baz", "shady"}, want{3, rlsv3.RateLimitResponse_RateLimit_MINUTE, ok, 2}},
		{"foo bay unlimited", "rl", []string{"foo", "f1", "bay", "y"}, want{0, 0, ok, math.MaxUint32}},
		{"qux unlimited", "rl", []string{"qux", "q"}, want{0, 0, ok, math.MaxUint32}},
		{"unspec", "rl", []string{"unspec", "u"}, want{2, rlsv3.RateLimitResponse_RateLimit_MINUTE, ok, 1}},
		{"category account", "rl", []string{"category", "account"}, want{4, rlsv3.RateLimitResponse_RateLimit_MINUTE, ok, 3}},
		{"source destination mock", "rl", []string{"source_cluster", "proxy", "destination_cluster", "mock"}, want{1, rlsv3.RateLimitResponse_RateLimit_MINUTE, ok, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := e.ask(t, c.domain, 0, desc(c.kv...)).Statuses[0]
			got := want{code: st.Code, remain: st.LimitRemaining}
			if st.CurrentLimit != nil {
				got.limit, got.unit = st.CurrentLimit.RequestsPerUnit, st.CurrentLimit.Unit
			}
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
	t.Run("shadow over its limit is OK", func(t *testing.T) {
		for i := 0; i < 5; i++ {
			if r := e.ask(t, "rl", 0, desc("foo", "f2", "baz", "shady")); r.OverallCode != ok {
				t.Fatalf("request %d: got %v, want OK", i+1, r.OverallCode)
			}
		}
	})
	t.Run("replaces", func(t *testing.T) {
		// category=account replaces bkthomps: the 1/min limit of bar=bkthomps is not applied
		r := e.ask(t, "rl", 0, desc("category", "account"), desc("foo", "f3", "bar", "bkthomps"), desc("foo", "f3", "bar", "bkthomps"))
		if r.OverallCode != ok || r.Statuses[1].CurrentLimit != nil {
			t.Fatalf("got %v %v, want OK and the bkthomps limit replaced", r.OverallCode, r.Statuses)
		}
	})
}

// TestBadConfig checks that each kind of bad file is refused with an
// error naming the file, the line and the field.
func TestBadConfig(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		line  int
		field string
		text  string
	}{
		{"syntax", "domain: d\ndescriptors:\n  - key: a\n   value: b\n", 2, "", "yaml"},
		{"no domain", "descriptors: []\n", 1, "domain", "must be set"},
		{"unknown top field", "domain: d\ndescriptor: []\n", 2, "descriptor", "unknown field"},
		{"no key", "domain: d\ndescriptors:\n  - value: v\n", 3, "descriptors[0].key", "must be set"},
		{"unknown descriptor field", "domain: d\ndescriptors:\n  - key: k\n    rate_limt: {}\n", 4, "descriptors[0].rate_limt", "unknown field"},
		{"bad unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 5\n", 5, "descriptors[0].rate_limit.unit", "fortnight"},
		{"no unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 5\n", 5, "descriptors[0].rate_limit.unit", "must be one of"},
		{"negative requests", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n", 4, "descriptors[0].rate_limit.requests_per_unit", "-1"},
		{"requests not a number", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: lots\n", 6, "descriptors[0].rate_limit.requests_per_unit", "lots"},
		{"nested bad unit", "domain: d\ndescriptors:\n  - key: k\n    descriptors:\n      - key: j\n        rate_limit:\n          unit: sec\n          requests_per_unit: 1\n", 7, "descriptors[0].descriptors[0].rate_limit.unit", "sec"},
		{"unlimited with unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n", 4, "descriptors[0].rate_limit", "unlimited"},
		{"duplicate descriptor", "domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n", 5, "descriptors[1]", "duplicate"},
		{"bad algorithm", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky}\n", 4, "descriptors[0].rate_limit.algorithm", "leaky"},
		{"bad on_failure", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, on_failure: maybe}\n", 4, "descriptors[0].rate_limit.on_failure", "maybe"},
		{"bad timeout", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, timeout: soon}\n", 4, "descriptors[0].rate_limit.timeout", "soon"},
		{"library refuses (timeout too long)", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, timeout: 2h}\n", 4, "descriptors[0].rate_limit", "Timeout"},
		{"library refuses (negative shards)", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, shards: -3}\n", 4, "descriptors[0].rate_limit", "Shards"},
		{"replicas not a number", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replicas: two, replica_timeout: 20ms}\n", 4, "descriptors[0].rate_limit.replicas", "two"},
		{"negative replicas", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replicas: -1\n", 7, "descriptors[0].rate_limit.replicas", ">= 0"},
		{"too many replicas", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replicas: 101, replica_timeout: 20ms}\n", 4, "descriptors[0].rate_limit.replicas", "<= 100"},
		{"replicas without replica_timeout", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replicas: 1\n", 7, "descriptors[0].rate_limit.replicas", "ReplicaTimeout must be > 0"},
		{"bad replica_timeout", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replicas: 1, replica_timeout: soon}\n", 4, "descriptors[0].rate_limit.replica_timeout", "soon"},
		{"replica_timeout without replicas", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replica_timeout: 20ms\n", 7, "descriptors[0].rate_limit.replica_timeout", "Replicas > 0"},
		{"replica_timeout not below timeout", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replicas: 1, replica_timeout: 1s, timeout: 500ms}\n", 4, "descriptors[0].rate_limit.replica_timeout", "below"},
		{"lease with shards", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      shards: 2\n      lease: true\n", 8, "descriptors[0].rate_limit.lease", "shards"},
		{"lease not a bool", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, lease: often}\n", 4, "descriptors[0].rate_limit.lease", "often"},
		{"bad candidate algorithm", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      candidate: {algorithm: leaky}\n", 7, "descriptors[0].rate_limit.candidate.algorithm", "leaky"},
		{"bad candidate unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      candidate: {unit: fortnight}\n", 7, "descriptors[0].rate_limit.candidate.unit", "fortnight"},
		{"unknown candidate field", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      candidate: {shards: 2}\n", 7, "descriptors[0].rate_limit.candidate.shards", "unknown field"},
		{"candidate same as own", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      candidate: {algorithm: fixed_window}\n", 7, "descriptors[0].rate_limit.candidate", "must differ"},
		{"tiers without tier_key", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      tiers: {pro: {requests_per_unit: 5}}\n", 7, "descriptors[0].rate_limit.tiers", "needs tier_key"},
		{"tier_key without tiers", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      tier_key: plan\n", 7, "descriptors[0].rate_limit.tier_key", "no tiers"},
		{"tier without requests", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      tier_key: plan\n      tiers: {pro: {burst: 5}}\n", 8, "descriptors[0].rate_limit.tiers.pro.requests_per_unit", "must be set"},
		{"unknown tier field", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      tier_key: plan\n      tiers: {pro: {unit: hour}}\n", 8, "descriptors[0].rate_limit.tiers.pro.unit", "unknown field"},
		{"library refuses a tier", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      tier_key: plan\n      tiers: {pro: {requests_per_unit: 5, burst: -1}}\n", 8, "descriptors[0].rate_limit.tiers", "pro"},
		{"tier_key also a nested key", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      tier_key: plan\n      tiers: {pro: {requests_per_unit: 5}}\n    descriptors:\n      - key: plan\n        rate_limit: {unit: second, requests_per_unit: 2}\n", 7, "descriptors[0].rate_limit.tier_key", "nested descriptor"},
		{"library refuses the candidate", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      candidate: {algorithm: gcra, burst: -1}\n", 7, "descriptors[0].rate_limit.candidate", "Burst"},
		{"share_threshold without wildcard", "domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n", 3, "descriptors[0].share_threshold", "wildcard"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "bad.yaml")
			writeFile(t, file, c.yaml)
			_, err := rls.Load(dir, rls.NewBuilder(shared(t), "test:bad:"))
			var ce *rls.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *rls.ConfigError", err)
			}
			if ce.File != file || ce.Line != c.line || ce.Field != c.field || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("got file %s line %d field %q (%v); want %s line %d field %q mentioning %q", ce.File, ce.Line, ce.Field, err, file, c.line, c.field, c.text)
			}
			if !strings.HasPrefix(err.Error(), file+":") {
				t.Errorf("message %q does not start with the file", err)
			}
		})
	}
	t.Run("duplicate domain across files", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "a.yaml"), "domain: d\n")
		writeFile(t, filepath.Join(dir, "b.yaml"), "domain: d\n")
		_, err := rls.Load(dir, rls.NewBuilder(shared(t), "test:bad:"))
		var ce *rls.ConfigError
		if !errors.As(err, &ce) || ce.Field != "domain" || !strings.Contains(err.Error(), "a.yaml") {
			t.Fatalf("got %v, want a duplicate domain error naming both files", err)
		}
	})
}

// TestOwnFields checks that our per-descriptor fields reach the library.
func TestOwnFields(t *testing.T) {
	e := start(t, shared(t), map[string]string{"o.yaml": `
domain: own
descriptors:
  - key: tb
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: token_bucket, burst: 3, on_failure: closed, timeout: 10s}
  - key: sharded
    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: gcra, shards: 4}
  - key: year
    rate_limit: {unit: year, requests_per_unit: 1000, algorithm: sliding_counter}
  - key: durable
    rate_limit: {unit: hour, requests_per_unit: 10, replicas: 1, replica_timeout: 20ms, on_failure: closed}
  - key: leased
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: sliding_log, lease: true}
  - key: tried
    rate_limit:
      unit: hour
      requests_per_unit: 10
      candidate: {algorithm: gcra, requests_per_unit: 2}
`})
	for i := 0; i < 3; i++ {
		if st := e.ask(t, "own", 0, desc("tb", "x")).Statuses[0]; st.Code != ok {
			t.Fatalf("token bucket request %d: got %v, want OK", i+1, st.Code)
		}
	}
	if st := e.ask(t, "own", 0, desc("tb", "x")).Statuses[0]; st.Code != over {
		t.Fatalf("token bucket request 4 (burst 3): got %v, want OVER_LIMIT", st.Code)
	}
	if st := e.ask(t, "own", 0, desc("sharded", "x")).Statuses[0]; st.Code != ok {
		t.Fatalf("sharded: got %v", st.Code)
	}
	st := e.ask(t, "own", 0, desc("year", "x")).Statuses[0]
	if st.Code != ok || st.CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_YEAR || st.LimitRemaining != 999 {
		t.Fatalf("year: got %v", st)
	}
	// the test's Redis has no replica: a decision that must reach one is
	// not acknowledged, and on_failure: closed denies it
	if st := e.ask(t, "own", 0, desc("durable", "x")).Statuses[0]; st.Code != over {
		t.Fatalf("durable without a replica (on_failure closed): got %v, want OVER_LIMIT", st.Code)
	}
	// leased: exact under concurrency, as without leases
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e.ask(t, "own", 0, desc("leased", "x")).Statuses[0].Code == ok {
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := allowed.Load(); got != 10 {
		t.Fatalf("leased sliding log, 30 concurrent requests of a limit of 10: %d allowed, want 10", got)
	}
	// the candidate decides in shadow, on keys of its own: the descriptor's
	// limit of 10 answers, and the candidate's GCRA keys are in Redis
	for i := range 3 {
		if st := e.ask(t, "own", 0, desc("tried", "x")).Statuses[0]; st.Code != ok || st.CurrentLimit.RequestsPerUnit != 10 {
			t.Fatalf("descriptor with a candidate, request %d: got %v, want OK under its own limit of 10", i+1, st)
		}
	}
	// start's prefix is "test:" + t.Name() + ":" + a stamp of its own + ":"
	pattern := "test:" + t.Name() + ":*:candidate:gcra:*"
	keys, err := shared(t).Keys(context.Background(), pattern).Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys matching %q: %v (%v), want the candidate's", pattern, keys, err)
	}
}

// TestUnitsWithinMaxWindow checks that every unit's window is one the
// library accepts.
func TestUnitsWithinMaxWindow(t *testing.T) {
	for name, u := range rls.Units {
		if _, err := ratelimit.New(shared(t), ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 1, Window: u.Window}); err != nil {
			t.Errorf("unit %s (%v): %v", name, u.Window, err)
		}
	}
}
