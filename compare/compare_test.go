package compare_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/batch"
	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/compare"
	"github.com/ratekit/ratelimit/fixedwindow"
	"github.com/ratekit/ratelimit/gcra"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/slidingcounter"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

func TestMain(m *testing.M) { os.Exit(testredis.Main(m)) }

// algo builds one algorithm on Redis or as a local twin.
type algo struct {
	name  string
	redis func(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error)
	local func(lim strategy.Limit, opts ...strategy.Option) (strategy.Strategy, error)
}

func wrap[T strategy.Strategy](st T, err error) (strategy.Strategy, error) { return st, err }

var algos = []algo{
	{"fixed_window",
		func(r redis.Scripter, l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return wrap(fixedwindow.New(r, l, o...))
		},
		func(l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return wrap(fixedwindow.NewLocal(l, o...))
		}},
	{"sliding_log",
		func(r redis.Scripter, l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return wrap(slidinglog.New(r, l, o...))
		},
		func(l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return wrap(slidinglog.NewLocal(l, o...))
		}},
	{"compact_log",
		func(r redis.Scripter, l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return wrap(compactlog.New(r, l, o...))
		},
		func(l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return wrap(compactlog.NewLocal(l, o...))
		}},
	{"sliding_counter",
		func(r redis.Scripter, l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return wrap(slidingcounter.New(r, l, o...))
		},
		func(l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return wrap(slidingcounter.NewLocal(l, o...))
		}},
	{"token_bucket",
		func(r redis.Scripter, l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return wrap(tokenbucket.New(r, l, o...))
		},
		func(l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return wrap(tokenbucket.NewLocal(l, o...))
		}},
	{"gcra",
		func(r redis.Scripter, l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return wrap(gcra.New(r, l, o...))
		},
		func(l strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return wrap(gcra.NewLocal(l, o...))
		}},
}

// must returns v, and panics (failing the test with its stack) on an
// unexpected error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// step is one request of a schedule: advance the clock, then ask.
type step struct {
	advance time.Duration
	subject string
	n       int64
}

// schedule returns a reproducible random schedule over a few subjects,
// dense enough to hit the limit of 5 per second often.
func schedule(seed uint64, steps int) []step {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]step, steps)
	for i := range out {
		out[i] = step{
			advance: time.Duration(r.IntN(250)) * time.Millisecond,
			subject: fmt.Sprintf("user:%d", r.IntN(3)),
			n:       int64(r.IntN(3)), // 0 is a peek
		}
	}
	return out
}

var testLimit = strategy.Limit{Limit: 5, Window: time.Second}

// pair builds a fresh enforced and candidate strategy on one clock.
type pair func(t *testing.T, c strategy.Clock) (enforced, candidate strategy.Strategy)

// sideBySide runs s on two lone strategies and returns the matrix and
// the enforced decisions.
func sideBySide(t *testing.T, build pair, s []step) (compare.Agreement, []strategy.Result) {
	t.Helper()
	clock := conformance.NewClock(epoch)
	e, c := build(t, clock)
	ctx := context.Background()
	var want compare.Agreement
	var res []strategy.Result
	for _, st := range s {
		clock.Advance(st.advance)
		er := must(e.AllowN(ctx, st.subject, st.n))
		res = append(res, er)
		if st.n == 0 {
			continue
		}
		cr := must(c.AllowN(ctx, st.subject, st.n))
		want.Add(compare.OutcomeOf(er.Allowed, cr.Allowed))
	}
	return want, res
}

