package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
)

// client drives a running service over HTTP.
type client struct {
	t   *testing.T
	url string
}

type resp struct {
	status                         int
	policy, rateLimit, retry, body string
}

func (c client) do(method, path string, body []byte, headers ...string) resp {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, policy: res.Header.Get("RateLimit-Policy"),
		rateLimit: res.Header.Get("RateLimit"), retry: res.Header.Get("Retry-After"), body: string(b)}
}

var (
	policyField = regexp.MustCompile(`^"([a-z_.-]+)";q=(\d{1,15});w=(\d{1,15})$`)
	limitField  = regexp.MustCompile(`^"([a-z_.-]+)";r=(\d{1,15});t=(\d{1,15})$`)
)

// fields parses the two draft-11 fields of r, which must both be there
// and name policy.
func fields(t *testing.T, label, policy string, r resp) (q, w, rem, reset int64) {
	t.Helper()
	pm := policyField.FindStringSubmatch(r.policy)
	lm := limitField.FindStringSubmatch(r.rateLimit)
	if pm == nil || lm == nil || pm[1] != policy || lm[1] != policy {
		t.Fatalf("%s: RateLimit-Policy %q, RateLimit %q; want draft-11 fields for policy %q", label, r.policy, r.rateLimit, policy)
	}
	n := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	return n(pm[2]), n(pm[3]), n(lm[2]), n(lm[3])
}

// retryAfter returns the Retry-After of a 429, which must be whole seconds
// in [1, max].
func retryAfter(t *testing.T, label string, r resp, max int64) int64 {
	t.Helper()
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("%s: status %d; want 429", label, r.status)
	}
	v, err := strconv.ParseInt(r.retry, 10, 64)
	if err != nil || v < 1 || v > max {
		t.Fatalf("%s: Retry-After %q; want whole seconds in [1, %d]", label, r.retry, max)
	}
	return v
}

