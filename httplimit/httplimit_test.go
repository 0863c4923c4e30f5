package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/httplimit"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// local returns an in-process limiter on a manual clock.
func local(t *testing.T, cfg ratelimit.Config) (*ratelimit.Limiter, *conformance.Clock) {
	t.Helper()
	if cfg.Algorithm == "" {
		cfg.Algorithm = ratelimit.SlidingLog
	}
	clock := conformance.NewClock(conformance.Epoch)
	l, err := ratelimit.New(nil, cfg, ratelimit.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	return l, clock
}

func handler(t *testing.T, l httplimit.Limiter, opts ...httplimit.Option) http.Handler {
	t.Helper()
	m, err := httplimit.New(l, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m.Handler(ok)
}

type req struct {
	remote  string
	headers map[string]string
}

func do(h http.Handler, q req) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = q.remote
	if r.RemoteAddr == "" {
		r.RemoteAddr = "203.0.113.7:4711"
	}
	for k, v := range q.headers {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// want is what a response must say; an empty header value means absent.
type want struct {
	status                    int
	policy, rateLimit, retry  string
	legacyLimit, legacyRemain string
	legacyReset               string
}

func check(t *testing.T, label string, w *httptest.ResponseRecorder, wt want) {
	t.Helper()
	if w.Code != wt.status {
		t.Errorf("%s: status %d; want %d (body %q)", label, w.Code, wt.status, w.Body.String())
	}
	for _, h := range []struct{ name, want string }{
		{"RateLimit-Policy", wt.policy}, {"RateLimit", wt.rateLimit}, {"Retry-After", wt.retry},
		{"X-RateLimit-Limit", wt.legacyLimit}, {"X-RateLimit-Remaining", wt.legacyRemain}, {"X-RateLimit-Reset", wt.legacyReset},
	} {
		if got := w.Header().Get(h.name); got != h.want {
			t.Errorf("%s: %s = %q; want %q", label, h.name, got, h.want)
		}
	}
}

func TestHeadersAllowedAndDenied(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprintf("legacy=%v", legacy), func(t *testing.T) {
			l, clock := local(t, ratelimit.Config{Name: "login", Limit: 2, Window: time.Minute})
			var opts []httplimit.Option
			if legacy {
				opts = append(opts, httplimit.WithLegacyHeaders())
			}
			h := handler(t, l, opts...)
			lg := func(limit, remain, reset string) (string, string, string) {
				if !legacy {
					return "", "", ""
				}
				return limit, remain, reset
			}
			w1 := want{status: 200, policy: `"login";q=2;w=60`, rateLimit: `"login";r=1;t=60`}
			w1.legacyLimit, w1.legacyRemain, w1.legacyReset = lg("2", "1", "60")
			check(t, "request 1", do(h, req{}), w1)

			clock.Advance(10500 * time.Millisecond)
			w2 := want{status: 200, policy: `"login";q=2;w=60`, rateLimit: `"login";r=0;t=60`}
			w2.legacyLimit, w2.legacyRemain, w2.legacyReset = lg("2", "0", "60")
			check(t, "request 2", do(h, req{}), w2)

			// the oldest unit leaves in 49.5s: Retry-After rounds up, and t
			// says the same (draft-11 section 6), not the 60s to full capacity
			w3 := want{status: 429, policy: `"login";q=2;w=60`, rateLimit: `"login";r=0;t=50`, retry: "50"}
			w3.legacyLimit, w3.legacyRemain, w3.legacyReset = lg("2", "0", "50")
			check(t, "request 3", do(h, req{}), w3)

			clock.Advance(49 * time.Second) // 0.5s to go: still 1 whole second
			w4 := want{status: 429, policy: `"login";q=2;w=60`, rateLimit: `"login";r=0;t=1`, retry: "1"}
			w4.legacyLimit, w4.legacyRemain, w4.legacyReset = lg("2", "0", "1")
			check(t, "request 4", do(h, req{}), w4)

			clock.Advance(500 * time.Millisecond)
			w5 := want{status: 200, policy: `"login";q=2;w=60`, rateLimit: `"login";r=0;t=60`}
			w5.legacyLimit, w5.legacyRemain, w5.legacyReset = lg("2", "0", "60")
			check(t, "request 5, after Retry-After", do(h, req{}), w5)
		})
	}
}

func TestHeadersEveryAlgorithm(t *testing.T) {
	for _, a := range strategy.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			cfg := ratelimit.Config{Name: "search", Algorithm: a, Limit: 10, Window: 1500 * time.Millisecond, Burst: 20}
			l, _ := local(t, cfg)
			h := handler(t, l)
			w := do(h, req{})
			res, err := l.Peek(context.Background(), "other")
			if err != nil {
				t.Fatal(err)
			}
			q := res.Limit // 10, or 20 where Burst counts
			wsec := int64(math.Ceil(1.5 * float64(q) / 10))
			check(t, "first request", w, want{status: 200,
				policy:    fmt.Sprintf(`"search";q=%d;w=%d`, q, wsec),
				rateLimit: w.Header().Get("RateLimit")})
			if want := fmt.Sprintf(`"search";r=%d;t=`, q-1); !strings.HasPrefix(w.Header().Get("RateLimit"), want) {
				t.Errorf("RateLimit = %q; want it to start %q", w.Header().Get("RateLimit"), want)
			}
			for i := int64(1); i < q; i++ {
				do(h, req{})
			}
			w = do(h, req{})
			ra := w.Header().Get("Retry-After")
			if w.Code != 429 || ra == "" || !strings.HasPrefix(w.Header().Get("RateLimit"), `"search";r=0;t=`) {
				t.Errorf("request %d: %d, Retry-After %q, RateLimit %q; want 429 with Retry-After and r=0",
					q+1, w.Code, ra, w.Header().Get("RateLimit"))
			}
			// draft-11 section 6: Retry-After must not end before the
			// effective window, so a denial's t is Retry-After itself
			if want := `"search";r=0;t=` + ra; w.Header().Get("RateLimit") != want {
				t.Errorf("denial: RateLimit %q with Retry-After %q; want %q", w.Header().Get("RateLimit"), ra, want)
			}
		})
	}
}

