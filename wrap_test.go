package ratelimit_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/httplimit"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
)

// userStrategy is a Strategy written outside this module: it validates
// nothing, does not say it honours contexts, and can be made to fail or
// hang, so that the facade's features must do all the work.
type userStrategy struct {
	inner strategy.Strategy
	calls atomic.Int64
	fail  atomic.Bool   // return a backend error
	hang  chan struct{} // when not nil, block until closed, ignoring ctx
	keys  sync.Map      // every key it was called with
}

func newUserStrategy(t *testing.T, lim strategy.Limit, clock strategy.Clock) *userStrategy {
	t.Helper()
	inner, err := slidinglog.NewLocal(lim, strategy.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	return &userStrategy{inner: inner}
}

func (u *userStrategy) call(key string) error {
	u.calls.Add(1)
	u.keys.Store(key, true)
	if u.hang != nil {
		<-u.hang
	}
	if u.fail.Load() {
		return errors.New("user store: connection refused")
	}
	return nil
}

func (u *userStrategy) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	if err := u.call(key); err != nil {
		return strategy.Result{}, err
	}
	return u.inner.AllowN(ctx, key, n)
}

func (u *userStrategy) Peek(ctx context.Context, key string) (strategy.Result, error) {
	if err := u.call(key); err != nil {
		return strategy.Result{}, err
	}
	return u.inner.Peek(ctx, key)
}

func (u *userStrategy) Reset(ctx context.Context, key string) error {
	if err := u.call(key); err != nil {
		return err
	}
	return u.inner.Reset(ctx, key)
}

func (u *userStrategy) Limit() strategy.Limit { return u.inner.Limit() }

func TestWrapValidates(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	u := newUserStrategy(t, strategy.PerMinute(3), clock)
	for _, c := range []struct {
		name string
		st   strategy.Strategy
		cfg  ratelimit.Config
		opts []ratelimit.Option
		want string
	}{
		{"nil strategy", nil, ratelimit.Config{}, nil, "strategy is nil"},
		{"a strategy field", u, ratelimit.Config{Limit: 5}, nil, "Limit must be zero"},
		{"FailLocal without a fallback", u, ratelimit.Config{OnFailure: ratelimit.FailLocal}, nil, "WithFallback"},
		{"bad timeout", u, ratelimit.Config{Timeout: -1}, nil, "Timeout"},
		{"bad mode", u, ratelimit.Config{Mode: "loud"}, nil, "Mode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ratelimit.Wrap(c.st, c.cfg, c.opts...)
			if !errors.Is(err, strategy.ErrInvalidOption) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrInvalidOption naming %s", err, c.want)
			}
			if n := strings.Count(err.Error(), "ratelimit:"); n != 1 {
				t.Errorf("err = %q has %d \"ratelimit:\" prefixes, want 1", err, n)
			}
		})
	}
}

