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
	"path/filepath"
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
	"github.com/ratekit/ratelimit/strategy"
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
	p, err := parsePolicies([]byte(json))
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
func testPolicies(t *testing.T, alg strategy.Algorithm) ratelimit.Policies {
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
	for _, a := range strategy.Algorithms() {
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
	p, err := parsePolicies(DefaultPolicies)
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
		if path := os.Getenv("RATELIMIT_SERVICE_POLICIES"); path != "" {
			os.Args = append(os.Args, "-policies", path)
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// process is the program running as a process of its own (see TestMain).
type process struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string // its log, line by line; closed at its exit
	logs  []string    // the lines read so far
	c     client
}

// startProcess runs the program with env added to the environment and
// waits until it listens.
func startProcess(t *testing.T, env ...string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "RATELIMIT_SERVICE_MAIN=1"), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	p := &process{t: t, cmd: cmd, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	l := p.waitFor("listening on http://")
	_, rest, _ := strings.Cut(l, "listening on http://")
	addr, _, _ := strings.Cut(rest, " ")
	p.c = client{t: t, url: "http://" + addr}
	return p
}

// waitFor reads the log until a line holds s, and returns that line.
func (p *process) waitFor(s string) string {
	p.t.Helper()
	for l := range p.lines {
		p.logs = append(p.logs, l)
		if strings.Contains(l, s) {
			return l
		}
	}
	p.t.Fatalf("the service ended without logging %q; log:\n%s", s, p.log())
	return ""
}

func (p *process) log() string { return strings.Join(p.logs, "\n") }

// stop sends sig and checks that the program shuts down gracefully.
func (p *process) stop(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	for l := range p.lines {
		p.logs = append(p.logs, l)
	}
	if err := p.cmd.Wait(); err != nil {
		p.t.Errorf("after %v: %v, want exit status 0; log:\n%s", sig, err, p.log())
	}
	if !strings.Contains(p.log(), "shutting down") {
		p.t.Errorf("after %v: no graceful shutdown in the log:\n%s", sig, p.log())
	}
}

// TestStopSignals runs the program as a process and stops it with each
// signal a user or a container runtime sends: it must shut down gracefully
// (exit 0, after Shutdown), not die of the signal.
func TestStopSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			p := startProcess(t)
			if r := p.c.do("GET", "/healthz", nil); r.status != 200 {
				t.Fatalf("healthz: %d", r.status)
			}
			p.stop(sig)
		})
	}
}

