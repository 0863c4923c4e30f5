package rls_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/rls"
)

const matchingConfig = `
domain: match
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 2}
  - key: to_number
    rate_limit: {unit: day, requests_per_unit: 100}
  - key: depth
    value: one
    rate_limit: {unit: minute, requests_per_unit: 300}
  - key: internal
    rate_limit: {unlimited: true}
  - key: path
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: path
    value: docs/*
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: parent
    rate_limit: {unit: hour, requests_per_unit: 7}
    descriptors:
      - key: child
        rate_limit: {unit: hour, requests_per_unit: 8}
`

// TestMatching checks envoyproxy/ratelimit's matching rules through a real
// client: key and value before key alone, nested lists, the depth of the
// request equal to the configuration's, unlimited, wildcards.
func TestMatching(t *testing.T) {
	e := start(t, shared(t), map[string]string{"match.yaml": matchingConfig})
	cases := []struct {
		name   string
		domain string
		desc   *commonv3.RateLimitDescriptor
		limit  uint32 // 0: no current_limit
		code   rlsv3.RateLimitResponse_Code
		remain uint32
	}{
		{"key only", "match", desc("remote_address", "10.0.0.1"), 3, ok, 2},
		{"value wins over key only", "match", desc("remote_address", "50.0.0.5"), 0, over, 0},
		{"nested", "match", desc("message_type", "marketing", "to_number", "555"), 2, ok, 1},
		{"top level key only beside a nested rule", "match", desc("to_number", "555"), 100, ok, 99},
		{"unmatched value of a value-only key", "match", desc("message_type", "transactional", "to_number", "555"), 0, ok, 0},
		{"request deeper than configuration", "match", desc("depth", "one", "sub", "x"), 0, ok, 0},
		{"request depth equal", "match", desc("depth", "one"), 300, ok, 299},
		{"parent with limit", "match", desc("parent", "p"), 7, ok, 6},
		{"child under parent with limit", "match", desc("parent", "p", "child", "c"), 8, ok, 7},
		{"request shallower than a placeholder", "match", desc("message_type", "marketing"), 0, ok, 0},
		{"unlimited", "match", desc("internal", "x"), 0, ok, math.MaxUint32},
		{"unknown key", "match", desc("nothing", "x"), 0, ok, 0},
		{"unknown domain", "other", desc("remote_address", "10.0.0.1"), 0, ok, 0},
		{"wildcard", "match", desc("path", "docs/a"), 1, ok, 0},
		{"wildcard, another value: its own subject", "match", desc("path", "docs/b"), 1, ok, 0},
		{"shared wildcard", "match", desc("path", "files/a"), 2, ok, 1},
		{"shared wildcard, another value: the same subject", "match", desc("path", "files/b"), 2, ok, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := e.ask(t, c.domain, 0, c.desc).Statuses[0]
			var limit uint32
			if st.CurrentLimit != nil {
				limit = st.CurrentLimit.RequestsPerUnit
			}
			if c.code == over && st.CurrentLimit != nil {
				limit = 0 // requests_per_unit 0 is the limit itself
			}
			if limit != c.limit || st.Code != c.code || st.LimitRemaining != c.remain {
				t.Errorf("got limit %d, code %v, remaining %d; want %d, %v, %d", limit, st.Code, st.LimitRemaining, c.limit, c.code, c.remain)
			}
		})
	}
	t.Run("each value of a key-only descriptor is its own subject", func(t *testing.T) {
		for i := 0; i < 3; i++ {
			if st := e.ask(t, "match", 0, desc("remote_address", "10.9.9.9")).Statuses[0]; st.Code != ok {
				t.Fatalf("request %d of 10.9.9.9: got %v, want OK", i+1, st.Code)
			}
		}
		if st := e.ask(t, "match", 0, desc("remote_address", "10.9.9.9")).Statuses[0]; st.Code != over {
			t.Fatalf("request 4 of 10.9.9.9: got %v, want OVER_LIMIT", st.Code)
		}
		if st := e.ask(t, "match", 0, desc("remote_address", "10.9.9.8")).Statuses[0]; st.Code != ok || st.LimitRemaining != 2 {
			t.Fatalf("first request of 10.9.9.8: got %v remaining %d, want OK remaining 2", st.Code, st.LimitRemaining)
		}
	})
	t.Run("overall code", func(t *testing.T) {
		resp := e.ask(t, "match", 0, desc("to_number", "777"), desc("remote_address", "50.0.0.5"))
		if resp.OverallCode != over || resp.Statuses[0].Code != ok || resp.Statuses[1].Code != over {
			t.Fatalf("got overall %v, statuses %v %v; want OVER_LIMIT, OK, OVER_LIMIT", resp.OverallCode, resp.Statuses[0].Code, resp.Statuses[1].Code)
		}
		if d := resp.Statuses[0].DurationUntilReset.AsDuration(); d <= 0 || d > 24*time.Hour {
			t.Errorf("duration_until_reset of a day's limit: got %v", d)
		}
	})
}