func TestCostAboveCapacityHasNoRetryAfter(t *testing.T) {
	l, _ := local(t, ratelimit.Config{Name: "upload", Limit: 2, Window: time.Minute})
	h := handler(t, l, httplimit.WithCost(func(r *http.Request) int64 { return 3 }))
	w := do(h, req{})
	check(t, "cost 3 of 2", w, want{status: 429, policy: `"upload";q=2;w=60`, rateLimit: `"upload";r=2;t=0`})
	if !strings.Contains(w.Body.String(), "capacity") {
		t.Errorf("body %q; want it to say the request exceeds the capacity", w.Body.String())
	}
}

func TestCost(t *testing.T) {
	l, _ := local(t, ratelimit.Config{Name: "upload", Limit: 10, Window: time.Minute})
	h := handler(t, l, httplimit.WithCost(func(r *http.Request) int64 {
		var n int64
		fmt.Sscan(r.Header.Get("X-Units"), &n)
		return n
	}))
	check(t, "cost 4", do(h, req{headers: map[string]string{"X-Units": "4"}}),
		want{status: 200, policy: `"upload";q=10;w=60`, rateLimit: `"upload";r=6;t=60`})
	check(t, "cost 6", do(h, req{headers: map[string]string{"X-Units": "6"}}),
		want{status: 200, policy: `"upload";q=10;w=60`, rateLimit: `"upload";r=0;t=60`})
	check(t, "cost 1", do(h, req{headers: map[string]string{"X-Units": "1"}}),
		want{status: 429, policy: `"upload";q=10;w=60`, rateLimit: `"upload";r=0;t=60`, retry: "60"})
	// a negative cost is the program's error, not the client's: 500
	if w := do(h, req{headers: map[string]string{"X-Units": "-1"}}); w.Code != 500 || w.Header().Get("RateLimit") != "" {
		t.Errorf("cost -1: %d, RateLimit %q; want 500 without rate-limit headers", w.Code, w.Header().Get("RateLimit"))
	}
}

// status sends the requests in order and returns their status codes.
func status(h http.Handler, qs ...req) []int {
	var out []int
	for _, q := range qs {
		out = append(out, do(h, q).Code)
	}
	return out
}