// throughCompare runs s through a compare.Limiter over a fresh pair,
// waiting for each comparison when it runs in the background.
func throughCompare(t *testing.T, build pair, s []step, opts ...compare.Option) (compare.Agreement, []strategy.Result) {
	t.Helper()
	clock := conformance.NewClock(epoch)
	e, c := build(t, clock)
	reported := map[compare.Outcome]uint64{}
	var costs []int64 // the n of each report
	var mu sync.Mutex
	opts = append(opts, compare.WithReport(func(_ context.Context, n int64, _, _ strategy.Result, o compare.Outcome) {
		mu.Lock()
		reported[o]++
		costs = append(costs, n)
		mu.Unlock()
	}))
	l := must(compare.New(e, c, opts...))
	defer l.Close()
	ctx := context.Background()
	var res []strategy.Result
	for i, st := range s {
		clock.Advance(st.advance)
		res = append(res, must(l.AllowN(ctx, st.subject, st.n)))
		l.Wait()
		mu.Lock()
		if st.n > 0 && (len(costs) == 0 || costs[len(costs)-1] != st.n) {
			t.Errorf("step %d %+v: WithReport's n = %v (the last reported), want %d", i, st, costs, st.n)
		}
		costs = costs[:0]
		mu.Unlock()
	}
	got := l.Agreement()
	var rep compare.Agreement
	for o, n := range reported {
		for range n {
			rep.Add(o)
		}
	}
	if rep != got {
		t.Errorf("WithReport saw %+v, Agreement() says %+v", rep, got)
	}
	return got, res
}

func checkSame(t *testing.T, build pair, s []step, opts ...compare.Option) {
	t.Helper()
	want, wantRes := sideBySide(t, build, s)
	got, gotRes := throughCompare(t, build, s, opts...)
	if got != want {
		t.Errorf("matrix: got %+v, want (side by side) %+v", got, want)
	}
	if got.Compared() == 0 || got.BothAllow == 0 || got.BothDeny == 0 {
		t.Errorf("schedule too tame to test anything: %+v", got)
	}
	for i := range wantRes {
		if gotRes[i] != wantRes[i] {
			t.Fatalf("step %d %+v: enforced result %+v, alone %+v", i, s[i], gotRes[i], wantRes[i])
		}
	}
}

// TestAgreementTwins: on local twins, the matrix counted through a
// Limiter equals the one from running the two twins side by side, and the
// caller gets exactly the enforced twin's decisions, for every ordered
// pair of algorithms.
func TestAgreementTwins(t *testing.T) {
	s := schedule(7, 400)
	for _, ea := range algos {
		for _, ca := range algos {
			build := func(t *testing.T, c strategy.Clock) (strategy.Strategy, strategy.Strategy) {
				return must(ea.local(testLimit, strategy.WithClock(c))), must(ca.local(testLimit, strategy.WithClock(c)))
			}
			t.Run(ea.name+"/"+ca.name+"/inline", func(t *testing.T) { checkSame(t, build, s, compare.WithInline()) })
			t.Run(ea.name+"/"+ca.name+"/background", func(t *testing.T) { checkSame(t, build, s, compare.WithBackground()) })
		}
	}
}

// TestAgreementRedis: the same on a real Redis, with a plain client and
// with a batch.Client, candidate pipelined (the default for two Redis
// strategies) and in the background.
func TestAgreementRedis(t *testing.T) {
	srv := testredis.Shared(t)
	plain := srv.Client(t)
	batched := must(batch.New(plain))
	t.Cleanup(func() { batched.Close() })
	s := schedule(11, 150)
	pairs := [][2]algo{{algos[0], algos[1]}, {algos[1], algos[3]}, {algos[4], algos[5]}, {algos[3], algos[2]}}
	for _, client := range []struct {
		name string
		rdb  redis.Scripter
	}{{"plain", plain}, {"batch", batched}} {
		for _, p := range pairs {
			build := func(t *testing.T, c strategy.Clock) (strategy.Strategy, strategy.Strategy) {
				prefix := testredis.Prefix(t) // fresh keys for each run
				return must(p[0].redis(client.rdb, testLimit, strategy.WithClock(c), strategy.WithPrefix(prefix))),
					must(p[1].redis(client.rdb, testLimit, strategy.WithClock(c), strategy.WithPrefix(prefix)))
			}
			t.Run(client.name+"/"+p[0].name+"/"+p[1].name+"/default", func(t *testing.T) { checkSame(t, build, s) })
			t.Run(client.name+"/"+p[0].name+"/"+p[1].name+"/background", func(t *testing.T) { checkSame(t, build, s, compare.WithBackground()) })
		}
	}
}