// TestExact checks that each algorithm allows exactly the limit when 64
// callers race for it over a long window, direct and batched.
func TestExact(t *testing.T) {
	rdb := shared(t)
	b, err := batch.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, mode := range []string{"direct", "batched"} {
		for _, alg := range rls.Algorithms {
			t.Run(mode+"/"+string(alg), func(t *testing.T) {
				cfg := fmt.Sprintf("domain: exact\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: %s}\n", alg)
				var e *env
				if mode == "direct" {
					e = start(t, rdb, map[string]string{"exact.yaml": cfg})
				} else {
					e = start(t, b, map[string]string{"exact.yaml": cfg})
				}
				const callers, each = 64, 4
				var allowed, denied atomic.Int64
				var wg sync.WaitGroup
				for range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range each {
							resp, err := e.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
								Domain: "exact", Descriptors: []*commonv3.RateLimitDescriptor{desc("user", "u1")}})
							if err != nil {
								t.Error(err)
								return
							}
							if resp.OverallCode == ok {
								allowed.Add(1)
							} else {
								denied.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				if allowed.Load() != 100 || denied.Load() != callers*each-100 {
					t.Fatalf("got %d allowed, %d denied; want 100, %d", allowed.Load(), denied.Load(), callers*each-100)
				}
			})
		}
	}
}

// TestHitsAddend checks hits_addend as the cost: the request's, or the
// descriptor's own.
func TestHitsAddend(t *testing.T) {
	e := start(t, shared(t), map[string]string{"c.yaml": `
domain: cost
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: sliding_log}
`})
	steps := []struct {
		hits   uint32
		own    *wrapperspb.UInt64Value
		code   rlsv3.RateLimitResponse_Code
		remain uint32
	}{
		{0, nil, ok, 9}, // 0 means 1
		{4, nil, ok, 5},
		{4, nil, ok, 1},
		{4, nil, over, 1}, // a denial records nothing
		{4, wrapperspb.UInt64(1), ok, 0},
	}
	for i, s := range steps {
		d := desc("k", "a")
		d.HitsAddend = s.own
		st := e.ask(t, "cost", s.hits, d).Statuses[0]
		if st.Code != s.code || st.LimitRemaining != s.remain {
			t.Fatalf("step %d (hits %d): got %v remaining %d, want %v remaining %d", i, s.hits, st.Code, st.LimitRemaining, s.code, s.remain)
		}
	}
}

// TestShadowMode checks that a shadow_mode descriptor is decided and
// counted but answered OK, beside an enforced one.
func TestShadowMode(t *testing.T) {
	e := start(t, shared(t), map[string]string{"s.yaml": `
domain: shadow
descriptors:
  - key: user
    value: user-a
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: user
    value: user-b
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: user
    value: user-q
    quota_mode: true
    shadow_mode: false
    rate_limit: {unit: hour, requests_per_unit: 1}
`})
	for i := 0; i < 5; i++ {
		st := e.ask(t, "shadow", 0, desc("user", "user-a")).Statuses[0]
		if st.Code != ok {
			t.Fatalf("shadow request %d: got %v, want OK", i+1, st.Code)
		}
		if want := uint32(max(0, 1-i)); st.LimitRemaining != want {
			t.Fatalf("shadow request %d: remaining %d, want %d (decided as enforcement would)", i+1, st.LimitRemaining, want)
		}
	}
	if got := e.srv.Stats().Shadow; got != 3 {
		t.Fatalf("Stats().Shadow: got %d, want 3", got)
	}
	for i := 0; i < 2; i++ { // quota_mode is answered as shadow mode
		if st := e.ask(t, "shadow", 0, desc("user", "user-q")).Statuses[0]; st.Code != ok {
			t.Fatalf("quota_mode request %d: got %v, want OK", i+1, st.Code)
		}
	}
	for i := 0; i < 3; i++ {
		st := e.ask(t, "shadow", 0, desc("user", "user-b")).Statuses[0]
		if want := i == 2; (st.Code == over) != want {
			t.Fatalf("enforced request %d: got %v", i+1, st.Code)
		}
	}
}

