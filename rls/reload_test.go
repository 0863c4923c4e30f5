package rls_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/rls"
)

func limitConfig(rpu int) string {
	return fmt.Sprintf("domain: reload\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: %d}\n", rpu)
}

// TestReloadUnderLoad swaps the configuration 50 times while 16 callers
// send requests: none fails, each is answered under one whole
// configuration, and the last one is in force at the end.
func TestReloadUnderLoad(t *testing.T) {
	e := start(t, shared(t), map[string]string{"r.yaml": limitConfig(1000)})
	file := filepath.Join(e.dir, "r.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var sent, failed atomic.Int64
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				resp, err := e.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "reload",
					Descriptors: []*commonv3.RateLimitDescriptor{desc("user", fmt.Sprintf("u%d-%d", i, n))}})
				if ctx.Err() != nil {
					return
				}
				sent.Add(1)
				if err != nil || resp.OverallCode != ok {
					failed.Add(1)
					t.Errorf("during reload: %v %v", resp, err)
					return
				}
				if l := resp.Statuses[0].CurrentLimit.GetRequestsPerUnit(); l < 1000 || l > 1050 {
					t.Errorf("limit %d, from no configuration written", l)
					return
				}
			}
		}()
	}
	for i := 1; i <= 50; i++ {
		writeFile(t, file, limitConfig(1000+i))
		if err := e.srv.Reload(e.dir, e.build); err != nil {
			t.Fatalf("Reload %d: %v", i, err)
		}
	}
	cancel()
	wg.Wait()
	if sent.Load() == 0 || failed.Load() != 0 {
		t.Fatalf("sent %d, failed %d", sent.Load(), failed.Load())
	}
	if l := e.ask(t, "reload", 0, desc("user", "last")).Statuses[0].CurrentLimit.GetRequestsPerUnit(); l != 1050 {
		t.Fatalf("after the reloads: limit %d, want 1050", l)
	}
	if got := e.srv.Stats().Reloads; got != 50 {
		t.Errorf("Stats().Reloads: got %d, want 50", got)
	}
}

// TestReloadKeepsOld checks that a bad file is refused, with its error,
// and the configuration in use kept.
func TestReloadKeepsOld(t *testing.T) {
	var logged []string
	var mu sync.Mutex
	e := start(t, shared(t), map[string]string{"r.yaml": limitConfig(5)}, rls.WithLogf(func(f string, a ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(f, a...))
		mu.Unlock()
	}))
	old := e.srv.Config()
	writeFile(t, filepath.Join(e.dir, "r.yaml"), "domain: reload\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: many}\n")
	err := e.srv.Reload(e.dir, e.build)
	var ce *rls.ConfigError
	if !errors.As(err, &ce) || ce.Line != 4 || ce.Field != "descriptors[0].rate_limit.requests_per_unit" {
		t.Fatalf("Reload: got %v, want a ConfigError at line 4, requests_per_unit", err)
	}
	if e.srv.Config() != old {
		t.Fatal("the configuration changed after a refused reload")
	}
	if l := e.ask(t, "reload", 0, desc("user", "a")).Statuses[0].CurrentLimit.GetRequestsPerUnit(); l != 5 {
		t.Fatalf("limit after a refused reload: got %d, want 5", l)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 1 || !strings.Contains(logged[0], "r.yaml:4") {
		t.Fatalf("logged %q, want the refusal naming r.yaml:4", logged)
	}
}

// TestWatch checks that Watch picks up a changed file, a new file, and
// keeps the old configuration over a bad one.
func TestWatch(t *testing.T) {
	e := start(t, shared(t), map[string]string{"r.yaml": limitConfig(5)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.srv.Watch(ctx, e.dir, 10*time.Millisecond, e.build); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	writeFile(t, filepath.Join(e.dir, "r.yaml"), limitConfig(6)+"# changed\n")
	waitFor("the changed file", func() bool { return e.srv.Stats().Reloads >= 1 })
	if l := e.ask(t, "reload", 0, desc("user", "a")).Statuses[0].CurrentLimit.GetRequestsPerUnit(); l != 6 {
		t.Fatalf("limit: got %d, want 6", l)
	}
	writeFile(t, filepath.Join(e.dir, "second.yaml"), "domain: second\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 9}\n")
	waitFor("the new file", func() bool { return e.srv.Stats().Reloads >= 2 })
	if l := e.ask(t, "second", 0, desc("k", "a")).Statuses[0].CurrentLimit.GetRequestsPerUnit(); l != 9 {
		t.Fatalf("second domain: got %d, want 9", l)
	}
	writeFile(t, filepath.Join(e.dir, "second.yaml"), "domain: second\ndescriptors: {\n")
	waitFor("the refusal", func() bool { return e.srv.Stats().ReloadErrs >= 1 })
	if l := e.ask(t, "second", 0, desc("k", "b")).Statuses[0].CurrentLimit.GetRequestsPerUnit(); l != 9 {
		t.Fatalf("after a bad file: got %d, want 9 (the old configuration)", l)
	}
}

// TestRedisDown stops Redis and checks each descriptor's on_failure
// policy: open allows, closed denies, local enforces the limit in process.
func TestRedisDown(t *testing.T) {
	srv := testredis.Start(t)
	e := start(t, redisClient(t, srv.Addr), map[string]string{"f.yaml": `
domain: fail
descriptors:
  - key: open
    rate_limit: {unit: hour, requests_per_unit: 3, on_failure: open, timeout: 5s}
  - key: closed
    rate_limit: {unit: hour, requests_per_unit: 3, on_failure: closed, timeout: 5s}
  - key: local
    rate_limit: {unit: hour, requests_per_unit: 3, on_failure: local, timeout: 5s}
  - key: default
    rate_limit: {unit: hour, requests_per_unit: 3, timeout: 5s}
`})
	for _, k := range []string{"open", "closed", "local", "default"} {
		if st := e.ask(t, "fail", 0, desc(k, "x")).Statuses[0]; st.Code != ok {
			t.Fatalf("%s with Redis up: got %v", k, st.Code)
		}
	}
	srv.Stop()
	cases := []struct {
		key   string
		codes []rlsv3.RateLimitResponse_Code
	}{
		{"open", []rlsv3.RateLimitResponse_Code{ok, ok, ok, ok, ok}},
		{"default", []rlsv3.RateLimitResponse_Code{ok, ok, ok, ok, ok}}, // the library's default is open
		{"closed", []rlsv3.RateLimitResponse_Code{over, over, over}},
		{"local", []rlsv3.RateLimitResponse_Code{ok, ok, ok, over, over}}, // the twin starts empty at the outage
	}
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			for i, want := range c.codes {
				if st := e.ask(t, "fail", 0, desc(c.key, "x")).Statuses[0]; st.Code != want {
					t.Fatalf("request %d with Redis down: got %v, want %v", i+1, st.Code, want)
				}
			}
		})
	}
	if e.srv.Stats().Degraded == 0 {
		t.Error("Stats().Degraded is 0 with Redis down")
	}
}