// servicePolicies is a policy file with login's limit set to loginLimit.
func servicePolicies(loginLimit int) string {
	return fmt.Sprintf(`{
		"login":    {"algorithm": "sliding_log", "limit": %d, "window": "1m", "timeout": "10s"},
		"search":   {"algorithm": "gcra", "limit": 3, "window": "1m", "timeout": "10s"},
		"upload":   {"algorithm": "sliding_log", "limit": 10, "window": "1h", "timeout": "10s"},
		"upstream": {"algorithm": "sliding_log", "limit": 2, "window": "200ms", "timeout": "10s"}
	}`, loginLimit)
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// loginQ makes one login and returns its status and the policy's q.
func loginQ(t *testing.T, c client, label string) (int, int64) {
	t.Helper()
	r := c.do("POST", "/login", nil)
	q, _, _, _ := fields(t, label, "login", r)
	return r.status, q
}

// The test of hot reload: the program runs as a process; a SIGHUP
// after its policy file changed puts the new limit in force at once, the
// units spent before still counting; a bad file changes nothing and the log
// says why.
func TestReloadOnSIGHUP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.json")
	writeFile(t, path, servicePolicies(2))
	p := startProcess(t, "RATELIMIT_SERVICE_POLICIES="+path)

	for i := 1; i <= 2; i++ {
		if st, q := loginQ(t, p.c, fmt.Sprintf("login %d", i)); st != 200 || q != 2 {
			t.Fatalf("login %d: %d q=%d; want 200 q=2", i, st, q)
		}
	}
	if st, q := loginQ(t, p.c, "login 3"); st != 429 || q != 2 {
		t.Fatalf("login 3: %d q=%d; want 429 q=2", st, q)
	}

	writeFile(t, path, servicePolicies(4))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if l := p.waitFor("SIGHUP:"); !strings.Contains(l, "reloaded") || !strings.Contains(l, "changed login") {
		t.Fatalf("after SIGHUP: log %q; want it to say login changed", l)
	}
	// 4 a minute now, of which the 2 spent still count
	for i := 3; i <= 4; i++ {
		if st, q := loginQ(t, p.c, fmt.Sprintf("login %d after the reload", i)); st != 200 || q != 4 {
			t.Fatalf("login %d after the reload: %d q=%d; want 200 q=4", i, st, q)
		}
	}
	if st, q := loginQ(t, p.c, "login 5 after the reload"); st != 429 || q != 4 {
		t.Fatalf("login 5 after the reload: %d q=%d; want 429 q=4", st, q)
	}

	for _, bad := range []struct{ name, data, why string }{
		{"invalid limit", strings.Replace(servicePolicies(9), `"limit": 9`, `"limit": -9`, 1), `field "limit"`},
		{"not JSON", `{"login": `, "invalid JSON"},
		{"a policy missing", `{"login": {"algorithm": "sliding_log", "limit": 9, "window": "1m"}}`, `"search" is missing`},
	} {
		writeFile(t, path, bad.data)
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if l := p.waitFor("SIGHUP:"); !strings.Contains(l, "keeping the policies in force") || !strings.Contains(l, bad.why) {
			t.Fatalf("SIGHUP with a bad file (%s): log %q; want it to keep the policies and say %s", bad.name, l, bad.why)
		}
		if st, q := loginQ(t, p.c, "login after a bad reload"); st != 429 || q != 4 {
			t.Fatalf("login after a bad reload (%s): %d q=%d; want 429 q=4, the policies kept", bad.name, st, q)
		}
	}
	p.stop(syscall.SIGTERM)
}

// Reload in process, as the SIGHUP handler calls it, on a real Redis:
// every route follows it, /report included.
func TestServiceReload(t *testing.T) {
	srv := testredis.Start(t)
	p := testPolicies(t, ratelimit.SlidingLog)
	svc, err := NewService(srv.Client(t), Config{Policies: p})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(svc)
	t.Cleanup(hs.Close)
	c := client{t: t, url: hs.URL}
	for i := range 3 {
		if r := c.do("GET", "/search", nil, "X-API-Key", "k1"); r.status != 200 {
			t.Fatalf("search %d: %d", i+1, r.status)
		}
	}
	retryAfter(t, "search 4", c.do("GET", "/search", nil, "X-API-Key", "k1"), 60)

	next := testPolicies(t, ratelimit.SlidingLog)
	s := next["search"]
	s.Limit = 4
	next["search"] = s
	changes, err := svc.Reload(next)
	if err != nil {
		t.Fatal(err)
	}
	if got := changes.String(); got != "changed search" {
		t.Errorf("Reload: changes %q; want %q", got, "changed search")
	}
	r := c.do("GET", "/search", nil, "X-API-Key", "k1")
	if q, _, rem, _ := fields(t, "search after Reload", "search", r); r.status != 200 || q != 4 || rem != 0 {
		t.Fatalf("search after Reload to 4: %d q=%d r=%d; want 200 q=4 r=0 (3 spent before)", r.status, q, rem)
	}
	// a bad reload changes nothing
	delete(next, "upstream")
	if _, err := svc.Reload(next); err == nil || !strings.Contains(err.Error(), `"upstream"`) {
		t.Fatalf("Reload without upstream: %v; want an error naming it", err)
	}
	if r := c.do("GET", "/report", nil); r.status != 200 {
		t.Fatalf("report after a refused Reload: %d", r.status)
	}
	if _, err := svc.ReloadFile(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("ReloadFile of a missing file: no error")
	}
}