func mustPolicies(t *testing.T, json string) ratelimit.Policies {
	t.Helper()
	p, err := ratelimit.ParsePolicies([]byte(json))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testPolicies are the service's policies with every algorithm sliding_log
// but search's, which is alg. Their timeout is long: a fresh redis-server
// on a loaded machine can take longer than the default 250ms to answer its
// first EVAL, and a timed-out decision would be the failure policy's, not
// the one under test.
func testPolicies(t *testing.T, alg ratelimit.Algorithm) ratelimit.Policies {
	return mustPolicies(t, fmt.Sprintf(`{
		"login":    {"algorithm": "sliding_log", "limit": 5, "window": "1m", "timeout": "10s"},
		"search":   {"algorithm": %q, "limit": 3, "window": "1m", "timeout": "10s"},
		"upload":   {"algorithm": "sliding_log", "limit": 10, "window": "1h", "timeout": "10s"},
		"upstream": {"algorithm": "sliding_log", "limit": 2, "window": "200ms", "timeout": "10s"}
	}`, alg))
}

// start runs the service's handler on rdb behind a loopback HTTP server.
func start(t *testing.T, rdb redis.Scripter, cfg Config) client {
	t.Helper()
	h, err := NewHandler(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return client{t: t, url: srv.URL}
}

// The acceptance test: the service with the middleware on a real
// redis-server, driven over HTTP, deciding by the server's clock.
func TestServiceOnRealRedis(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client(t)
	// The test's HTTP client is the service's proxy: the clients are told
	// apart by X-Forwarded-For.
	c := start(t, rdb, Config{Policies: testPolicies(t, ratelimit.SlidingLog), TrustedProxies: []string{"127.0.0.1/32", "::1/128"}})
	as := func(ip string) []string { return []string{"X-Forwarded-For", ip} }

	t.Run("login: 5 a minute per client IP, then 429", func(t *testing.T) {
		for i := int64(1); i <= 5; i++ {
			r := c.do("POST", "/login", nil, as("203.0.113.7")...)
			if r.status != 200 || r.body != "welcome\n" {
				t.Fatalf("login %d: %d %q; want 200", i, r.status, r.body)
			}
			q, w, rem, reset := fields(t, fmt.Sprintf("login %d", i), "login", r)
			if q != 5 || w != 60 || rem != 5-i || reset < 1 || reset > 60 || r.retry != "" {
				t.Fatalf("login %d: q=%d w=%d r=%d t=%d Retry-After %q; want q=5 w=60 r=%d t in [1, 60], no Retry-After",
					i, q, w, rem, reset, r.retry, 5-i)
			}
		}
		r := c.do("POST", "/login", nil, as("203.0.113.7")...)
		retry := retryAfter(t, "login 6", r, 60)
		if _, _, rem, reset := fields(t, "login 6", "login", r); rem != 0 || reset < retry {
			t.Fatalf("login 6: r=%d t=%d; want r=0 and t >= Retry-After %d", rem, reset, retry)
		}
		// forging a hop left of the one the proxy wrote changes nothing
		retryAfter(t, "login with a forged hop", c.do("POST", "/login", nil, as("6.6.6.6, 203.0.113.7")...), 60)
		// another client is untouched
		if r := c.do("POST", "/login", nil, as("203.0.113.8")...); r.status != 200 {
			t.Fatalf("another client: %d; want 200", r.status)
		}
	})

	t.Run("keys live in Redis under the policy's namespace, with a TTL", func(t *testing.T) {
		ctx := context.Background()
		keys, err := rdb.Keys(ctx, "rl:login:*").Result()
		if err != nil || len(keys) != 2 {
			t.Fatalf("KEYS rl:login:* = %q, %v; want one per client", keys, err)
		}
		for _, k := range keys {
			if !strings.Contains(k, "{ip:203.0.113.") {
				t.Errorf("key %q does not carry the client IP as its subject", k)
			}
			if ttl, err := rdb.PTTL(ctx, k).Result(); err != nil || ttl <= 0 || ttl > time.Minute {
				t.Errorf("PTTL %s = %v, %v; want in (0, 1m]", k, ttl, err)
			}
		}
	})

	t.Run("upload costs a unit per KiB", func(t *testing.T) {
		r := c.do("POST", "/upload", make([]byte, 3000), "X-API-Key", "k1")
		if _, _, rem, _ := fields(t, "upload 3000 bytes", "upload", r); r.status != 200 || rem != 7 {
			t.Fatalf("upload of 3000 bytes: %d, r=%d; want 200, r=7", r.status, rem)
		}
		r = c.do("POST", "/upload", make([]byte, 8*1024), "X-API-Key", "k1")
		retryAfter(t, "upload of 8 KiB with 7 left", r, 3600)
		if r := c.do("POST", "/upload", make([]byte, 11*1024), "X-API-Key", "k2"); r.status != 429 || r.retry != "" {
			t.Fatalf("upload of 11 KiB, above the capacity: %d, Retry-After %q; want 429 without Retry-After", r.status, r.retry)
		}
	})

	t.Run("report waits for the upstream instead of failing", func(t *testing.T) {
		var wg sync.WaitGroup
		statuses := make([]int, 4)
		for i := range statuses {
			wg.Go(func() { statuses[i] = c.do("GET", "/report", nil).status })
		}
		wg.Wait()
		for i, s := range statuses {
			if s != 200 {
				t.Errorf("report %d: %d; want 200 after waiting", i+1, s)
			}
		}
	})

	t.Run("healthz is not limited", func(t *testing.T) {
		for i := range 20 {
			if r := c.do("GET", "/healthz", nil); r.status != 200 || r.policy != "" {
				t.Fatalf("healthz %d: %d, RateLimit-Policy %q; want 200 without rate-limit headers", i+1, r.status, r.policy)
			}
		}
	})
}

// Swapping search's algorithm is a config change; every algorithm gives
// the same contract over HTTP. A client clock keeps the requests in one
// instant, so approximate algorithms give exact figures too.
func TestServiceEveryAlgorithm(t *testing.T) {
	srv := testredis.Start(t)
	rdb := srv.Client(t)
	for _, a := range ratelimit.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			p := testPolicies(t, a)
			s := p["search"]
			s.Prefix = "alg:" + string(a) + ":" // each subtest on fresh keys
			p["search"] = s
			clock := conformance.NewClock(conformance.Epoch)
			c := start(t, rdb, Config{Policies: p, LimiterOptions: []ratelimit.Option{ratelimit.WithClock(clock)}})
			for i := int64(1); i <= 3; i++ {
				r := c.do("GET", "/search?q=x", nil, "X-API-Key", "k1")
				q, w, rem, _ := fields(t, fmt.Sprintf("search %d", i), "search", r)
				if r.status != 200 || q != 3 || w != 60 || rem != 3-i {
					t.Fatalf("search %d: %d q=%d w=%d r=%d; want 200 q=3 w=60 r=%d", i, r.status, q, w, rem, 3-i)
				}
			}
			r := c.do("GET", "/search?q=x", nil, "X-API-Key", "k1")
			retryAfter(t, "search 4", r, 120) // the sliding counter's can reach 2 x Window
			if _, _, rem, _ := fields(t, "search 4", "search", r); rem != 0 {
				t.Fatalf("search 4: r=%d; want 0", rem)
			}
			if r := c.do("GET", "/search?q=x", nil, "X-API-Key", "k2"); r.status != 200 {
				t.Fatalf("another API key: %d; want 200", r.status)
			}
		})
	}
}

