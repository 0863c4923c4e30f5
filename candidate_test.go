package ratelimit_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
)

// candidateBackend is where a test's Set keeps its state: rdb nil means in
// process (NewSet with a nil client); base is the key namespace the test's policies
// use, unique to the test on the shared real Redis.
type candidateBackend struct {
	name string
	rdb  redis.Scripter
	base string
}

// candidateBackends returns miniredis, the real Redis and, when local is
// set, in process.
func candidateBackends(t *testing.T, local bool) []candidateBackend {
	t.Helper()
	_, mr := conformance.Miniredis(t)
	bs := []candidateBackend{
		{"miniredis", mr, "rl:"},
		{"redis", conformance.RealRedis(t), testredis.Prefix(t)},
	}
	if local {
		bs = append(bs, candidateBackend{"local", nil, "rl:"})
	}
	return bs
}

func (b candidateBackend) newSet(t *testing.T, p ratelimit.Policies, opts ...ratelimit.Option) *ratelimit.Set {
	t.Helper()
	var set *ratelimit.Set
	var err error
	if b.rdb != nil {
		set, err = ratelimit.NewSet(b.rdb, p, opts...)
	} else {
		set, err = ratelimit.NewSet(nil, p, opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// agreements counts the Observer's compare Decisions by Agreement, once
// the background comparisons of l, if any, are done.
func agreements(l *ratelimit.Limiter, rec *decisionLog) map[string]int {
	if c, ok := ratelimit.StrategyOf(l).(interface{ Wait() }); ok {
		c.Wait()
	}
	counts := map[string]int{}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, d := range rec.ds {
		if d.Op == "compare" {
			counts[d.Agreement]++
		}
	}
	return counts
}

// TestCandidatePrefixScoped checks that a Set scopes a candidate's explicit
// Prefix as it scopes a policy's (Prefix + name + ":"): a candidate never
// writes another policy's keys, two policies' candidates never share keys,
// and a same-algorithm candidate promoted by Set.Update with its exact
// Config keeps the state it built, on Redis and in process.
func TestCandidatePrefixScoped(t *testing.T) {
	ctx := context.Background()
	clock := conformance.NewClock(conformance.Epoch)
	for _, b := range candidateBackends(t, true) {
		t.Run(b.name+"/another policy's keys", func(t *testing.T) {
			if b.rdb == nil {
				t.Skip("in process, every strategy has its own state")
			}
			b := b
			b.base += "one:"
			p := ratelimit.Policies{
				"a": {Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Minute, Prefix: b.base,
					Candidate: &ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Minute, Prefix: b.base + "b:"}},
				"b": {Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Minute, Prefix: b.base},
			}
			set := b.newSet(t, p, ratelimit.WithClock(clock))
			la, _ := set.Get("a")
			if r, err := la.Allow(ctx, "v"); err != nil || !r.Allowed {
				t.Fatalf("a: Allow = %+v, %v; want allowed", r, err)
			}
			agreements(la, &decisionLog{}) // wait for a's candidate
			lb, _ := set.Get("b")
			if r, err := lb.Allow(ctx, "v"); err != nil || !r.Allowed {
				t.Errorf("b: first Allow = %+v, %v; want allowed: a's candidate must not write b's keys", r, err)
			}
		})
		t.Run(b.name+"/candidates of two policies", func(t *testing.T) {
			if b.rdb == nil {
				t.Skip("in process, every strategy has its own state")
			}
			b := b
			b.base += "two:"
			cand := &ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Minute, Prefix: b.base + "shared:"}
			p := ratelimit.Policies{
				"a": {Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Minute, Prefix: b.base, Candidate: cand},
				"b": {Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Minute, Prefix: b.base, Candidate: cand},
			}
			rec := &decisionLog{}
			set := b.newSet(t, p, ratelimit.WithClock(clock), ratelimit.WithObserver(rec))
			la, _ := set.Get("a")
			la.Allow(ctx, "v")
			agreements(la, rec)
			lb, _ := set.Get("b")
			lb.Allow(ctx, "v")
			if got, want := agreements(lb, rec), map[string]int{"both_allow": 2}; !reflect.DeepEqual(got, want) {
				t.Errorf("agreements of a's then b's first request = %v, want %v: the candidates must not share keys", got, want)
			}
		})
		t.Run(b.name+"/promote a same-algorithm candidate", func(t *testing.T) {
			b := b
			b.base += "three:"
			cand := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 10, Window: time.Minute, Prefix: b.base + "x:"}
			p := ratelimit.Policies{
				"c": {Algorithm: ratelimit.SlidingLog, Limit: 20, Window: time.Minute, Prefix: b.base, Candidate: &cand},
			}
			set := b.newSet(t, p, ratelimit.WithClock(clock))
			l, _ := set.Get("c")
			for i := range 5 {
				if r, err := l.Allow(ctx, "v"); err != nil || !r.Allowed {
					t.Fatalf("Allow %d = %+v, %v; want allowed", i, r, err)
				}
			}
			agreements(l, &decisionLog{})
			if err := set.Update(ratelimit.Policies{"c": cand}); err != nil {
				t.Fatal(err)
			}
			l, _ = set.Get("c")
			if r, err := l.Allow(ctx, "v"); err != nil || !r.Allowed || r.Remaining != 4 {
				t.Errorf("Allow after promoting the candidate = %+v, %v; want allowed, Remaining 4: the candidate's 5 units carried over", r, err)
			}
		})
	}
	// a candidate's namespace can no more be another policy's than a
	// policy's can
	p := ratelimit.Policies{
		"xa": {Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Minute, Prefix: "rl:"},
		"a": {Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Minute, Prefix: "other:",
			Candidate: &ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Minute, Prefix: "rl:x"}},
	}
	if err := validate(p); err == nil || !strings.Contains(err.Error(), `"rl:xa:"`) {
		t.Errorf("Validate of a candidate in policy xa's namespace: err = %v, want one naming it", err)
	}
	q := ratelimit.Policies{
		"a": {Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Minute, Prefix: "p:",
			Candidate: &ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Minute, Prefix: "q:x"}},
		"xa": {Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Minute, Prefix: "p:",
			Candidate: &ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Minute, Prefix: "q:"}},
	}
	if err := validate(q); err == nil || !strings.Contains(err.Error(), `"q:xa:"`) {
		t.Errorf("Validate of two candidates in one namespace: err = %v, want one naming it", err)
	}
}

