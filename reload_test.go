package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/testredis"
	"github.com/ratekit/ratelimit/strategy"
)

// setBuilder builds a Set on one backend, with a client clock.
type setBuilder struct {
	name string
	new  func(t *testing.T, p ratelimit.Policies, clock strategy.Clock) (*ratelimit.Set, error)
	// redis: changed policies keep their subjects' units (same keys)
	redis bool
}

func setBuilders() []setBuilder {
	return []setBuilder{
		{name: "local", new: func(t *testing.T, p ratelimit.Policies, clock strategy.Clock) (*ratelimit.Set, error) {
			return ratelimit.NewSet(nil, p, ratelimit.WithClock(clock))
		}},
		{name: "redis", redis: true, new: func(t *testing.T, p ratelimit.Policies, clock strategy.Clock) (*ratelimit.Set, error) {
			return ratelimit.NewSet(testredis.Shared(t).Client(t), p, ratelimit.WithClock(clock))
		}},
		{name: "cluster", redis: true, new: func(t *testing.T, p ratelimit.Policies, clock strategy.Clock) (*ratelimit.Set, error) {
			return ratelimit.NewSet(testredis.SharedCluster(t).Client(t), p, ratelimit.WithClock(clock))
		}},
	}
}

// withPrefix returns p with every policy's Prefix set to prefix (keys of
// their own on a shared redis-server) and a Timeout that a loaded machine
// does not outlast.
func withPrefix(p ratelimit.Policies, prefix string) ratelimit.Policies {
	out := make(ratelimit.Policies, len(p))
	for n, c := range p {
		c.Prefix, c.Timeout = prefix, 10*time.Second
		out[n] = c
	}
	return out
}