// TestAgreementCluster: the same on the 3-master Redis Cluster, pipelined
// (the two keys of a subject share its hash tag, so one node's pipeline
// carries both), over subjects spread across the nodes.
func TestAgreementCluster(t *testing.T) {
	rdb := testredis.SharedCluster(t).Client(t)
	r := rand.New(rand.NewPCG(13, 2))
	s := schedule(13, 300)
	for i := range s {
		s[i].subject = fmt.Sprintf("user:%d", r.IntN(4)) // several hash slots
		s[i].advance /= 2
	}
	for _, p := range [][2]algo{{algos[0], algos[1]}, {algos[3], algos[5]}} {
		build := func(t *testing.T, c strategy.Clock) (strategy.Strategy, strategy.Strategy) {
			prefix := testredis.Prefix(t)
			return must(p[0].redis(rdb, testLimit, strategy.WithClock(c), strategy.WithPrefix(prefix))),
				must(p[1].redis(rdb, testLimit, strategy.WithClock(c), strategy.WithPrefix(prefix)))
		}
		t.Run(p[0].name+"/"+p[1].name, func(t *testing.T) { checkSame(t, build, s, compare.WithPipeline()) })
	}
}

// TestConcurrent: many goroutines on few subjects, candidate in the
// background with a small bound: every request with n > 0 has exactly one
// outcome, the enforced strategy allows exactly its limit at a fixed
// time, and no goroutine outlives Close.
func TestConcurrent(t *testing.T) {
	rdb := testredis.Shared(t).Client(t)
	lim := strategy.Limit{Limit: 100, Window: time.Minute}
	twins := func(t *testing.T, c strategy.Clock) (strategy.Strategy, strategy.Strategy) {
		return must(fixedwindow.NewLocal(lim, strategy.WithClock(c))), must(slidinglog.NewLocal(lim, strategy.WithClock(c)))
	}
	onRedis := func(t *testing.T, c strategy.Clock) (strategy.Strategy, strategy.Strategy) {
		o := []strategy.Option{strategy.WithClock(c), strategy.WithPrefix(testredis.Prefix(t))}
		return must(fixedwindow.New(rdb, lim, o...)), must(slidinglog.New(rdb, lim, o...))
	}
	for _, mode := range []struct {
		name  string
		build pair
		exact bool // the candidate sees every request
		opts  []compare.Option
	}{
		{"twins/background", twins, false, []compare.Option{compare.WithMaxInFlight(4)}},
		{"twins/inline", twins, true, []compare.Option{compare.WithInline()}},
		{"redis/pipeline", onRedis, true, nil},
		{"redis/background", onRedis, false, []compare.Option{compare.WithBackground(), compare.WithMaxInFlight(4)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			clock := conformance.NewClock(epoch)
			e, c := mode.build(t, clock)
			before := runtime.NumGoroutine()
			l := must(compare.New(e, c, mode.opts...))
			const workers, each, subjects = 32, 50, 4
			allowed := make([]int64, subjects)
			var mu sync.Mutex
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						sub := (w + i) % subjects
						r, err := l.AllowN(context.Background(), fmt.Sprint("s", sub), 1)
						if err != nil {
							t.Error(err)
							return
						}
						if r.Allowed {
							mu.Lock()
							allowed[sub]++
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			a := l.Agreement()
			if total := a.Compared() + a.CandidateErrors + a.Dropped; total != workers*each {
				t.Errorf("outcomes %+v sum to %d, want %d", a, total, workers*each)
			}
			if mode.exact && a.Dropped != 0 {
				t.Errorf("dropped %d", a.Dropped)
			}
			for i, n := range allowed {
				if n != lim.Limit {
					t.Errorf("subject %d: enforced allowed %d, want %d", i, n, lim.Limit)
				}
			}
			if a.CandidateErrors != 0 {
				t.Errorf("candidate errors: %+v", a)
			}
			// inline or pipelined, the candidate saw every request: at one instant both
			// algorithms allow exactly the limit of each subject, so each
			// algorithm allowed as many: BothAllow + CandidateOnlyDeny ==
			// BothAllow + EnforcedOnlyDeny == subjects * limit
			if mode.exact && (a.EnforcedOnlyDeny != a.CandidateOnlyDeny || a.BothAllow+a.CandidateOnlyDeny != uint64(subjects*lim.Limit)) {
				t.Errorf("outcomes %+v: want %d allowed by each", a, subjects*lim.Limit)
			}
			waitGoroutines(t, before)
			// after Close, nothing is compared any more
			if _, err := l.AllowN(context.Background(), "late", 1); err != nil {
				t.Fatal(err)
			}
			if l.Agreement().Dropped != a.Dropped+1 {
				t.Errorf("after Close: dropped %d, want %d", l.Agreement().Dropped, a.Dropped+1)
			}
		})
	}
}

// waitGoroutines fails unless the goroutine count comes back to at most
// before (goroutines that just ran their last line may take a moment to
// exit; no timing is asserted beyond a generous bound).
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, want <= %d:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// blocking is a candidate whose AllowN waits for release or its context.
type blocking struct {
	started chan struct{}
	release chan struct{}
}

func (b *blocking) AllowN(ctx context.Context, _ string, _ int64) (strategy.Result, error) {
	b.started <- struct{}{}
	select {
	case <-b.release:
		return strategy.Result{Allowed: true}, nil
	case <-ctx.Done():
		return strategy.Result{}, ctx.Err()
	}
}
func (b *blocking) Peek(context.Context, string) (strategy.Result, error) {
	return strategy.Result{}, errors.New("peek must not reach the candidate")
}
func (b *blocking) Reset(context.Context, string) error { return nil }
func (b *blocking) Limit() strategy.Limit               { return testLimit }

// TestBound: with MaxInFlight candidate decisions stuck, further requests
// are decided at once by the enforced strategy and their comparisons
// dropped; a stuck candidate ends at its timeout as a CandidateError, and
// Close leaves no goroutine.
func TestBound(t *testing.T) {
	before := runtime.NumGoroutine()
	e := must(slidinglog.NewLocal(testLimit))
	b := &blocking{started: make(chan struct{}, 8), release: make(chan struct{})}
	l := must(compare.New(e, b, compare.WithMaxInFlight(2), compare.WithTimeout(time.Hour)))
	ctx, cancel := context.WithCancel(context.Background())
	for range 2 {
		must(l.AllowN(ctx, "k", 1))
		<-b.started
	}
	cancel() // the caller's cancellation does not reach the candidate
	for range 3 {
		if r := must(l.AllowN(context.Background(), "k", 1)); !r.Allowed {
			t.Fatalf("enforced denied %+v", r)
		}
	}
	if a := l.Agreement(); a.Dropped != 3 || a.Compared() != 0 {
		t.Errorf("with 2 stuck: %+v, want 3 dropped, none compared", a)
	}
	if _, err := l.Peek(context.Background(), "k"); err != nil {
		t.Errorf("Peek reached the candidate: %v", err)
	}
	close(b.release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if a := l.Agreement(); a.BothAllow != 2 {
		t.Errorf("after release: %+v, want 2 both allow", a)
	}
	waitGoroutines(t, before)

	// timeout
	b2 := &blocking{started: make(chan struct{}, 1), release: make(chan struct{})}
	l2 := must(compare.New(e, b2, compare.WithTimeout(time.Millisecond)))
	must(l2.AllowN(context.Background(), "k2", 1))
	l2.Wait()
	if a := l2.Agreement(); a.CandidateErrors != 1 {
		t.Errorf("stuck candidate past its timeout: %+v, want 1 candidate error", a)
	}
	l2.Close()
	waitGoroutines(t, before)
}

func TestNewErrors(t *testing.T) {
	st := must(slidinglog.NewLocal(testLimit))
	for _, tc := range []struct {
		name     string
		e, c     strategy.Strategy
		opts     []compare.Option
		contains string
	}{
		{"nil enforced", nil, st, nil, "enforced"},
		{"nil candidate", st, nil, nil, "candidate"},
		{"in flight 0", st, st, []compare.Option{compare.WithMaxInFlight(0)}, "MaxInFlight"},
		{"in flight big", st, st, []compare.Option{compare.WithMaxInFlight(1 << 20)}, "MaxInFlight"},
		{"timeout", st, st, []compare.Option{compare.WithTimeout(0)}, "Timeout"},
		{"pipeline of twins", st, st, []compare.Option{compare.WithPipeline()}, "WithPipeline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compare.New(tc.e, tc.c, tc.opts...)
			if err == nil || !errors.Is(err, strategy.ErrInvalidOption) || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("got %v, want ErrInvalidOption naming %s", err, tc.contains)
			}
			if strings.Count(err.Error(), "ratelimit: ") != 1 {
				t.Errorf("error %q: want exactly one package prefix", err)
			}
		})
	}
	if _, err := compare.New(st, st, nil); err != nil {
		t.Errorf("nil option: %v", err)
	}
}