// TestCandidateSeesCachedDenials checks that a request the denial cache
// answers is still decided by the candidate, and its agreement reported,
// so that the candidate's state is what it would be alone and a promote is
// warm.
func TestCandidateSeesCachedDenials(t *testing.T) {
	ctx := context.Background()
	for _, b := range candidateBackends(t, false) {
		for _, batched := range []bool{false, true} {
			name := b.name
			rdb := b.rdb
			if batched {
				name += "-batched"
				rdb = conformance.Batched(t, rdb)
			}
			t.Run(name, func(t *testing.T) {
				clock := conformance.NewClock(conformance.Epoch)
				cand := ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 10, Window: time.Minute}
				p := ratelimit.Policies{"api": {Algorithm: ratelimit.FixedWindow, Limit: 3, Window: time.Minute,
					Prefix: b.base + name + ":", Candidate: &cand}}
				rec := &decisionLog{}
				set := candidateBackend{name, rdb, b.base}.newSet(t, p,
					ratelimit.WithClock(clock), ratelimit.WithObserver(rec), ratelimit.WithDenyCache(100))
				l, _ := set.Get("api")
				for i := range 10 {
					if r, err := l.Allow(ctx, "v"); err != nil || r.Allowed != (i < 3) {
						t.Fatalf("Allow %d = %+v, %v; want allowed %v", i, r, err, i < 3)
					}
				}
				got := agreements(l, rec)
				if want := map[string]int{"both_allow": 3, "enforced_only_deny": 7}; !reflect.DeepEqual(got, want) {
					t.Errorf("agreements = %v, want %v: every request, cached denials included, decided by the candidate", got, want)
				}
				cached := 0
				rec.mu.Lock()
				for _, d := range rec.ds {
					if d.Op == "allow" && d.Cached {
						cached++
					}
				}
				rec.mu.Unlock()
				if cached == 0 {
					t.Errorf("no decision answered by the denial cache: the test does not test it")
				}
				if err := set.Update(ratelimit.Policies{"api": {Algorithm: cand.Algorithm, Limit: cand.Limit,
					Window: cand.Window, Prefix: b.base + name + ":"}}); err != nil {
					t.Fatal(err)
				}
				l, _ = set.Get("api")
				if r, err := l.Allow(ctx, "v"); err != nil || r.Allowed {
					t.Errorf("Allow after promoting the candidate = %+v, %v; want denied: it saw all 10 requests", r, err)
				}
			})
		}
	}
}