func mustGet(t *testing.T, s *ratelimit.Set, name string) *ratelimit.Limiter {
	t.Helper()
	l, err := s.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// spend makes n allowed decisions of one unit for key on l.
func spend(t *testing.T, l *ratelimit.Limiter, key string, n int) {
	t.Helper()
	for i := range n {
		r, err := l.Allow(context.Background(), key)
		if err != nil || !r.Allowed {
			t.Fatalf("%s: request %d of %d: %+v, %v; want allowed", l.Config().Name, i+1, n, r, err)
		}
	}
}

func peek(t *testing.T, l *ratelimit.Limiter, key string) ratelimit.Result {
	t.Helper()
	r, err := l.Peek(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Update keeps unchanged policies' Limiters (and their state), rebuilds
// changed ones, removes removed ones, adds added ones; a Limiter obtained
// before keeps deciding under the old policy.
func TestUpdateKeepsChangesRemovesAdds(t *testing.T) {
	for _, b := range setBuilders() {
		for _, a := range strategy.Algorithms() {
			t.Run(b.name+"/"+string(a), func(t *testing.T) {
				clock := conformance.NewClock(conformance.Epoch)
				prefix := testredis.Prefix(t)
				before := withPrefix(ratelimit.Policies{
					"steady": {Algorithm: a, Limit: 5, Window: time.Minute},
					"login":  {Algorithm: a, Limit: 5, Window: time.Minute},
					"upload": {Algorithm: a, Limit: 5, Window: time.Minute},
				}, prefix)
				set, err := b.new(t, before, clock)
				if err != nil {
					t.Fatal(err)
				}
				steady, login, upload := mustGet(t, set, "steady"), mustGet(t, set, "login"), mustGet(t, set, "upload")
				spend(t, steady, "user:1", 3)
				spend(t, login, "user:1", 3)
				spend(t, upload, "user:1", 1)

				after := maps.Clone(before)
				c := after["login"]
				c.Limit = 8
				after["login"] = c
				delete(after, "upload")
				after["search"] = ratelimit.Config{Algorithm: a, Limit: 2, Window: time.Second, Prefix: prefix, Timeout: 10 * time.Second}
				if err := set.Update(after); err != nil {
					t.Fatal(err)
				}

				if got := ratelimit.SetNames(set); !reflect.DeepEqual(got, []string{"login", "search", "steady"}) {
					t.Errorf("Names() = %q; want login, search, steady", got)
				}
				if got := ratelimit.SetPolicies(set); !reflect.DeepEqual(got, after) {
					t.Errorf("Policies() = %+v; want %+v", got, after)
				}
				// unchanged: the same Limiter, its 3 units still spent
				if l := mustGet(t, set, "steady"); l != steady {
					t.Errorf("steady: Get returned a new Limiter for an unchanged policy")
				}
				if r := peek(t, steady, "user:1"); r.Remaining != 2 {
					t.Errorf("steady after Update: Remaining %d; want 2 (3 of 5 spent before)", r.Remaining)
				}
				// changed: a new Limiter with the new limit; on Redis the
				// same keys, so the units spent still count
				newLogin := mustGet(t, set, "login")
				if newLogin == login || newLogin.Config().Limit != 8 {
					t.Fatalf("login: Get = %p with Limit %d; want a new Limiter (old %p) with Limit 8", newLogin, newLogin.Config().Limit, login)
				}
				// in process the new Limiter starts empty; on Redis it works on
				// the same keys: the units spent still count (how much, once
				// the limit changed, is the algorithm's rule)
				r := peek(t, newLogin, "user:1")
				if r.Limit != 8 || !b.redis && r.Remaining != 8 || b.redis && (r.Remaining < 0 || r.Remaining >= 8) {
					t.Errorf("login after Update: Limit %d, Remaining %d; want Limit 8, Remaining 8 in process, in [0, 8) on Redis", r.Limit, r.Remaining)
				}
				// a Limiter obtained before keeps its policy
				if r := peek(t, login, "user:1"); r.Limit != 5 {
					t.Errorf("login's old Limiter after Update: Limit %d; want 5, its own", r.Limit)
				}
				// removed: Get names it
				if _, err := set.Get("upload"); !errors.Is(err, strategy.ErrInvalidOption) || !strings.Contains(err.Error(), `no policy "upload"`) ||
					strings.Count(err.Error(), "ratelimit:") != 1 {
					t.Errorf(`Get("upload") after its removal = %v; want an error naming it, with one prefix`, err)
				}
				// added
				if r := peek(t, mustGet(t, set, "search"), "user:1"); r.Limit != 2 || r.Remaining != 2 {
					t.Errorf("search, added: %+v; want Limit 2, Remaining 2", r)
				}
				// the same policies again: nothing rebuilt
				again := mustGet(t, set, "login")
				if err := set.Update(ratelimit.SetPolicies(set)); err != nil {
					t.Fatal(err)
				}
				if mustGet(t, set, "login") != again || mustGet(t, set, "steady") != steady {
					t.Errorf("Update with the policies in force rebuilt a Limiter")
				}
			})
		}
	}
}

// A bad Update changes nothing, and says which policy and field are wrong.
func TestUpdateErrorChangesNothing(t *testing.T) {
	a := strategy.Algorithms()[0]
	good := ratelimit.Config{Algorithm: a, Limit: 5, Window: time.Minute}
	base := ratelimit.Policies{"login": good, "search": good}
	tooMany := ratelimit.Policies{}
	for i := range ratelimit.MaxPolicies + 1 {
		tooMany[fmt.Sprintf("p%d", i)] = good
	}
	with := func(name string, c ratelimit.Config) ratelimit.Policies {
		p := maps.Clone(base)
		p[name] = c
		return p
	}
	for _, c := range []struct {
		name string
		p    ratelimit.Policies
		want []string
		is   error
	}{
		{"negative limit", with("search", ratelimit.Config{Algorithm: a, Limit: -1, Window: time.Minute}),
			[]string{`policy "search"`, `field "limit"`, "Limit must be >= 0"}, strategy.ErrInvalidLimit},
		{"zero window", with("login", ratelimit.Config{Algorithm: a, Limit: 5}),
			[]string{`policy "login"`, `field "window"`, "Window must be > 0"}, strategy.ErrInvalidLimit},
		{"negative burst", with("upload", ratelimit.Config{Algorithm: a, Limit: 5, Window: time.Minute, Burst: -1}),
			[]string{`policy "upload"`, `field "burst"`}, strategy.ErrInvalidLimit},
		{"unknown algorithm", with("upload", ratelimit.Config{Algorithm: "leaky", Limit: 5, Window: time.Minute}),
			[]string{`policy "upload"`, `field "algorithm"`, `"leaky"`}, strategy.ErrInvalidOption},
		{"negative shards", with("upload", ratelimit.Config{Algorithm: a, Limit: 5, Window: time.Minute, Shards: -1}),
			[]string{`policy "upload"`, `field "shards"`}, strategy.ErrInvalidOption},
		{"braces in prefix", with("upload", ratelimit.Config{Algorithm: a, Limit: 5, Window: time.Minute, Prefix: "{x}"}),
			[]string{`policy "upload"`, `field "prefix"`}, strategy.ErrInvalidOption},
		{"unknown failure policy", with("upload", ratelimit.Config{Algorithm: a, Limit: 5, Window: time.Minute, OnFailure: "maybe"}),
			[]string{`policy "upload"`, `field "on_failure"`}, strategy.ErrInvalidOption},
		{"local share", with("upload", ratelimit.Config{Algorithm: a, Limit: 5, Window: time.Minute, LocalShare: 2}),
			[]string{`policy "upload"`, `field "local_share"`}, strategy.ErrInvalidOption},
		{"timeout", with("upload", ratelimit.Config{Algorithm: a, Limit: 5, Window: time.Minute, Timeout: time.Hour}),
			[]string{`policy "upload"`, `field "timeout"`}, strategy.ErrInvalidOption},
		{"bad name", with("log in", good), []string{`policy "log in"`, "policy name"}, strategy.ErrInvalidOption},
		{"name mismatch", with("upload", ratelimit.Config{Name: "x", Algorithm: a, Limit: 5, Window: time.Minute}),
			[]string{`policy "upload"`, `"x"`}, strategy.ErrInvalidOption},
		{"shared namespace", ratelimit.Policies{"ab": good, "b": {Algorithm: a, Limit: 5, Window: time.Minute, Prefix: "rl:a"}},
			[]string{`policy "b"`, `field "prefix"`}, strategy.ErrInvalidOption},
		{"too many", tooMany, []string{fmt.Sprintf("at most %d policies", ratelimit.MaxPolicies)}, strategy.ErrInvalidOption},
	} {
		for _, b := range setBuilders() {
			t.Run(c.name+"/"+b.name, func(t *testing.T) {
				set, err := b.new(t, base, conformance.NewClock(conformance.Epoch))
				if err != nil {
					t.Fatal(err)
				}
				login := mustGet(t, set, "login")
				err = set.Update(c.p)
				if err == nil {
					t.Fatal("Update: no error")
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %s", err, w)
					}
				}
				if !errors.Is(err, c.is) {
					t.Errorf("error %q does not wrap %v", err, c.is)
				}
				if n := strings.Count(err.Error(), "ratelimit:"); n != 1 {
					t.Errorf("error %q has %d prefixes; want 1", err, n)
				}
				if got := ratelimit.SetNames(set); !reflect.DeepEqual(got, []string{"login", "search"}) {
					t.Errorf("Names() after a failed Update = %q; want unchanged", got)
				}
				if !reflect.DeepEqual(ratelimit.SetPolicies(set), base) || mustGet(t, set, "login") != login {
					t.Errorf("a failed Update changed the policies in force")
				}
			})
		}
	}
}

func TestUpdateJSON(t *testing.T) {
	set, err := ratelimit.NewSet(nil, ratelimit.Policies{"login": {Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if err := updateJSON(set, []byte(`{"login": {"algorithm": "sliding_log", "limit": 2, "window": "1m"},
		"search": {"algorithm": "gcra", "limit": 10, "window": "1s"}}`)); err != nil {
		t.Fatal(err)
	}
	if l := mustGet(t, set, "login"); l.Config().Limit != 2 {
		t.Fatalf("login after UpdateJSON: Limit %d; want 2", l.Config().Limit)
	}
	for _, c := range []struct {
		name, doc string
		want      []string
	}{
		{"bad window", `{"login": {"algorithm": "sliding_log", "limit": 2, "window": "soon"}}`, []string{`policy "login"`, `field "window"`}},
		{"not JSON", `{"login": `, []string{"invalid JSON"}},
		{"too large", `{"login": {"algorithm": "sliding_log", "limit": 2, "window": "1m"}` + strings.Repeat(" ", ratelimit.MaxPolicyBytes) + `}`, []string{fmt.Sprintf("at most %d bytes", ratelimit.MaxPolicyBytes)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := updateJSON(set, []byte(c.doc))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %s", err, w)
				}
			}
			if got := ratelimit.SetNames(set); !reflect.DeepEqual(got, []string{"login", "search"}) || mustGet(t, set, "login").Config().Limit != 2 {
				t.Errorf("a failed UpdateJSON changed the set: %q", got)
			}
		})
	}
}

// TestUpdateKeepsUnchanged: Update rebuilds exactly the policies whose
// Config changed once scoped, Name "" and Name "a" being the same policy
// "a"; it adds and removes the others.
func TestUpdateKeepsUnchanged(t *testing.T) {
	c := ratelimit.Config{Algorithm: ratelimit.GCRA, Limit: 5, Window: time.Second}
	named := c
	named.Name = "a"
	bigger := c
	bigger.Limit = 6
	set, err := ratelimit.NewSet(nil, ratelimit.Policies{"a": c, "b": c, "c": c})
	if err != nil {
		t.Fatal(err)
	}
	a, b := mustGet(t, set, "a"), mustGet(t, set, "b")
	if err := set.Update(ratelimit.Policies{"a": named, "b": bigger, "d": c}); err != nil {
		t.Fatal(err)
	}
	if mustGet(t, set, "a") != a {
		t.Errorf("a: rebuilt; want kept (Name %q is policy a's own name: unchanged)", named.Name)
	}
	if l := mustGet(t, set, "b"); l == b || l.Config().Limit != 6 {
		t.Errorf("b: %p with Limit %d; want a new Limiter (old %p) with Limit 6", l, l.Config().Limit, b)
	}
	if got := ratelimit.SetNames(set); !reflect.DeepEqual(got, []string{"a", "b", "d"}) {
		t.Errorf("names after Update = %q; want a, b, d (c removed, d added)", got)
	}
	if err := set.Update(ratelimit.SetPolicies(set)); err != nil || mustGet(t, set, "a") != a {
		t.Errorf("Update with the policies in force = %v, or rebuilt a", err)
	}
}

// A removed policy's Limiter, once no one holds it, is collected with its
// in-process state: its twin's sweep timers do not keep it alive.
func TestUpdateRemovedLimiterIsCollected(t *testing.T) {
	for _, b := range setBuilders() {
		t.Run(b.name, func(t *testing.T) {
			p := withPrefix(ratelimit.Policies{
				"gone": {Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Minute, OnFailure: ratelimit.FailLocal},
				"kept": {Algorithm: ratelimit.GCRA, Limit: 5, Window: time.Minute},
			}, testredis.Prefix(t))
			set, err := b.new(t, p, conformance.NewClock(conformance.Epoch))
			if err != nil {
				t.Fatal(err)
			}
			wl := func() weak.Pointer[ratelimit.Limiter] {
				l := mustGet(t, set, "gone")
				for i := range 100 { // subjects arm the twins' timers
					if _, err := l.Allow(context.Background(), fmt.Sprintf("user:%d", i)); err != nil {
						t.Fatal(err)
					}
				}
				return weak.Make(l)
			}()
			delete(p, "gone")
			if err := set.Update(p); err != nil {
				t.Fatal(err)
			}
			for i := 0; wl.Value() != nil; i++ {
				if i == 100 {
					t.Fatal("the removed policy's Limiter is still reachable after 100 collections")
				}
				runtime.GC()
				time.Sleep(time.Millisecond)
			}
			runtime.KeepAlive(set) // the Set lives on: only it may let go
		})
	}
}

// observation is one decision made while the Set was being reloaded.
type observation struct {
	policy       string
	genBefore    int64 // the last generation published before Get
	genAfter     int64 // ... after the decision
	limit        int64 // Result.Limit; -1 when Get failed
	allowed      bool
	degraded     bool
	decisionErrs error
}

// The race test: goroutines decide through the Set while another reloads it
// many times with random changes. Every decision is made by a limiter of a
// generation in force during it (told by Result.Limit, unique per change);
// the policy that never changes keeps its state throughout (it allows
// exactly its limit to one subject under a frozen clock, however many
// reloads happen); no goroutine is left behind.
func TestReloadUnderLoad(t *testing.T) {
	for _, b := range setBuilders() {
		t.Run(b.name, func(t *testing.T) {
			const deciders = 4
			reloads, minDecisions := 200, 1500
			if b.redis {
				reloads, minDecisions = 60, 300 // a round trip per decision
			}
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, seed>>1))
			prefix := testredis.Prefix(t)
			algs := strategy.Algorithms()
			next := int64(10)
			random := func() ratelimit.Config {
				next++ // a limit unique to this change
				windows := []time.Duration{time.Second, time.Minute, time.Hour}
				return ratelimit.Config{Algorithm: algs[rng.IntN(len(algs))], Limit: next, Window: windows[rng.IntN(len(windows))],
					Prefix: prefix, Timeout: 10 * time.Second}
			}
			const steadyLimit = 50
			steady := ratelimit.Config{Algorithm: algs[rng.IntN(len(algs))], Limit: steadyLimit, Window: time.Hour, Prefix: prefix, Timeout: 10 * time.Second}
			names := []string{"a", "b", "c", "d", "e"}
			gens := []ratelimit.Policies{{"steady": steady, "a": random(), "b": random()}}
			clock := conformance.NewClock(conformance.Epoch) // frozen: nothing refills

			// baseline after the backend (shared server, client pool) is up
			set, err := b.new(t, gens[0], clock)
			if err != nil {
				t.Fatal(err)
			}
			mustGet(t, set, "steady")
			waitWorkersIdle := func() int {
				time.Sleep(600 * time.Millisecond) // the facade's idle workers exit after 500ms
				return runtime.NumGoroutine()
			}
			baseline := waitWorkersIdle()

			var published, decided atomic.Int64
			var done atomic.Bool
			step := int64(deciders * minDecisions / (reloads + 1)) // decisions between reloads
			obs := make([][]observation, deciders)
			var wg sync.WaitGroup
			for g := range deciders {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(seed+uint64(g)+1, 7))
					ctx := context.Background()
					for i := 0; i < minDecisions || !done.Load(); i++ {
						name := "steady"
						if i%4 != 0 {
							name = names[rng.IntN(len(names))]
						}
						o := observation{policy: name, genBefore: published.Load(), limit: -1}
						l, err := set.Get(name)
						if err == nil {
							key := fmt.Sprintf("user:%d", g)
							if name == "steady" {
								key = "steady-subject"
							}
							r, err := l.Allow(ctx, key)
							o.limit, o.allowed, o.degraded, o.decisionErrs = r.Limit, r.Allowed, r.Degraded, err
						}
						o.genAfter = published.Load()
						obs[g] = append(obs[g], o)
						decided.Add(1)
					}
				})
			}
			for k := 1; k <= reloads; k++ {
				for decided.Load() < int64(k)*step { // spread the reloads over the decisions
					time.Sleep(50 * time.Microsecond)
				}
				p := maps.Clone(gens[k-1])
				for _, n := range names {
					switch rng.IntN(6) {
					case 0:
						delete(p, n)
					case 1, 2:
						p[n] = random()
					}
				}
				gens = append(gens, p) // read by the checks only after wg.Wait
				if err := set.Update(p); err != nil {
					t.Error(err)
				}
				published.Store(int64(k))
				runtime.Gosched()
			}
			done.Store(true)
			wg.Wait()

			var decisions, steadyAllowed, steadyTried int
			for g, list := range obs {
				for _, o := range list {
					decisions++
					if o.decisionErrs != nil || o.degraded {
						t.Fatalf("decider %d, %s: error %v, degraded %v", g, o.policy, o.decisionErrs, o.degraded)
					}
					if o.policy == "steady" {
						steadyTried++
						if o.allowed {
							steadyAllowed++
						}
					}
					// the Limiter came from a generation in [genBefore, genAfter+1]
					ok := false
					for gen := o.genBefore; gen <= min(o.genAfter+1, int64(reloads)) && !ok; gen++ {
						c, in := gens[gen][o.policy]
						ok = in && c.Limit == o.limit || !in && o.limit == -1
					}
					if !ok {
						t.Fatalf("decider %d, %s: Limit %d (-1: no policy) in generations %d to %d; no generation there had it",
							g, o.policy, o.limit, o.genBefore, o.genAfter+1)
					}
				}
			}
			if steadyTried <= steadyLimit || steadyAllowed != steadyLimit {
				t.Errorf("steady, never changed over %d reloads: %d of %d requests allowed; want exactly %d (its state kept)",
					reloads, steadyAllowed, steadyTried, steadyLimit)
			}
			t.Logf("%d decisions during %d reloads", decisions, reloads)

			// no goroutine left behind: the count goes back to the baseline
			var n int
			for range 20 {
				if n = waitWorkersIdle(); n <= baseline {
					break
				}
			}
			if n > baseline {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines after the reloads, %d before:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}