func TestKeys(t *testing.T) {
	xff := func(remote, v string) req {
		return req{remote: remote, headers: map[string]string{"X-Forwarded-For": v}}
	}
	apiKey := func(remote, v string) req {
		return req{remote: remote, headers: map[string]string{"X-Api-Key": v}}
	}
	for _, c := range []struct {
		name string
		opts []httplimit.Option
		reqs []req
		want []int
	}{
		{"client IP, port ignored", nil,
			[]req{{remote: "203.0.113.7:1"}, {remote: "203.0.113.7:2"}, {remote: "203.0.113.8:1"}},
			[]int{200, 429, 200}},
		{"IPv6 clients by /64", nil,
			[]req{{remote: "[2001:db8:1:2::1]:1"}, {remote: "[2001:db8:1:2:ffff::9]:1"}, {remote: "[2001:db8:1:3::1]:1"}},
			[]int{200, 429, 200}},
		{"IPv6 clients by /128", []httplimit.Option{httplimit.WithIPv6Prefix(128)},
			[]req{{remote: "[2001:db8:1:2::1]:1"}, {remote: "[2001:db8:1:2::2]:1"}},
			[]int{200, 200}},
		{"spoofing: forwarding headers of an untrusted peer are ignored", nil,
			[]req{xff("203.0.113.7:1", "198.51.100.1"), xff("203.0.113.7:1", "198.51.100.2")},
			[]int{200, 429}},
		{"spoofing: an untrusted peer behind a configured proxy list", []httplimit.Option{httplimit.WithTrustedProxies("X-Forwarded-For", "10.0.0.0/8")},
			[]req{xff("203.0.113.7:1", "198.51.100.1"), xff("203.0.113.7:1", "198.51.100.2")},
			[]int{200, 429}},
		{"spoofing: a client prepending hops behind a trusted proxy", []httplimit.Option{httplimit.WithTrustedProxies("X-Forwarded-For", "10.0.0.0/8")},
			[]req{xff("10.0.0.1:1", "198.51.100.1"), xff("10.0.0.1:1", "6.6.6.6, 198.51.100.1"), xff("10.0.0.1:1", "10.1.1.1, 198.51.100.1")},
			[]int{200, 429, 429}},
		{"clients behind a trusted proxy are apart", []httplimit.Option{httplimit.WithTrustedProxies("x-forwarded-for", "10.0.0.1")},
			[]req{xff("10.0.0.1:1", "198.51.100.1"), xff("10.0.0.1:1", "198.51.100.2"), {remote: "10.0.0.1:1"}},
			[]int{200, 200, 200}},
		{"header key, falling back to the client IP", []httplimit.Option{httplimit.WithKeyHeader("X-Api-Key")},
			[]req{apiKey("203.0.113.7:1", "k1"), apiKey("203.0.113.8:1", "k1"), apiKey("203.0.113.7:1", "k2"),
				{remote: "203.0.113.7:1"}, {remote: "203.0.113.7:1"}},
			[]int{200, 429, 200, 200, 429}},
		{"header values never reach the IP subjects", []httplimit.Option{httplimit.WithKeyHeader("X-Api-Key")},
			[]req{{remote: "203.0.113.7:1"}, apiKey("203.0.113.9:1", "ip:203.0.113.7"), apiKey("203.0.113.9:1", "203.0.113.7")},
			[]int{200, 200, 200}},
		{"key function", []httplimit.Option{httplimit.WithKeyFunc(func(r *http.Request) (string, error) {
			return "tenant:" + r.Header.Get("X-Api-Key"), nil
		})},
			[]req{apiKey("203.0.113.7:1", "a"), apiKey("203.0.113.8:1", "a"), apiKey("203.0.113.7:1", "b")},
			[]int{200, 429, 200}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, _ := local(t, ratelimit.Config{Name: "k", Limit: 1, Window: time.Minute})
			if got := status(handler(t, l, c.opts...), c.reqs...); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("statuses %v; want %v", got, c.want)
			}
		})
	}
}

// failing is a Limiter whose store fails.
type failing struct{ err error }

func (f failing) AllowN(context.Context, string, int64) (ratelimit.Result, error) {
	return ratelimit.Result{}, f.err
}
func (failing) Config() ratelimit.Config {
	return ratelimit.Config{Name: "f", Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Second}
}