// TestPeekResetLimit: Peek is the enforced strategy's, Reset resets both,
// Limit is the enforced one's, and a failing enforced call or n = 0 never
// reaches the candidate.
func TestPeekResetLimit(t *testing.T) {
	clock := conformance.NewClock(epoch)
	e := must(fixedwindow.NewLocal(strategy.Limit{Limit: 2, Window: time.Second}, strategy.WithClock(clock)))
	c := must(slidinglog.NewLocal(strategy.Limit{Limit: 3, Window: time.Second}, strategy.WithClock(clock)))
	l := must(compare.New(e, c, compare.WithInline()))
	ctx := context.Background()
	if got := l.Limit(); got != e.Limit() {
		t.Errorf("Limit %v, want %v", got, e.Limit())
	}
	must(l.AllowN(ctx, "k", 2))
	if p := must(l.Peek(ctx, "k")); p.Remaining != 0 || p.Limit != 2 {
		t.Errorf("Peek %+v, want the enforced state (0 of 2 left)", p)
	}
	if p := must(c.Peek(ctx, "k")); p.Remaining != 1 {
		t.Errorf("candidate Peek %+v, want 1 of 3 left", p)
	}
	must(l.AllowN(ctx, "k", 0))
	if _, err := l.AllowN(ctx, "", 1); err == nil {
		t.Error("empty key: no error")
	}
	if a := l.Agreement(); a != (compare.Agreement{BothAllow: 1}) {
		t.Errorf("after a peek and a bad call: %+v, want 1 both allow", a)
	}
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	for _, st := range []strategy.Strategy{e, c} {
		if p := must(st.Peek(ctx, "k")); p.Remaining != p.Limit {
			t.Errorf("after Reset: %+v, want full", p)
		}
	}
	if l.Candidate() != c || l.Enforced() != e {
		t.Error("Candidate/Enforced do not return the strategies given")
	}
}