// TestWrapUserStrategy checks that a user's own Strategy gets every feature
// of the facade: input validation, the Observer, the failure policies, the
// timeout and the breaker, the denial cache, Wait and httplimit.
func TestWrapUserStrategy(t *testing.T) {
	ctx := context.Background()
	lim := strategy.PerMinute(3)

	t.Run("decisions, validation and the Observer", func(t *testing.T) {
		clock := conformance.NewClock(conformance.Epoch)
		u := newUserStrategy(t, lim, clock)
		rec := &decisionLog{}
		l, err := ratelimit.Wrap(u, ratelimit.Config{Name: "mine"}, ratelimit.WithObserver(rec))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			r, err := l.Allow(ctx, "k")
			if err != nil || r.Allowed != (i < 3) || r.Degraded {
				t.Fatalf("Allow %d = %+v, %v; want allowed %v, not degraded", i, r, err, i < 3)
			}
		}
		if d := rec.last(t); d.Policy != "mine" || d.Op != "allow" || d.Result.Allowed {
			t.Errorf("last Decision = %+v, want policy mine, a denied allow", d)
		}
		if got := l.Config(); got.Limit != 3 || got.Window != time.Minute || got.Name != "mine" {
			t.Errorf("Config() = %+v, want the strategy's limit and the name", got)
		}
		calls := u.calls.Load()
		for _, bad := range []struct {
			key string
			n   int64
		}{{"", 1}, {"k", -1}, {"k", strategy.MaxUnits + 1}} {
			if _, err := l.AllowN(ctx, bad.key, bad.n); err == nil {
				t.Errorf("AllowN(%q, %d): err = nil, want an error", bad.key, bad.n)
			}
		}
		if got := u.calls.Load(); got != calls {
			t.Errorf("the strategy was called %d times with invalid input, want 0", got-calls)
		}
	})

	t.Run("failure policies", func(t *testing.T) {
		for _, c := range []struct {
			policy  ratelimit.FailurePolicy
			allowed bool
		}{{ratelimit.FailOpen, true}, {ratelimit.FailClosed, false}, {ratelimit.FailLocal, true}} {
			clock := conformance.NewClock(conformance.Epoch)
			u := newUserStrategy(t, lim, clock)
			fallback, err := slidinglog.NewLocal(strategy.PerMinute(1), strategy.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			l, err := ratelimit.Wrap(u, ratelimit.Config{OnFailure: c.policy}, ratelimit.WithFallback(fallback))
			if err != nil {
				t.Fatal(err)
			}
			u.fail.Store(true)
			r, err := l.Allow(ctx, "k")
			if err != nil || !r.Degraded || r.Allowed != c.allowed {
				t.Errorf("%s: Allow = %+v, %v; want degraded, allowed %v", c.policy, r, err, c.allowed)
			}
			if c.policy == ratelimit.FailLocal {
				// the fallback enforces its own limit of 1
				if r, _ := l.Allow(ctx, "k"); r.Allowed || !r.Degraded {
					t.Errorf("FailLocal: second Allow = %+v, want denied by the fallback", r)
				}
			}
		}
	})

	t.Run("timeout and breaker", func(t *testing.T) {
		clock := conformance.NewClock(conformance.Epoch)
		u := newUserStrategy(t, lim, clock)
		u.hang = make(chan struct{})
		defer close(u.hang)
		b, err := breaker.New(2, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		l, err := ratelimit.Wrap(u, ratelimit.Config{OnFailure: ratelimit.FailClosed, Timeout: 20 * time.Millisecond}, ratelimit.WithBreaker(b))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 { // each waits for the Timeout, then the policy decides
			if r, err := l.Allow(ctx, "k"); err != nil || !r.Degraded || r.Allowed {
				t.Fatalf("Allow %d on a hung strategy = %+v, %v; want a degraded denial", i, r, err)
			}
		}
		if s := b.State(); s != breaker.Open {
			t.Fatalf("breaker %s after 2 timeouts, want open", s)
		}
		calls := u.calls.Load()
		if r, _ := l.Allow(ctx, "k"); !r.Degraded || r.Allowed {
			t.Errorf("Allow with the breaker open = %+v, want a degraded denial", r)
		}
		if got := u.calls.Load(); got != calls {
			t.Errorf("the strategy was called with the breaker open")
		}
	})

	t.Run("denial cache", func(t *testing.T) {
		clock := conformance.NewClock(conformance.Epoch)
		u := newUserStrategy(t, lim, clock)
		rec := &decisionLog{}
		l, err := ratelimit.Wrap(u, ratelimit.Config{}, ratelimit.WithDenyCache(100), ratelimit.WithClock(clock), ratelimit.WithObserver(rec))
		if err != nil {
			t.Fatal(err)
		}
		for range 4 {
			l.Allow(ctx, "k")
		}
		calls := u.calls.Load()
		r, _ := l.Allow(ctx, "k")
		if r.Allowed || !rec.last(t).Cached || u.calls.Load() != calls {
			t.Errorf("Allow after a denial = %+v, cached %v, strategy called %d times; want a cached denial, no call",
				r, rec.last(t).Cached, u.calls.Load()-calls)
		}
	})

	t.Run("Wait", func(t *testing.T) {
		u := newUserStrategy(t, strategy.Limit{Limit: 1, Window: 20 * time.Millisecond}, nil)
		l, err := ratelimit.Wrap(u, ratelimit.Config{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 { // the 2nd and 3rd wait for the window
			if r, err := l.Wait(ctx, "k"); err != nil || !r.Allowed {
				t.Fatalf("Wait %d = %+v, %v; want allowed", i, r, err)
			}
		}
	})

	t.Run("httplimit", func(t *testing.T) {
		clock := conformance.NewClock(conformance.Epoch)
		u := newUserStrategy(t, lim, clock)
		l, err := ratelimit.Wrap(u, ratelimit.Config{Name: "mine"})
		if err != nil {
			t.Fatal(err)
		}
		m, err := httplimit.New(l, httplimit.WithKeyHeader("X-Key"))
		if err != nil {
			t.Fatal(err)
		}
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		var codes []int
		for range 4 {
			req := httptest.NewRequest("GET", "/", nil)
			req.Header.Set("X-Key", "k")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			codes = append(codes, w.Code)
		}
		if codes[2] != http.StatusOK || codes[3] != http.StatusTooManyRequests {
			t.Errorf("status codes %v, want 3 OK then 429", codes)
		}
	})
}

// TestShadowMode checks that a policy in shadow mode decides and records as
// enforcement would but never denies: the Result, the Observer and
// httplimit say so.
func TestShadowMode(t *testing.T) {
	ctx := context.Background()
	clock := conformance.NewClock(conformance.Epoch)
	rec := &decisionLog{}
	cfg := ratelimit.Config{Name: "trial", Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Minute, Mode: "shadow"}
	l, err := ratelimit.New(nil, cfg, ratelimit.WithClock(clock), ratelimit.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		r, err := l.Allow(ctx, "k")
		if err != nil || !r.Allowed || r.Shadow != (i >= 2) {
			t.Fatalf("Allow %d = %+v, %v; want allowed, Shadow %v", i, r, err, i >= 2)
		}
		if i >= 2 && (r.Remaining != 0 || r.RetryAfter <= 0) {
			t.Errorf("Allow %d = %+v, want enforcement's denial: Remaining 0, a RetryAfter", i, r)
		}
		if d := rec.last(t); d.Result.Shadow != (i >= 2) {
			t.Errorf("Decision %d Shadow = %v, want %v", i, d.Result.Shadow, i >= 2)
		}
	}
	// the shadow denials recorded nothing: 2 units in the window
	if r, _ := l.Peek(ctx, "k"); r.Remaining != 0 || r.Shadow {
		t.Errorf("Peek = %+v, want Remaining 0 and no Shadow (Peek denies nothing)", r)
	}
	clock.Advance(time.Minute)
	if r, _ := l.Peek(ctx, "k"); r.Remaining != 2 {
		t.Errorf("Peek a window later = %+v, want Remaining 2: shadow denials must record nothing", r)
	}

	m, err := httplimit.New(l, httplimit.WithKeyHeader("X-Key"))
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i := range 4 {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-Key", "h")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK || w.Header().Get("RateLimit") == "" {
			t.Errorf("request %d: status %d, RateLimit %q; want 200 with the headers", i, w.Code, w.Header().Get("RateLimit"))
		}
	}
}

// TestMultiPolicy checks that multilimit joins Policies: rules from JSON,
// on Redis and in process, with the facade's features, and back to JSON.
func TestMultiPolicy(t *testing.T) {
	ctx := context.Background()
	doc := `{"api": {"algorithm": "multi", "rules": [
		{"algorithm": "sliding_log", "limit": 2, "window": "1s"},
		{"algorithm": "fixed_window", "limit": 3, "window": "1h"}], "on_failure": "local", "local_share": 0.5}}`
	p, err := parsePolicies([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	_, rdb := conformance.Miniredis(t)
	for _, backend := range []string{"redis", "local"} {
		t.Run(backend, func(t *testing.T) {
			clock := conformance.NewClock(conformance.Epoch.Add(time.Hour - 10*time.Second)) // well inside one hour
			var set *ratelimit.Set
			var err error
			if backend == "redis" {
				set, err = ratelimit.NewSet(rdb, p, ratelimit.WithClock(clock))
			} else {
				set, err = ratelimit.NewSet(nil, p, ratelimit.WithClock(clock))
			}
			if err != nil {
				t.Fatal(err)
			}
			l, err := set.Get("api")
			if err != nil {
				t.Fatal(err)
			}
			want := []bool{true, true, false} // the per-second rule
			for i, w := range want {
				if r, err := l.Allow(ctx, "k"); err != nil || r.Allowed != w {
					t.Fatalf("Allow %d = %+v, %v; want allowed %v", i, r, err, w)
				}
			}
			clock.Advance(time.Second)
			want = []bool{true, false} // the hourly rule: 3 in all
			for i, w := range want {
				if r, err := l.Allow(ctx, "k"); err != nil || r.Allowed != w {
					t.Fatalf("after a second, Allow %d = %+v, %v; want allowed %v", i, r, err, w)
				}
			}
			if got := l.Config(); got.Algorithm != ratelimit.Multi || len(got.Rules) != 2 {
				t.Errorf("Config() = %+v, want the multi policy", got)
			}
		})
	}
	out, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := parsePolicies(out)
	if err != nil || !reflect.DeepEqual(back, p) {
		t.Errorf("round trip through %s = %+v, %v; want %+v", out, back, err, p)
	}
	for _, bad := range []struct{ doc, want string }{
		{`{"a": {"algorithm": "multi"}}`, `field "rules"`},
		{`{"a": {"algorithm": "multi", "rules": [{"algorithm": "gcra", "limit": 1, "window": "1s"}]}}`, "gcra"},
		{`{"a": {"algorithm": "multi", "rules": [{"algorithm": "sliding_log", "limit": 1}]}}`, `field "rules[0].window": invalid option: missing`},
		{`{"a": {"algorithm": "multi", "limit": 5, "window": "1s", "rules": [{"algorithm": "sliding_log", "limit": 1, "window": "1s"}]}}`, "must be 0"},
		{`{"a": {"algorithm": "sliding_log", "limit": 5, "window": "1s", "rules": [{"algorithm": "sliding_log", "limit": 1, "window": "1s"}]}}`, `field "rules": invalid option: rules need algorithm "multi"`},
	} {
		if _, err := parsePolicies([]byte(bad.doc)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("UnmarshalJSON(%s): err = %v, want one saying %s", bad.doc, err, bad.want)
		}
	}
}

// TestCandidatePolicy checks a policy with a candidate: decisions are the
// enforced algorithm's, the Observer gets the agreement of each request,
// and a promote through Set.Update keeps the candidate's state, on Redis
// and in process.
func TestCandidatePolicy(t *testing.T) {
	ctx := context.Background()
	doc := `{"api": {"algorithm": "fixed_window", "limit": 4, "window": "1m",
		"candidate": {"algorithm": "sliding_log", "limit": 4, "window": "1m"}}}`
	p, err := parsePolicies([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	_, rdb := conformance.Miniredis(t)
	for _, backend := range []string{"redis", "local"} {
		t.Run(backend, func(t *testing.T) {
			// 20s before a fixed window's edge: the window resets there,
			// the sliding log's units stay
			clock := conformance.NewClock(conformance.Epoch.Add(40 * time.Second))
			rec := &decisionLog{}
			opts := []ratelimit.Option{ratelimit.WithClock(clock), ratelimit.WithObserver(rec)}
			var set *ratelimit.Set
			if backend == "redis" {
				set, err = ratelimit.NewSet(rdb, p, opts...)
			} else {
				set, err = ratelimit.NewSet(nil, p, opts...)
			}
			if err != nil {
				t.Fatal(err)
			}
			l, _ := set.Get("api")
			for i := range 4 {
				if r, err := l.Allow(ctx, "k"); err != nil || !r.Allowed {
					t.Fatalf("Allow %d = %+v, %v; want allowed", i, r, err)
				}
			}
			clock.Advance(30 * time.Second) // a new fixed window
			if r, _ := l.Allow(ctx, "k"); !r.Allowed {
				t.Fatalf("Allow in the next fixed window = %+v, want allowed by fixed_window", r)
			}
			if c, ok := ratelimit.StrategyOf(l).(interface{ Wait() }); ok {
				c.Wait() // background comparisons, if any
			}
			counts := map[string]int{}
			rec.mu.Lock()
			for _, d := range rec.ds {
				if d.Op == "compare" {
					counts[d.Agreement]++
					if d.Algorithm != ratelimit.SlidingLog {
						t.Errorf("compare Decision Algorithm = %q, want the candidate's", d.Algorithm)
					}
				}
			}
			rec.mu.Unlock()
			if want := map[string]int{"both_allow": 4, "candidate_only_deny": 1}; !reflect.DeepEqual(counts, want) {
				t.Errorf("agreements %v, want %v", counts, want)
			}

			// promote: the policy becomes its candidate; the sliding log
			// still holds the 4 units of 30s ago
			promoted := ratelimit.Policies{"api": *p["api"].Candidate}
			if err := set.Update(promoted); err != nil {
				t.Fatal(err)
			}
			l, _ = set.Get("api")
			if r, _ := l.Allow(ctx, "k"); r.Allowed {
				t.Errorf("Allow after the promote = %+v, want denied: the candidate's state carried over", r)
			}
		})
	}
	for _, bad := range []struct{ doc, want string }{
		{`{"a": {"algorithm": "sliding_log", "limit": 1, "window": "1s", "candidate": {"algorithm": "sliding_log", "limit": 2, "window": "1s"}}}`, "prefix must differ"},
		{`{"a": {"algorithm": "sliding_log", "limit": 1, "window": "1s", "candidate": {"algorithm": "gcra", "limit": 2, "window": "1s", "mode": "shadow"}}}`, "mode must be empty"},
		{`{"a": {"algorithm": "sliding_log", "limit": 1, "window": "1s", "candidate": {"algorithm": "gcra", "limit": 2}}}`, `field "candidate.window"`},
	} {
		if _, err := parsePolicies([]byte(bad.doc)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("UnmarshalJSON(%s): err = %v, want one saying %s", bad.doc, err, bad.want)
		}
	}
}

// TestRefundThroughTheFacade checks Limiter.RefundN on Redis and in
// process: units come back, a cached denial is forgotten, and a strategy
// that cannot refund says so.
func TestRefundThroughTheFacade(t *testing.T) {
	ctx := context.Background()
	_, rdb := conformance.Miniredis(t)
	cfg := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 3, Window: time.Minute}
	for _, backend := range []string{"redis", "local"} {
		t.Run(backend, func(t *testing.T) {
			clock := conformance.NewClock(conformance.Epoch)
			rec := &decisionLog{}
			opts := []ratelimit.Option{ratelimit.WithClock(clock), ratelimit.WithObserver(rec)}
			var l *ratelimit.Limiter
			var err error
			if backend == "redis" {
				l, err = ratelimit.New(rdb, cfg, append(opts, ratelimit.WithDenyCache(10))...)
			} else {
				l, err = ratelimit.New(nil, cfg, opts...)
			}
			if err != nil {
				t.Fatal(err)
			}
			key := "refund:" + backend
			for range 4 { // the 4th is denied (and cached on Redis)
				l.Allow(ctx, key)
			}
			r, err := l.RefundN(ctx, key, 2)
			if err != nil || r.Remaining != 2 {
				t.Fatalf("RefundN(2) = %+v, %v; want Remaining 2", r, err)
			}
			if d := rec.last(t); d.Op != "refund" || d.N != 2 {
				t.Errorf("Decision = %+v, want a refund of 2", d)
			}
			if r, _ := l.Allow(ctx, key); !r.Allowed {
				t.Errorf("Allow after the refund = %+v, want allowed (a cached denial must be forgotten)", r)
			}
			if r, err := l.RefundN(ctx, key, 100); err != nil || r.Remaining != 3 {
				t.Errorf("RefundN(100) = %+v, %v; want Remaining 3: never above the capacity", r, err)
			}
			if _, err := l.RefundN(ctx, "", 1); !errors.Is(err, strategy.ErrInvalidKey) {
				t.Errorf("RefundN with an empty key: err = %v, want ErrInvalidKey", err)
			}
		})
	}
	u := newUserStrategy(t, strategy.PerMinute(3), conformance.NewClock(conformance.Epoch))
	l, err := ratelimit.Wrap(u, ratelimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.RefundN(ctx, "k", 1); !errors.Is(err, strategy.ErrInvalidOption) || strings.Count(err.Error(), "ratelimit:") != 1 {
		t.Errorf("RefundN on a strategy that cannot refund: err = %v, want one ErrInvalidOption", err)
	}
}

// TestTiersThroughTheFacade checks Limiter.Tier on Redis (with the denial
// cache) and in process, with and without a candidate: each tier decides
// under its limit, a subject's usage carries from one tier to another, and
// an unknown tier is the policy's own limit.
func TestTiersThroughTheFacade(t *testing.T) {
	ctx := context.Background()
	_, rdb := conformance.Miniredis(t)
	base := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 2, Window: time.Minute,
		Tiers: map[string]ratelimit.Limit{"pro": {Limit: 5}}}
	withCandidate := base
	withCandidate.Candidate = &ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Minute}
	for _, c := range []struct {
		name string
		cfg  ratelimit.Config
	}{{"plain", base}, {"candidate", withCandidate}} {
		for _, backend := range []string{"redis", "local"} {
			t.Run(c.name+"/"+backend, func(t *testing.T) {
				clock := conformance.NewClock(conformance.Epoch)
				cfg := c.cfg
				cfg.Prefix = "tiers:" + c.name + ":"
				var l *ratelimit.Limiter
				var err error
				if backend == "redis" {
					l, err = ratelimit.New(rdb, cfg, ratelimit.WithClock(clock), ratelimit.WithDenyCache(10))
				} else {
					l, err = ratelimit.New(nil, cfg, ratelimit.WithClock(clock))
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := slices.Sorted(maps.Keys(l.Config().Tiers)); !reflect.DeepEqual(got, []string{"pro"}) {
					t.Errorf("Config().Tiers = %v, want [pro]", got)
				}
				if st, err := l.Tier("free"); st != nil || !errors.Is(err, strategy.ErrInvalidOption) ||
					!strings.Contains(err.Error(), `no tier "free"`) || !strings.Contains(err.Error(), `the tiers are "pro"`) {
					t.Errorf(`Tier("free") = %v, %v; want an error naming it and listing the tiers`, st, err)
				}
				for i, w := range []bool{true, true, false} { // free, the policy's own limit: 2
					if r, _ := l.Allow(ctx, "u"); r.Allowed != w || r.Limit != 2 {
						t.Fatalf("free Allow %d = %+v, want allowed %v, Limit 2 (the policy's)", i, r, w)
					}
				}
				pro := mustTier(t, l, "pro")
				if got := pro.Limit(); got.Limit != 5 || got.Window != time.Minute {
					t.Errorf("pro Limit() = %+v, want Limit 5", got)
				}
				for i, w := range []bool{true, true, true, false} { // upgraded: 5, 2 used
					if r, _ := pro.AllowN(ctx, "u", 1); r.Allowed != w || r.Limit != 5 {
						t.Fatalf("pro Allow %d = %+v, want allowed %v, Limit 5", i, r, w)
					}
				}
				if r, _ := l.Allow(ctx, "u"); r.Allowed { // back to 2, 5 used
					t.Errorf("Allow under the policy's limit after the upgrade = %+v, want denied", r)
				}
			})
		}
	}
	bad := base
	bad.Tiers = map[string]ratelimit.Limit{"pro": {Limit: 5, Window: time.Second}}
	if _, err := ratelimit.New(nil, bad); !errors.Is(err, strategy.ErrInvalidLimit) || !strings.Contains(err.Error(), "Window") {
		t.Errorf("a tier with another Window: err = %v, want ErrInvalidLimit naming Window", err)
	}
	sharded := base
	sharded.Shards = 2
	if _, err := ratelimit.New(nil, sharded); !errors.Is(err, strategy.ErrInvalidOption) {
		t.Errorf("tiers on a sharded policy: err = %v, want ErrInvalidOption (sharded cannot override)", err)
	}
}

// TestRefundAfterATier checks the rule for buckets: a token bucket or GCRA
// subject last written under another limit (a tier) gets nothing back from
// a refund, on Redis and in process alike, so a refund never mints units
// across scales.
func TestRefundAfterATier(t *testing.T) {
	ctx := context.Background()
	_, rdb := conformance.Miniredis(t)
	for _, a := range []strategy.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA} {
		cfg := ratelimit.Config{Algorithm: a, Limit: 4, Window: time.Minute, Prefix: "rt:",
			Tiers: map[string]ratelimit.Limit{"pro": {Limit: 8}}}
		for _, backend := range []string{"redis", "local"} {
			clock := conformance.NewClock(conformance.Epoch)
			var l *ratelimit.Limiter
			var err error
			if backend == "redis" {
				l, err = ratelimit.New(rdb, cfg, ratelimit.WithClock(clock))
			} else {
				l, err = ratelimit.New(nil, cfg, ratelimit.WithClock(clock))
			}
			if err != nil {
				t.Fatal(err)
			}
			pro := mustTier(t, l, "pro")
			for range 3 {
				pro.AllowN(ctx, "u", 1)
			}
			before, _ := l.Peek(ctx, "u")
			after, err := l.RefundN(ctx, "u", 2)
			if err != nil || after != before {
				t.Errorf("%s/%s: RefundN after a tier write = %+v, %v; want the Peek before it, %+v", a, backend, after, err, before)
			}
			l.Allow(ctx, "u") // written under the policy's own limit again
			before, _ = l.Peek(ctx, "u")
			if after, _ := l.RefundN(ctx, "u", 1); after.Remaining != before.Remaining+1 {
				t.Errorf("%s/%s: RefundN(1) under the own limit = %+v, want Remaining %d", a, backend, after, before.Remaining+1)
			}
		}
	}
}