// With a client clock the figures are exact: Retry-After is honest, and
// waiting it lets the same request pass.
func TestServiceExactHeaders(t *testing.T) {
	srv := testredis.Start(t)
	clock := conformance.NewClock(conformance.Epoch)
	c := start(t, srv.Client(t), Config{Policies: testPolicies(t, ratelimit.SlidingLog),
		LimiterOptions: []ratelimit.Option{ratelimit.WithClock(clock)}})
	for i := range 5 {
		if r := c.do("POST", "/login", nil); r.status != 200 {
			t.Fatalf("login %d: %d", i+1, r.status)
		}
	}
	clock.Advance(10*time.Second + 200*time.Millisecond)
	r := c.do("POST", "/login", nil)
	if r.status != 429 || r.retry != "50" || r.policy != `"login";q=5;w=60` || r.rateLimit != `"login";r=0;t=50` {
		t.Fatalf("login 6: %d, Retry-After %q, %q, %q; want 429, 50 (49.8s rounded up), q=5 w=60, r=0 t=50",
			r.status, r.retry, r.policy, r.rateLimit)
	}
	clock.Advance(49 * time.Second)
	if r := c.do("POST", "/login", nil); r.status != 429 || r.retry != "1" {
		t.Fatalf("0.8s before: %d, Retry-After %q; want 429, 1", r.status, r.retry)
	}
	clock.Advance(800 * time.Millisecond)
	if r := c.do("POST", "/login", nil); r.status != 200 || r.rateLimit != `"login";r=4;t=60` {
		t.Fatalf("after Retry-After: %d, %q; want 200, r=4 t=60 (the 5 units of t0 left together)", r.status, r.rateLimit)
	}
}

func TestDefaultPolicies(t *testing.T) {
	p, err := ratelimit.ParsePolicies(DefaultPolicies)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"login", "search", "upload", "upstream"} {
		if _, ok := p[name]; !ok {
			t.Errorf("policies.json has no %q policy", name)
		}
	}
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	if _, err := NewHandler(rdb, Config{Policies: p}); err != nil {
		t.Fatal(err)
	}
	delete(p, "upstream")
	if _, err := NewHandler(rdb, Config{Policies: p}); err == nil || !strings.Contains(err.Error(), `"upstream"`) {
		t.Fatalf("NewHandler without an upstream policy: %v; want an error naming it", err)
	}
}

// The program itself: flags, the embedded miniredis, serving, shutdown.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	var logs bytes.Buffer
	go func() {
		errc <- run(ctx, []string{"-listen", "127.0.0.1:0"}, &logs, func(addr string) { addrc <- addr })
	}()
	var c client
	select {
	case addr := <-addrc:
		c = client{t: t, url: "http://" + addr}
	case err := <-errc:
		t.Fatalf("run: %v", err)
	}
	if r := c.do("GET", "/healthz", nil); r.status != 200 {
		t.Fatalf("healthz: %d", r.status)
	}
	r := c.do("POST", "/login", nil)
	if _, _, rem, _ := fields(t, "login", "login", r); r.status != 200 || rem != 4 {
		t.Fatalf("login: %d r=%d; want 200 r=4 with the built-in policies", r.status, rem)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("run after cancel: %v (log: %s)", err, logs.String())
	}
	if err := run(context.Background(), []string{"-policies", "/nonexistent/policies.json"}, io.Discard, nil); err == nil {
		t.Fatal("run with a missing -policies file: no error")
	}
}

// TestMain lets TestStopSignals run this test binary as the service itself.
func TestMain(m *testing.M) {
	if os.Getenv("RATELIMIT_SERVICE_MAIN") == "1" {
		os.Args = []string{"service", "-listen", "127.0.0.1:0"}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestStopSignals runs the program as a process and stops it with each
// signal a user or a container runtime sends: it must shut down gracefully
// (exit 0, after Shutdown), not die of the signal.
func TestStopSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "RATELIMIT_SERVICE_MAIN=1")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			lines := make(chan string, 100)
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			var logs []string
			addr := ""
			for addr == "" {
				l, ok := <-lines
				if !ok {
					t.Fatalf("the service ended before listening; log:\n%s", strings.Join(logs, "\n"))
				}
				logs = append(logs, l)
				if _, rest, found := strings.Cut(l, "listening on http://"); found {
					addr, _, _ = strings.Cut(rest, " ")
				}
			}
			c := client{t: t, url: "http://" + addr}
			if r := c.do("GET", "/healthz", nil); r.status != 200 {
				t.Fatalf("healthz: %d", r.status)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			for l := range lines {
				logs = append(logs, l)
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("after %v: %v, want exit status 0; log:\n%s", sig, err, strings.Join(logs, "\n"))
			}
			if !strings.Contains(strings.Join(logs, "\n"), "shutting down") {
				t.Errorf("after %v: no graceful shutdown in the log:\n%s", sig, strings.Join(logs, "\n"))
			}
		})
	}
}