func TestOutcomeString(t *testing.T) {
	seen := map[string]bool{}
	for o := compare.BothAllow; o <= compare.Dropped; o++ {
		s := o.String()
		if seen[s] || strings.HasPrefix(s, "outcome(") {
			t.Errorf("outcome %d: name %q", o, s)
		}
		seen[s] = true
	}
	if (compare.Agreement{}).Agreed() != 1 || (compare.Agreement{BothAllow: 1, CandidateOnlyDeny: 3}).Agreed() != 0.25 {
		t.Error("Agreed")
	}
}

// honest is a Strategy that says whether it honours contexts.
type honest struct {
	strategy.Strategy
	h bool
}

func (s honest) HonoursContext() bool { return s.h }

// silent is a Strategy that does not say whether it honours contexts.
type silent struct{ strategy.Strategy }

// TestHonoursContext: the enforced strategy's answer, and with
// WithInline the candidate's too (it then runs on the caller's path).
func TestHonoursContext(t *testing.T) {
	st := must(slidinglog.NewLocal(testLimit))
	yes, no := honest{st, true}, honest{st, false}
	for _, tc := range []struct {
		name   string
		e, c   strategy.Strategy
		inline bool
		want   bool
	}{
		{"both", yes, yes, false, true},
		{"enforced no", no, yes, false, false},
		{"candidate no, background", yes, no, false, true},
		{"candidate no, inline", yes, no, true, false},
		{"enforced silent", silent{st}, yes, false, false},
	} {
		var opts []compare.Option
		if tc.inline {
			opts = append(opts, compare.WithInline())
		}
		if got := must(compare.New(tc.e, tc.c, opts...)).HonoursContext(); got != tc.want {
			t.Errorf("%s: HonoursContext %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCompareN checks that a request decided without the Limiter (a
// cached denial) is still decided by the candidate alone, counted and
// reported with its cost, in every mode; that cost 0 runs nothing; and
// that it is Dropped once the Limiter is closed.
func TestCompareN(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Shared(t).Client(t)
	denied := strategy.Result{Limit: 5, RetryAfter: time.Second}
	for _, c := range []struct {
		name string
		opts []compare.Option
		rdb  bool
	}{
		{"inline", []compare.Option{compare.WithInline()}, false},
		{"background", []compare.Option{compare.WithBackground()}, false},
		{"pipelined", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := conformance.NewClock(epoch)
			var e, cand strategy.Strategy
			if c.rdb {
				prefix := strategy.WithPrefix(testredis.Prefix(t))
				e = must(fixedwindow.New(rdb, testLimit, strategy.WithClock(clock), prefix))
				cand = must(slidinglog.New(rdb, testLimit, strategy.WithClock(clock), prefix))
			} else {
				e = must(fixedwindow.NewLocal(testLimit, strategy.WithClock(clock)))
				cand = must(slidinglog.NewLocal(testLimit, strategy.WithClock(clock)))
			}
			var mu sync.Mutex
			var costs []int64
			opts := append(c.opts, compare.WithReport(func(_ context.Context, n int64, _, _ strategy.Result, _ compare.Outcome) {
				mu.Lock()
				costs = append(costs, n)
				mu.Unlock()
			}))
			l := must(compare.New(e, cand, opts...))
			for range 3 {
				l.CompareN(ctx, "k", 2, strategy.Limit{}, denied)
				l.Wait()
			}
			l.CompareN(ctx, "k", 0, strategy.Limit{}, denied)
			l.Wait()
			want := compare.Agreement{EnforcedOnlyDeny: 2, BothDeny: 1} // 2 + 2 of 5, then 2 more denied
			if got := l.Agreement(); got != want {
				t.Errorf("Agreement() = %+v, want %+v", got, want)
			}
			if r := must(cand.Peek(ctx, "k")); r.Remaining != 1 {
				t.Errorf("candidate Peek = %+v, want Remaining 1: it decided the requests", r)
			}
			if r := must(e.Peek(ctx, "k")); r.Remaining != 5 {
				t.Errorf("enforced Peek = %+v, want Remaining 5: CompareN does not call it", r)
			}
			l.Close()
			l.CompareN(ctx, "k", 1, strategy.Limit{}, denied)
			if got := l.Agreement().Dropped; got != 1 {
				t.Errorf("after Close, Dropped = %d, want 1", got)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []int64{2, 2, 2, 1}; !reflect.DeepEqual(costs, want) {
				t.Errorf("reported costs %v, want %v", costs, want)
			}
		})
	}
}
