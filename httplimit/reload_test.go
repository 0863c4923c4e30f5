package httplimit_test

import (
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/httplimit"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

func localSet(t testing.TB, p ratelimit.Policies) *ratelimit.Set {
	t.Helper()
	set, err := ratelimit.NewSet(nil, p, ratelimit.WithClock(conformance.NewClock(conformance.Epoch)))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func mustGetLimiter(t *testing.T, set *ratelimit.Set, name string) *ratelimit.Limiter {
	t.Helper()
	l, err := set.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func loginPolicy(limit int64) ratelimit.Policies {
	return ratelimit.Policies{
		"login": {Algorithm: ratelimit.SlidingLog, Limit: limit, Window: time.Minute},
		"other": {Algorithm: ratelimit.GCRA, Limit: 1, Window: time.Second},
	}
}

// A middleware built by NewForPolicy follows the Set's reloads: the new
// limit is enforced and announced from the next request on.
func TestNewForPolicyFollowsUpdate(t *testing.T) {
	set := localSet(t, loginPolicy(3))
	m, err := httplimit.NewForPolicy(set, "login")
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(ok)
	for i := 1; i <= 3; i++ {
		check(t, fmt.Sprintf("request %d", i), do(h, req{}), want{status: 200,
			policy: `"login";q=3;w=60`, rateLimit: fmt.Sprintf(`"login";r=%d;t=60`, 3-i)})
	}
	check(t, "request 4", do(h, req{}), want{status: 429, policy: `"login";q=3;w=60`, rateLimit: `"login";r=0;t=60`, retry: "60"})

	// a lower limit: denied at once; a higher one: a new twin, empty
	if err := set.Update(loginPolicy(5)); err != nil {
		t.Fatal(err)
	}
	check(t, "after raising to 5", do(h, req{}), want{status: 200, policy: `"login";q=5;w=60`, rateLimit: `"login";r=4;t=60`})
	if err := set.Update(loginPolicy(1)); err != nil {
		t.Fatal(err)
	}
	check(t, "after lowering to 1", do(h, req{}), want{status: 200, policy: `"login";q=1;w=60`, rateLimit: `"login";r=0;t=60`})
	check(t, "second after lowering to 1", do(h, req{}), want{status: 429, policy: `"login";q=1;w=60`, rateLimit: `"login";r=0;t=60`, retry: "60"})

	// an unchanged policy keeps its Limiter and its state
	if err := set.Update(loginPolicy(1)); err != nil { // the policies in force
		t.Fatal(err)
	}
	check(t, "after an Update that changes nothing", do(h, req{}), want{status: 429, policy: `"login";q=1;w=60`, rateLimit: `"login";r=0;t=60`, retry: "60"})

	// removed: the ErrorHandler, with Get's error
	oldLogin := weak.Make(mustGetLimiter(t, set, "login"))
	p := loginPolicy(1)
	delete(p, "login")
	if err := set.Update(p); err != nil {
		t.Fatal(err)
	}
	var got error
	m, err = httplimit.NewForPolicy(set, "other", httplimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
		got = err
		http.Error(w, "no policy", http.StatusInternalServerError)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if w := do(h, req{}); w.Code != 500 || w.Header().Get("RateLimit-Policy") != "" {
		t.Errorf("after login's removal: %d, RateLimit-Policy %q; want 500 without rate-limit headers", w.Code, w.Header().Get("RateLimit-Policy"))
	}
	// and the middleware lets the removed policy's Limiter go
	for i := 0; oldLogin.Value() != nil; i++ {
		if i == 100 {
			t.Fatal("the removed policy's Limiter is still reachable from the middleware after 100 collections")
		}
		runtime.GC()
	}
	runtime.KeepAlive(h) // the middleware lives on: only its cache may let go
	if err := set.Update(ratelimit.Policies{"login": p["other"]}); err != nil {
		t.Fatal(err)
	}
	if w := do(m.Handler(ok), req{}); w.Code != 500 || !errors.Is(got, strategy.ErrInvalidOption) || !strings.Contains(got.Error(), `"other"`) {
		t.Errorf("after other's removal: %d, error %v; want 500 and an error naming the policy", w.Code, got)
	}
}

func TestNewForPolicyValidates(t *testing.T) {
	set := localSet(t, loginPolicy(3))
	if _, err := httplimit.NewForPolicy(nil, "login"); !errors.Is(err, strategy.ErrInvalidOption) {
		t.Errorf("nil set: %v; want ErrInvalidOption", err)
	}
	if _, err := httplimit.NewForPolicy(set, "logn"); !errors.Is(err, strategy.ErrInvalidOption) || !strings.Contains(err.Error(), `"logn"`) {
		t.Errorf("unknown policy: %v; want an error naming it", err)
	}
	if _, err := httplimit.NewForPolicy(set, "login", httplimit.WithIPv6Prefix(0)); !errors.Is(err, strategy.ErrInvalidOption) {
		t.Errorf("invalid option: %v; want ErrInvalidOption", err)
	}
}

// Requests run while the Set is reloaded: each response carries the
// fields of one policy in force, and -race sees the middleware's cache.
func TestNewForPolicyConcurrentUpdates(t *testing.T) {
	set := localSet(t, loginPolicy(100))
	m, err := httplimit.NewForPolicy(set, "login")
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(ok)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				w := do(h, req{remote: fmt.Sprintf("203.0.113.%d:1", g)})
				if p := w.Header().Get("RateLimit-Policy"); p != `"login";q=100;w=60` && p != `"login";q=200;w=60` {
					t.Errorf("RateLimit-Policy %q; want q=100 or q=200", p)
					return
				}
			}
		})
	}
	for i := range 200 {
		if err := set.Update(loginPolicy(int64(100 * (1 + i%2)))); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
}

// The cost of following reloads: one Get per request.
func BenchmarkMiddleware(b *testing.B) {
	set := localSet(b, ratelimit.Policies{"login": {Algorithm: ratelimit.GCRA, Limit: 1 << 30, Window: time.Millisecond}})
	l, err := set.Get("login")
	if err != nil {
		b.Fatal(err)
	}
	fixed, err := httplimit.New(l)
	if err != nil {
		b.Fatal(err)
	}
	reloadable, err := httplimit.NewForPolicy(set, "login")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    *httplimit.Middleware
	}{{"New", fixed}, {"NewForPolicy", reloadable}} {
		b.Run(c.name, func(b *testing.B) {
			h := c.m.Handler(ok)
			b.ReportAllocs()
			for b.Loop() {
				do(h, req{})
			}
		})
	}
}