// TestCompareDecisionCost checks that the Observer's compare Decision
// carries the cost of the request, as the allow Decision does.
func TestCompareDecisionCost(t *testing.T) {
	ctx := context.Background()
	for _, b := range candidateBackends(t, true) {
		for _, batched := range []bool{false, true} {
			name := b.name
			rdb := b.rdb
			if batched {
				if rdb == nil {
					continue
				}
				name += "-batched"
				rdb = conformance.Batched(t, rdb)
			}
			t.Run(name, func(t *testing.T) {
				p := ratelimit.Policies{"api": {Algorithm: ratelimit.FixedWindow, Limit: 10, Window: time.Minute,
					Prefix:    b.base + name + ":",
					Candidate: &ratelimit.Config{Algorithm: ratelimit.TokenBucket, Limit: 10, Window: time.Minute}}}
				rec := &decisionLog{}
				set := candidateBackend{name, rdb, b.base}.newSet(t, p,
					ratelimit.WithClock(conformance.NewClock(conformance.Epoch)), ratelimit.WithObserver(rec))
				l, _ := set.Get("api")
				if _, err := l.AllowN(ctx, "v", 3); err != nil {
					t.Fatal(err)
				}
				agreements(l, rec)
				rec.mu.Lock()
				defer rec.mu.Unlock()
				ops := map[string]int64{}
				for _, d := range rec.ds {
					ops[d.Op] = d.N
				}
				if want := map[string]int64{"allow": 3, "compare": 3}; !reflect.DeepEqual(ops, want) {
					t.Errorf("N by Op = %v, want %v", ops, want)
				}
			})
		}
	}
}

// TestCandidateOnBatchingClient checks that a policy with a candidate on a
// client New would batch keeps its comparison in the enforced call's
// pipeline: each request is compared before Allow returns, in order (a
// batch.Client would make it a background comparison, reported later).
func TestCandidateOnBatchingClient(t *testing.T) {
	s := testredis.Shared(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	rec := &decisionLog{}
	l, err := ratelimit.New(rdb, ratelimit.Config{
		Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Hour, Prefix: testredis.Prefix(t),
		Candidate: &ratelimit.Config{Algorithm: ratelimit.SlidingLog, Limit: 3, Window: time.Hour},
	}, ratelimit.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	compared := func() (agreements []string) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, d := range rec.ds {
			if d.Op == "compare" {
				agreements = append(agreements, d.Agreement)
			}
		}
		return agreements
	}
	for i := 1; i <= 6; i++ {
		if _, err := l.Allow(context.Background(), "user:1"); err != nil {
			t.Fatal(err)
		}
		if got := compared(); len(got) != i {
			t.Fatalf("after %d requests %d compared (%q): the comparison left the enforced call's pipeline", i, len(got), got)
		}
	}
	want := []string{"both_allow", "both_allow", "both_allow", "candidate_only_deny", "candidate_only_deny", "both_deny"}
	if got := compared(); !reflect.DeepEqual(got, want) {
		t.Fatalf("agreements %q, want %q", got, want)
	}
}