// TestHeaders checks the response headers of the descriptor closest to
// its limit, and of the one over it.
func TestHeaders(t *testing.T) {
	e := start(t, shared(t), map[string]string{"h.yaml": `
domain: h
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 1}
`}, rls.WithHeaders(rls.Headers{Limit: "x-ratelimit-limit", Remaining: "x-ratelimit-remaining", Reset: "x-ratelimit-reset"}))
	headers := func(r *rlsv3.RateLimitResponse) map[string]string {
		m := map[string]string{}
		for _, h := range r.ResponseHeadersToAdd {
			m[h.Key] = h.Value
		}
		return m
	}
	h := headers(e.ask(t, "h", 0, desc("a", "1"), desc("b", "1")))
	if h["x-ratelimit-limit"] != "1" || h["x-ratelimit-remaining"] != "0" || h["x-ratelimit-reset"] == "" {
		t.Fatalf("first: got %v, want limit 1 remaining 0 (b is closest)", h)
	}
	r := e.ask(t, "h", 0, desc("a", "1"), desc("b", "1"))
	h = headers(r)
	if r.OverallCode != over || h["x-ratelimit-limit"] != "1" || h["x-ratelimit-remaining"] != "0" {
		t.Fatalf("second: got %v %v, want OVER_LIMIT with b's headers", r.OverallCode, h)
	}
	var reset int
	fmt.Sscan(h["x-ratelimit-reset"], &reset)
	if reset <= 0 || reset > 3600 {
		t.Fatalf("reset: got %q, want seconds in (0, 3600]", h["x-ratelimit-reset"])
	}
}

// TestReplaces checks envoyproxy/ratelimit's replaces: a matched
// descriptor naming another's rate limit drops it from the request.
func TestReplaces(t *testing.T) {
	e := start(t, shared(t), map[string]string{"r.yaml": `
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit: {name: specific_limit, requests_per_unit: 5, unit: second}
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`})
	r := e.ask(t, "example7", 0, desc("key_1", "value_1", "user", "bkthomps"), desc("key_2", "value_2", "user", "bkthomps"))
	if r.Statuses[0].CurrentLimit != nil || r.Statuses[1].CurrentLimit.GetRequestsPerUnit() != 10 {
		t.Fatalf("got %v, want the 5/s limit replaced and the 10/s applied", r.Statuses)
	}
	r = e.ask(t, "example7", 0, desc("key_1", "value_1", "user", "bkthomps"))
	if r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 5 {
		t.Fatalf("alone: got %v, want the 5/s limit", r.Statuses[0])
	}
}

// TestBadRequest checks the errors of requests envoyproxy/ratelimit also
// refuses.
func TestBadRequest(t *testing.T) {
	e := start(t, shared(t), map[string]string{"m.yaml": matchingConfig})
	many := make([]*commonv3.RateLimitDescriptor, rls.MaxDescriptors+1)
	for i := range many {
		many[i] = desc("k", "v")
	}
	for _, req := range []*rlsv3.RateLimitRequest{
		{Descriptors: []*commonv3.RateLimitDescriptor{desc("k", "v")}},
		{Domain: "match"},
		{Domain: "match", Descriptors: many},
	} {
		if _, err := e.client.ShouldRateLimit(context.Background(), req); err == nil {
			t.Errorf("ShouldRateLimit(%v): got no error", req)
		}
	}
}

// TestLimitOverride checks a request descriptor's own limit (Envoy's
// descriptor limit override): enforced as a fixed window, its own subject
// per limit, and only for a configured domain.
func TestLimitOverride(t *testing.T) {
	e := start(t, shared(t), map[string]string{"o.yaml": "domain: ov\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100}\n"})
	withLimit := func(rpu uint32) *commonv3.RateLimitDescriptor {
		d := desc("k", "v")
		d.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: typev3.RateLimitUnit_MINUTE}
		return d
	}
	for i, want := range []rlsv3.RateLimitResponse_Code{ok, ok, over} {
		st := e.ask(t, "ov", 0, withLimit(2)).Statuses[0]
		if st.Code != want || st.CurrentLimit.GetRequestsPerUnit() != 2 || st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE {
			t.Fatalf("request %d with limit 2/min: got %v, want %v", i+1, st, want)
		}
	}
	if st := e.ask(t, "ov", 0, withLimit(3)).Statuses[0]; st.Code != ok || st.LimitRemaining != 2 {
		t.Fatalf("another limit: got %v, want OK, remaining 2 (its own count)", st)
	}
	if st := e.ask(t, "ov", 0, desc("k", "v")).Statuses[0]; st.CurrentLimit.GetRequestsPerUnit() != 100 || st.LimitRemaining != 99 {
		t.Fatalf("without override: got %v, want the configured 100/h untouched", st)
	}
	if st := e.ask(t, "unknown", 0, withLimit(2)).Statuses[0]; st.CurrentLimit != nil {
		t.Fatalf("unknown domain: got %v, want no limit", st)
	}
}