func TestErrors(t *testing.T) {
	backend := fmt.Errorf("%w: connection refused", strategy.ErrBackend)
	keyFails := httplimit.WithKeyFunc(func(*http.Request) (string, error) { return "", errors.New("no user") })
	var seen error
	recordErr := httplimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
		seen = err
		w.WriteHeader(http.StatusUnauthorized)
	})
	localLim, _ := local(t, ratelimit.Config{Name: "x", Limit: 1, Window: time.Second})
	for _, c := range []struct {
		name   string
		l      httplimit.Limiter
		opts   []httplimit.Option
		remote string
		status int
		is     error
	}{
		{"backend error: 503", failing{backend}, nil, "", 503, nil},
		{"other error: 500", failing{errors.New("bug")}, nil, "", 500, nil},
		{"backend error, pass through", failing{backend}, []httplimit.Option{httplimit.WithErrorHandler(httplimit.PassThrough)}, "", 200, nil},
		{"key error: 500", localLim, []httplimit.Option{keyFails}, "", 500, nil},
		{"RemoteAddr not an IP: 500", localLim, nil, "@", 500, nil},
		{"key error to a custom handler", localLim, []httplimit.Option{keyFails, recordErr}, "", 401, httplimit.ErrKey},
		{"backend error to a custom handler", failing{backend}, []httplimit.Option{recordErr}, "", 401, strategy.ErrBackend},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen = nil
			w := do(handler(t, c.l, c.opts...), req{remote: c.remote})
			if w.Code != c.status {
				t.Errorf("status %d; want %d", w.Code, c.status)
			}
			for _, h := range []string{"RateLimit", "RateLimit-Policy", "Retry-After"} {
				if v := w.Header().Get(h); v != "" {
					t.Errorf("%s = %q; want no rate-limit header on an undecided request", h, v)
				}
			}
			if c.is != nil && !errors.Is(seen, c.is) {
				t.Errorf("the error handler saw %v; want one wrapping %v", seen, c.is)
			}
		})
	}
}

// A Limiter built by New does not fail with Redis: its failure policy
// decides, and the middleware follows, without a RateLimit field.
func TestDegraded(t *testing.T) {
	for _, c := range []struct {
		policy ratelimit.FailurePolicy
		want   want
	}{
		{ratelimit.FailOpen, want{status: 200, policy: `"d";q=5;w=60`}},
		{ratelimit.FailClosed, want{status: 429, policy: `"d";q=5;w=60`, retry: "<any>"}},
		{ratelimit.FailLocal, want{status: 200, policy: `"d";q=5;w=60`}},
	} {
		t.Run(string(c.policy), func(t *testing.T) {
			mr := miniredis.RunT(t)
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
			t.Cleanup(func() { rdb.Close() })
			l, err := ratelimit.New(rdb, ratelimit.Config{Name: "d", Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Minute,
				OnFailure: c.policy, LocalShare: 0.4})
			if err != nil {
				t.Fatal(err)
			}
			mr.Close()
			var degraded bool
			m, err := httplimit.New(l)
			if err != nil {
				t.Fatal(err)
			}
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				res, _ := httplimit.ResultFromContext(r.Context())
				degraded = res.Degraded
			}))
			w := do(h, req{})
			if c.want.retry == "<any>" {
				if n, err := fmt.Sscan(w.Header().Get("Retry-After"), new(int)); n != 1 || err != nil || w.Header().Get("Retry-After") == "0" {
					t.Errorf("Retry-After = %q; want a whole number of seconds >= 1", w.Header().Get("Retry-After"))
				}
				c.want.retry = w.Header().Get("Retry-After")
			} else if !degraded {
				t.Errorf("the handler saw a Result not marked Degraded")
			}
			check(t, string(c.policy), w, c.want)
		})
	}
}

func TestResultFromContextAndDenyHandler(t *testing.T) {
	l, _ := local(t, ratelimit.Config{Name: "ctx", Limit: 1, Window: time.Second})
	var inNext, inDeny ratelimit.Result
	m, err := httplimit.New(l, httplimit.WithDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inDeny, _ = httplimit.ResultFromContext(r.Context())
		if w.Header().Get("Retry-After") != "1" {
			t.Errorf("deny handler: Retry-After = %q; want it set to 1 before the handler runs", w.Header().Get("Retry-After"))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"slow down"}`)
	})))
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inNext, _ = httplimit.ResultFromContext(r.Context())
	}))
	do(h, req{})
	w := do(h, req{})
	if !inNext.Allowed || inNext.Limit != 1 {
		t.Errorf("next saw %+v; want the allowed Result", inNext)
	}
	if inDeny.Allowed || inDeny.RetryAfter != time.Second {
		t.Errorf("deny handler saw %+v; want the denied Result", inDeny)
	}
	if w.Code != 429 || w.Body.String() != `{"error":"slow down"}` {
		t.Errorf("deny: %d %q; want the custom deny handler's answer", w.Code, w.Body.String())
	}
	if _, ok := httplimit.ResultFromContext(context.Background()); ok {
		t.Error("ResultFromContext on a bare context reported a Result")
	}
}

func TestPolicyName(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"", `"default";q=1;w=1`},
		{`a"b\c`, `"a\"b\\c";q=1;w=1`},
		{"login v2", `"login v2";q=1;w=1`},
	} {
		l, _ := local(t, ratelimit.Config{Name: c.name, Limit: 1, Window: time.Second})
		if got := do(handler(t, l), req{}).Header().Get("RateLimit-Policy"); got != c.want {
			t.Errorf("Name %q: RateLimit-Policy = %q; want %q", c.name, got, c.want)
		}
	}
	for _, bad := range []string{"café", "a\nb", "tab\t"} {
		l, _ := local(t, ratelimit.Config{Name: bad, Limit: 1, Window: time.Second})
		if _, err := httplimit.New(l); !errors.Is(err, strategy.ErrInvalidOption) {
			t.Errorf("New with Name %q: %v; want ErrInvalidOption", bad, err)
		}
	}
}

func TestNewValidates(t *testing.T) {
	l, _ := local(t, ratelimit.Config{Limit: 1, Window: time.Second})
	for _, c := range []struct {
		name string
		l    httplimit.Limiter
		opts []httplimit.Option
		want string
	}{
		{"nil limiter", nil, nil, "limiter is nil"},
		{"bad CIDR", l, []httplimit.Option{httplimit.WithTrustedProxies("X-Forwarded-For", "10.0.0.0/8", "10.0.0/8")}, `"10.0.0/8"`},
		{"no header", l, []httplimit.Option{httplimit.WithTrustedProxies("", "10.0.0.0/8")}, "header"},
		{"IPv6 bits 0", l, []httplimit.Option{httplimit.WithIPv6Prefix(0)}, "bits"},
		{"IPv6 bits 129", l, []httplimit.Option{httplimit.WithIPv6Prefix(129)}, "bits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := httplimit.New(c.l, c.opts...)
			if !errors.Is(err, strategy.ErrInvalidOption) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v, %v; want ErrInvalidOption naming %s", m, err, c.want)
			}
		})
	}
}

// A request whose context has ended is not decided: the facade returns
// ctx's error (not strategy.ErrBackend), and the ErrorHandler gets it. The
// default answers a client that went away with 499 and no body, a request
// past its deadline with 503, and neither is reported as the store failing.
func TestCanceledRequest(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	l, err := ratelimit.New(rdb, ratelimit.Config{Name: "c", Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var seen error
	m, err := httplimit.New(l, httplimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
		seen = err
		httplimit.DefaultErrorHandler(w, r, next, err)
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		ctx      func() (context.Context, context.CancelFunc)
		want     error
		wantCode int
		wantBody string
	}{
		{"canceled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled, httplimit.StatusClientClosedRequest, ""},
		{"deadline passed", func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		}, context.DeadlineExceeded, http.StatusServiceUnavailable, "request deadline exceeded\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			ctx, cancel := tc.ctx()
			defer cancel()
			r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
			w := httptest.NewRecorder()
			m.Handler(ok).ServeHTTP(w, r)
			if !errors.Is(seen, tc.want) || errors.Is(seen, strategy.ErrBackend) {
				t.Errorf("%s: error %v, want %v and not ErrBackend", tc.name, seen, tc.want)
			}
			if w.Code != tc.wantCode || w.Body.String() != tc.wantBody || w.Header().Get("RateLimit") != "" {
				t.Errorf("%s: status %d, body %q, RateLimit %q; want %d, %q, no header", tc.name, w.Code, w.Body.String(), w.Header().Get("RateLimit"), tc.wantCode, tc.wantBody)
			}
			if keys := mr.Keys(); len(keys) != 0 {
				t.Errorf("%s: keys %q; a request that was not decided must record nothing", tc.name, keys)
			}
		})
	}
}

// A Limiter without a failure policy (a bare strategy) wraps the request's
// own cancellation in strategy.ErrBackend: the default still sees that the
// request's context ended, and answers 499, not 503.
func TestDefaultErrorHandlerSeesTheRequestsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		err      error
		wantCode int
	}{
		{"canceled request, backend-wrapped", ctx, fmt.Errorf("%w: %w", strategy.ErrBackend, context.Canceled), httplimit.StatusClientClosedRequest},
		{"live request, backend-wrapped cancellation", context.Background(), fmt.Errorf("%w: %w", strategy.ErrBackend, context.Canceled), http.StatusServiceUnavailable},
		{"live request, backend failure", context.Background(), fmt.Errorf("%w: connection refused", strategy.ErrBackend), http.StatusServiceUnavailable},
		{"live request, other error", context.Background(), errors.New("boom"), http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil).WithContext(tc.ctx)
			w := httptest.NewRecorder()
			httplimit.DefaultErrorHandler(w, r, ok, tc.err)
			if w.Code != tc.wantCode {
				t.Errorf("%s: status %d, want %d", tc.name, w.Code, tc.wantCode)
			}
		})
	}
}