// TestLongSubject checks that a descriptor too long for a subject is the
// client's error, not Redis's.
func TestLongSubject(t *testing.T) {
	e := start(t, shared(t), map[string]string{"m.yaml": matchingConfig})
	_, err := e.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "match",
		Descriptors: []*commonv3.RateLimitDescriptor{desc("remote_address", strings.Repeat("x", 5000))}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument", err)
	}
}

// TestGlobalShadowMode checks WithShadowMode: every descriptor decided and
// counted, none answered OVER_LIMIT.
func TestGlobalShadowMode(t *testing.T) {
	e := start(t, shared(t), map[string]string{"g.yaml": "domain: g\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"}, rls.WithShadowMode())
	for i := 0; i < 3; i++ {
		if r := e.ask(t, "g", 0, desc("k", "v")); r.OverallCode != ok || r.Statuses[0].Code != ok {
			t.Fatalf("request %d: got %v, want OK", i+1, r)
		}
	}
	if got := e.srv.Stats().Shadow; got != 2 {
		t.Fatalf("Stats().Shadow: got %d, want 2", got)
	}
}

// tiersConfig is a per-user limit of 2 an hour with a tier pro of 5,
// named by the request entry plan.
const tiersConfig = `
domain: tiers
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 2
      algorithm: gcra
      tier_key: plan
      tiers:
        pro: {requests_per_unit: 5}
`

// count asks domain tiers n times for ds, one unit each, and returns how
// many were allowed and the last current_limit.
func (e *env) count(t *testing.T, ds *commonv3.RateLimitDescriptor, n int) (allowed int, limit uint32) {
	t.Helper()
	for range n {
		resp := e.ask(t, "tiers", 1, ds)
		if resp.OverallCode == ok {
			allowed++
		}
		limit = resp.Statuses[0].GetCurrentLimit().GetRequestsPerUnit()
	}
	return allowed, limit
}

// TestTiers checks a rate limit's tiers through a real client: a request
// descriptor that ends with the tier_key entry is decided under the tier
// its value names, on the subject of the entries before it (so a subject
// that changes tier keeps what it used), with the tier's limit in
// current_limit; an unknown tier, or no tier entry, is the own limit.
func TestTiers(t *testing.T) {
	e := start(t, shared(t), map[string]string{"tiers.yaml": tiersConfig})
	if got, lim := e.count(t, desc("user", "a", "plan", "pro"), 10); got != 5 || lim != 5 {
		t.Errorf("pro: %d allowed, current_limit %d; want 5 and 5", got, lim)
	}
	if got, lim := e.count(t, desc("user", "b"), 10); got != 2 || lim != 2 {
		t.Errorf("no tier entry: %d allowed, current_limit %d; want the own 2 and 2", got, lim)
	}
	if got, lim := e.count(t, desc("user", "c", "plan", "gold"), 10); got != 2 || lim != 2 {
		t.Errorf("unknown tier: %d allowed, current_limit %d; want the own 2 and 2", got, lim)
	}
	// user d spends its own 2, then as pro has 3 left: one subject
	if got, _ := e.count(t, desc("user", "d"), 2); got != 2 {
		t.Fatalf("d: %d allowed, want 2", got)
	}
	if got, _ := e.count(t, desc("user", "d", "plan", "pro"), 10); got != 3 {
		t.Errorf("d as pro after 2 of its own: %d allowed, want 3 (the same subject)", got)
	}
	// the tier entry only counts last, right after the tiered descriptor
	if resp := e.ask(t, "tiers", 1, desc("plan", "pro", "user", "e")); resp.Statuses[0].GetCurrentLimit() != nil {
		t.Errorf("plan first: %v; want no match", resp.Statuses[0])
	}
}

// TestTiersDenyCache: tiers meet the deny cache (-deny-cache): a subject
// denied under its own limit, its denial cached, is decided afresh under a
// tier with more room, and a denial under the tier is cached as the tier's.
func TestTiersDenyCache(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "tiers.yaml"), tiersConfig)
	build := rls.NewBuilder(shared(t), testredis.Prefix(t), ratelimit.WithDenyCache(100))
	c, err := rls.Load(dir, build)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: rls.NewServer(c), dir: dir, build: build}
	e.client = serve(t, e.srv)
	if got, _ := e.count(t, desc("user", "d"), 4); got != 2 {
		t.Fatalf("own limit: %d of 4 allowed, want 2 (the rest denied, cached)", got)
	}
	if got, _ := e.count(t, desc("user", "d", "plan", "pro"), 5); got != 3 {
		t.Errorf("as pro after its own denial was cached: %d of 5 allowed, want 3", got)
	}
	if got, _ := e.count(t, desc("user", "d"), 2); got != 0 {
		t.Errorf("own limit again: %d allowed, want 0", got)
	}
}
