package propertytests

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/strategy"
)

// property is one invariant, checked over generated cases.
type property struct {
	name     string
	backends []string             // the backends it runs on
	applies  func(s subject) bool // nil: every subject
	opts     genOpts              // the schedules it needs (windows set per backend)
	twin     bool                 // the environment needs the local twin
	// check runs c on e and returns "" or the failure; again builds another
	// fresh environment for the same case.
	check func(e *env, c Case, again func() (*env, error)) string
	// custom, when set, is the whole property, with cases of its own.
	custom func(t *testing.T, s subject, b backend, mk envBuilder, st *stats) gopter.Prop
	// mayNotDeny: a run without any denial is not vacuous.
	mayNotDeny bool
	// realTime: each case takes real time; a tenth of the cases.
	realTime bool
	// leases: it applies to the lease subjects too (the others do not).
	leases bool
}

var (
	redisBackends = []string{"miniredis", "miniredis-time", "redis", "miniredis-batched", "redis-batched"}
	mainBackends  = []string{"miniredis", "redis", "local", "miniredis-batched", "redis-batched"}
	serialOpts    = genOpts{maxBatch: 4, subjects: 2, peeks: true}
)

func notSharded(s subject) bool { return !s.sharded() }

var properties = []property{
	{
		name: "bound", backends: mainBackends, leases: true,
		opts: genOpts{maxBatch: 16, subjects: 2},
		check: func(e *env, c Case, _ func() (*env, error)) string {
			evs, msg := e.runConcurrent(c)
			if msg != "" {
				return msg
			}
			return checkBound(e.sub.kind, e.lim, evs)
		},
	},
	{
		name: "exact", backends: []string{"miniredis", "miniredis-time", "redis", "local", "miniredis-batched", "redis-batched"}, applies: notSharded,
		opts: genOpts{maxBatch: 4, subjects: 2, peeks: true, resets: true},
		check: func(e *env, c Case, _ func() (*env, error)) string {
			evs, msg := e.runSerial(c, nil)
			if msg != "" {
				return msg
			}
			return checkExact(e.sub.kind, e.lim, evs)
		},
	},
	{
		name: "steady", backends: mainBackends, mayNotDeny: true,
		applies: func(s subject) bool { return notSharded(s) && s.kind != slidingCounter },
		custom: func(_ *testing.T, s subject, b backend, mk envBuilder, _ *stats) gopter.Prop {
			return prop.ForAll(func(c SteadyCase) string {
				return checkSteady(mk, s, b.windows, c)
			}, genSteady(len(b.windows)))
		},
	},
	{
		name: "bound_servertime", backends: []string{"redis"}, realTime: true,
		custom: func(t *testing.T, s subject, _ backend, _ envBuilder, st *stats) gopter.Prop {
			return serverTimeProp(t, s, st)
		},
	},
	{
		name: "denied_inert", backends: mainBackends, applies: notSharded,
		opts:  serialOpts,
		check: checkDeniedInert,
	},
	{
		name: "retry_after", backends: mainBackends, applies: notSharded,
		opts:  serialOpts,
		check: checkRetryAfter,
	},
	{
		name: "remaining", backends: mainBackends, applies: notSharded,
		opts:  genOpts{maxBatch: 4, subjects: 2, peeks: true, takes: true},
		check: checkRemaining,
	},
	{
		name: "twin", backends: redisBackends, twin: true, applies: notSharded,
		opts:  genOpts{maxBatch: 4, subjects: 3, peeks: true, resets: true},
		check: checkTwin,
	},
	{
		name: "entries", backends: redisBackends,
		applies: func(s subject) bool { return notSharded(s) && s.algorithm == ratelimit.SlidingLog }, // the sorted set
		opts:    genOpts{maxBatch: 8, subjects: 2, peeks: true},
		check:   checkEntries,
	},
	{
		name: "compare", backends: mainBackends, applies: notSharded,
		custom: compareProp, // compare_test.go
	},
	{
		name: "shadow", backends: mainBackends, applies: notSharded, // shards start their round robin at random
		custom: shadowProp, // shadow_test.go
	},
	{
		// the one algorithm that refuses, at every window, a limit that
		// Limit.Validate accepts (above compactlog.MaxLimit)
		name: "caller_errors", backends: mainBackends, applies: func(s subject) bool { return s.name == "compactlog" },
		custom: callerErrorProp, // callererror_test.go
	},
	{
		name: "lease_late", backends: mainBackends, leases: true, applies: func(s subject) bool { return s.lease },
		custom: lateProp, // lease_test.go
	},
	{
		name: "lease_return", backends: mainBackends, leases: true, mayNotDeny: true,
		applies: func(s subject) bool { return s.lease && s.kind.usesBurst() },
		opts:    genOpts{maxBatch: 16, subjects: 2, peeks: true},
		check:   checkLeaseReturn, // lease_test.go
	},
	{
		// the bucket's state is the hosts' shared one only on Redis (the
		// local twin's is its own instance's)
		name: "lease_refilled", backends: []string{"miniredis", "redis", "miniredis-batched", "redis-batched"}, leases: true,
		applies: func(s subject) bool { return s.lease && s.kind.usesBurst() },
		custom:  refillProp, // lease_test.go
	},
	{
		name: "ttl", backends: redisBackends,
		opts:  genOpts{maxBatch: 4, subjects: 2, peeks: true},
		check: checkTTL,
	},
	{
		name: "replicated", backends: []string{"redis-durable", "redis-durable-batched"},
		opts:  serialOpts,
		check: checkReplicated, // durable_test.go
	},
}

// checkRetryAfter: at every denial, RetryAfter is Never exactly when n
// exceeds the capacity; otherwise waiting RetryAfter lets the same request
// pass and (where RetryAfter is exact) 1 ms less does not.
func checkRetryAfter(e *env, c Case, _ func() (*env, error)) string {
	capacity := e.sub.kind.capacity(e.lim)
	_, msg := e.runSerial(c, func(ev event) string {
		want := ev.n
		if ev.op == opPeek || want == 0 {
			want = 1
		}
		r := ev.res
		switch {
		case r.Allowed && r.RetryAfter != 0:
			return fmt.Sprintf("%s: allowed with RetryAfter %v, want 0", ev, r.RetryAfter)
		case r.Allowed:
			return ""
		case want > capacity:
			if r.RetryAfter != strategy.Never {
				return fmt.Sprintf("%s: %d units exceed the capacity %d, want RetryAfter Never", ev, want, capacity)
			}
			return ""
		case r.RetryAfter <= 0:
			return fmt.Sprintf("%s: denied with RetryAfter %v although %d units fit in the capacity %d", ev, r.RetryAfter, want, capacity)
		}
		retry := func(what string) event {
			if ev.op == opPeek {
				return e.call(e.hosts[ev.host], ev.step, ev.host, ev.subject, opPeek, 0)
			}
			return e.call(e.hosts[ev.host], ev.step, ev.host, ev.subject, opAllow, ev.n)
		}
		wait := r.RetryAfter.Milliseconds()
		if moved := int64(0); e.sub.exactRetry && wait > 1 {
			if moved = e.advance(wait - 1); moved == wait-1 { // a guard may move the clock further
				if early := retry("early"); early.err != nil || early.res.Allowed {
					return fmt.Sprintf("%s; %v later: %s: passed 1 ms before RetryAfter", ev, r.RetryAfter-time.Millisecond, early)
				}
			}
			e.advance(wait - moved)
		} else {
			e.advance(wait)
		}
		if again := retry("again"); again.err != nil || !again.res.Allowed {
			return fmt.Sprintf("%s; %v later: %s: want allowed once RetryAfter has passed", ev, r.RetryAfter, again)
		}
		return ""
	})
	return msg
}

// checkRemaining: right after a decision, Peek reports the same Remaining,
// Remaining+1 units are denied, and (when the case says so) exactly
// Remaining units pass and leave 0.
func checkRemaining(e *env, c Case, _ func() (*env, error)) string {
	capacity := e.sub.kind.capacity(e.lim)
	take := map[int]bool{} // event index -> Take
	i := 0
	for _, s := range c.Steps {
		for _, r := range s.Reqs {
			take[i] = r.Take
			i++
		}
	}
	i = 0
	_, msg := e.runSerial(c, func(ev event) string {
		defer func() { i++ }()
		r := ev.res
		if r.Remaining < 0 || r.Remaining > capacity || r.Limit != capacity {
			return fmt.Sprintf("%s: Remaining %d, Limit %d: want 0 <= Remaining <= Limit = capacity %d", ev, r.Remaining, r.Limit, capacity)
		}
		st := e.hosts[(ev.host+1)%hosts] // another host sees the same state
		p := e.call(st, ev.step, (ev.host+1)%hosts, ev.subject, opPeek, 0)
		if p.err != nil || p.res.Remaining != r.Remaining {
			return fmt.Sprintf("%s; then %s: Remaining differs at the same instant", ev, p)
		}
		over := e.call(st, ev.step, (ev.host+1)%hosts, ev.subject, opAllow, r.Remaining+1)
		if over.err != nil || over.res.Allowed {
			return fmt.Sprintf("%s; then %s: Remaining+1 units passed", ev, over)
		}
		if take[i] && r.Remaining > 0 {
			all := e.call(st, ev.step, (ev.host+1)%hosts, ev.subject, opAllow, r.Remaining)
			if all.err != nil || !all.res.Allowed || all.res.Remaining != 0 {
				return fmt.Sprintf("%s; then %s: want Remaining units allowed, leaving 0", ev, all)
			}
		}
		return ""
	})
	return msg
}

// checkTwin: every call gets the same Result from the Redis strategy and
// from its local twin.
func checkTwin(e *env, c Case, _ func() (*env, error)) string {
	_, msg := e.runSerial(c, func(ev event) string {
		tw := e.call(e.twin, ev.step, ev.host, ev.subject, ev.op, ev.n)
		if tw.err != nil || tw.res != ev.res {
			return fmt.Sprintf("redis %s\n     twin  %s", ev, tw)
		}
		return ""
	})
	return msg
}

// checkEntries: after any schedule a sliding log's sorted set holds at
// most one entry per request allowed in the window that ends at the last
// allowed request, plus the base entry: whatever the costs, entries that
// left the window are removed, and nothing else is stored.
func checkEntries(e *env, c Case, _ func() (*env, error)) string {
	evs, msg := e.runConcurrent(c)
	if msg != "" {
		return msg
	}
	keyer, ok := e.hosts[0].(interface{ Key(string) string })
	if !ok {
		return fmt.Sprintf("%T has no Key method", e.hosts[0])
	}
	w := e.lim.Window.Milliseconds()
	for subj, a := range allowedUnits(evs) {
		if len(a) == 0 {
			continue
		}
		last := a[len(a)-1].at
		bound := int64(1)
		for _, ev := range a {
			if last-ev.at < w {
				bound++
			}
		}
		key := keyer.Key(subjects[subj])
		n, err := e.card(key)
		if err != nil {
			return err.Error()
		}
		if n > bound {
			return fmt.Sprintf("%s holds %d entries after %d allowed requests, %d of them in the last window: want at most %d",
				key, n, len(a), bound-1, bound)
		}
	}
	return ""
}

// checkTTL: after any schedule every key carries a TTL no longer than its
// state can matter; on miniredis, once that time has passed, no key is left
// and every subject is back to full capacity.
func checkTTL(e *env, c Case, _ func() (*env, error)) string {
	if _, msg := e.runConcurrent(c); msg != "" {
		return msg
	}
	keys, err := e.keys()
	if err != nil {
		return err.Error()
	}
	bound := e.sub.maxTTL(e.lim)
	for k, ttl := range keys {
		if ttl <= 0 || ttl > bound {
			return fmt.Sprintf("key %q has TTL %v, want in (0, %v]", k, ttl, bound)
		}
	}
	if e.step == nil { // a real Redis: TTLs run in real time
		return ""
	}
	e.advance(bound.Milliseconds())
	if keys, err = e.keys(); err != nil || len(keys) > 0 {
		return fmt.Sprintf("%v after the longest TTL %v, keys are left: %v (%v)", bound, bound, keys, err)
	}
	for i := range subjects {
		p := e.call(e.hosts[0], -1, 0, i, opPeek, 0)
		if p.err != nil || p.res.Remaining != e.sub.kind.capacity(e.lim) {
			return fmt.Sprintf("%s: want full capacity once every key has expired", p)
		}
	}
	return ""
}

// checkDeniedInert runs c, then runs it again on a fresh environment without
// the requests the first run denied: every request left must get the same
// Result.
func checkDeniedInert(e *env, c Case, again func() (*env, error)) string {
	first, msg := e.runSerial(c, nil)
	if msg != "" {
		return msg
	}
	fresh, err := again()
	if err != nil {
		return "build: " + err.Error()
	}
	var kept Case = c
	kept.Steps = nil
	i := 0
	var want []event
	for _, s := range c.Steps {
		ks := Step{Wait: s.Wait, Arg: s.Arg}
		for _, r := range s.Reqs {
			if ev := first[i]; ev.op != opAllow || ev.n == 0 || ev.res.Allowed {
				ks.Reqs = append(ks.Reqs, r)
				want = append(want, ev)
			}
			i++
		}
		kept.Steps = append(kept.Steps, ks)
	}
	// steps left empty still move the clock
	var second []event
	for si, s := range kept.Steps {
		fresh.advance(s.advance(fresh.lim, fresh.now()))
		for _, r := range s.Reqs {
			ev := fresh.do(si, r)
			if ev.err != nil {
				return ev.String()
			}
			second = append(second, ev)
		}
	}
	for j := range want {
		if want[j].res != second[j].res {
			return fmt.Sprintf("with the denied requests: %s\n     without them:        %s", want[j], second[j])
		}
	}
	return ""
}

// SteadyCase is a client at the rate: Count requests of N units, each
// Interval(N) plus Extra[i] ms after the previous, with a Peek and requests
// of other subjects in between.
type SteadyCase struct {
	Limit  int64
	Burst  int64
	Window int
	Phase  int
	N      int64 // cost of each request: a divisor of Limit for window algorithms
	Drain  bool  // token bucket and GCRA: spend the whole burst first
	Extra  []int // ms added to each interval (0 mostly)
	Noise  []int // per request: 0 nothing, 1 a Peek midway, 2 a request of another subject midway
}

func (c SteadyCase) String() string {
	return fmt.Sprintf("SteadyCase{Limit %d, Burst %d, Window #%d, Phase %d‰, N %d, Drain %v, Extra %v, Noise %v}",
		c.Limit, c.Burst, c.Window, c.Phase, c.N, c.Drain, c.Extra, c.Noise)
}

func genSteady(windows int) gopter.Gen {
	return gen.Struct(reflect.TypeOf(SteadyCase{}), map[string]gopter.Gen{
		"Limit":  gen.Int64Range(1, 12),
		"Burst":  gen.OneGenOf(gen.Const(int64(0)), gen.Int64Range(1, 12)),
		"Window": gen.IntRange(0, windows-1),
		"Phase":  gen.IntRange(0, 999),
		"N":      gen.Int64Range(1, 4),
		"Drain":  gen.Bool(),
		"Extra":  gen.SliceOf(gen.Weighted([]gen.WeightedGen{{Weight: 5, Gen: gen.Const(0)}, {Weight: 1, Gen: gen.IntRange(0, 50)}})),
		"Noise":  gen.SliceOf(gen.IntRange(0, 2)),
	}).SuchThat(func(c SteadyCase) bool {
		return c.Limit >= 1 && c.Limit <= 12 && c.Burst >= 0 && c.Burst <= 12 && c.Window >= 0 && c.Window < windows &&
			c.Phase >= 0 && c.Phase <= 999 && c.N >= 1 && c.N <= 4 &&
			!slices.ContainsFunc(c.Extra, func(x int) bool { return x < 0 || x > 50 }) &&
			!slices.ContainsFunc(c.Noise, func(x int) bool { return x < 0 || x > 2 })
	})
}

// checkSteady: a client that spends n units every ceil(n*Window/Limit) ms or
// more is never denied: from a fresh subject for the window algorithms
// (with n dividing Limit, or it could not be steady), and after spending the
// whole burst for the token bucket and GCRA.
func checkSteady(mk envBuilder, s subject, windows []time.Duration, c SteadyCase) string {
	lim := strategy.Limit{Limit: c.Limit, Window: windows[c.Window%len(windows)], Burst: c.Burst}
	capacity := s.kind.capacity(lim)
	n := min(c.N, capacity)
	if !s.kind.usesBurst() {
		for lim.Limit%n != 0 {
			n--
		}
	}
	base := Case{Window: c.Window, Phase: c.Phase}
	e, err := mk(s, lim, base.start(lim), false)
	if err != nil {
		return "build: " + err.Error()
	}
	if s.kind.usesBurst() && c.Drain {
		if ev := e.call(e.hosts[0], 0, 0, 0, opAllow, capacity); ev.err != nil || !ev.res.Allowed {
			return fmt.Sprintf("%s: the first request of the whole burst was denied", ev)
		}
	}
	interval := ceilDiv(n*lim.Window.Milliseconds(), lim.Limit)
	for i := 0; i < len(c.Extra) || i < 8; i++ {
		wait := interval
		if i < len(c.Extra) {
			wait += int64(c.Extra[i])
		}
		if i == 0 && !(s.kind.usesBurst() && c.Drain) {
			wait = 0
		}
		noise := 0
		if i < len(c.Noise) {
			noise = c.Noise[i]
		}
		if noise != 0 && wait > 1 {
			e.advance(wait / 2)
			if noise == 1 {
				e.call(e.hosts[1], i, 1, 0, opPeek, 0)
			} else {
				e.call(e.hosts[2], i, 2, 1, opAllow, 1)
			}
			e.advance(wait - wait/2)
		} else {
			e.advance(wait)
		}
		if ev := e.call(e.hosts[i%hosts], i, i%hosts, 0, opAllow, n); ev.err != nil || !ev.res.Allowed {
			return fmt.Sprintf("request %d of a client spending %d units every %d ms or more: %s", i, n, interval, ev)
		}
	}
	return ""
}

// Settings of a run; see the package doc.
var (
	settingsOnce sync.Once
	propSeed     int64
	propCases    int // 0: per backend default
	propSteps    = 24
	propShrink   = 300
)

func settings(t *testing.T) {
	settingsOnce.Do(func() {
		propSeed = time.Now().UnixNano()
		for name, p := range map[string]*int{"RATELIMIT_PROP_CASES": &propCases, "RATELIMIT_PROP_STEPS": &propSteps, "RATELIMIT_PROP_SHRINK": &propShrink} {
			if v := os.Getenv(name); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					t.Fatalf("%s=%q: want a number >= 0", name, v)
				}
				*p = n
			}
		}
		if v := os.Getenv("RATELIMIT_PROP_SEED"); v != "" {
			s, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("RATELIMIT_PROP_SEED=%q: want an integer", v)
			}
			propSeed = s
		}
	})
}

// cases is how many cases property p checks on backend b.
func cases(p property, b backend) int {
	n := 15
	switch {
	case propCases > 0:
		n = propCases
	case b.name == "local":
		n = 40
	case b.name == "redis":
		n = 20
	}
	if p.realTime {
		n = max(n/10, 2)
	}
	return n
}

func TestProperties(t *testing.T) {
	settings(t)
	t.Logf("seed %d (replay with RATELIMIT_PROP_SEED=%d)", propSeed, propSeed)
	for _, s := range allSubjects() {
		t.Run(s.name, func(t *testing.T) {
			for _, b := range allBackends {
				t.Run(b.name, func(t *testing.T) {
					var mk envBuilder
					for _, p := range properties {
						if !slices.Contains(p.backends, b.name) || (p.applies != nil && !p.applies(s)) ||
							(s.lease && !p.leases) || (b.name == "local" && s.newLocal == nil) {
							continue
						}
						if mk == nil {
							mk = b.open(t)
						}
						t.Run(p.name, func(t *testing.T) { runProperty(t, s, b, mk, p) })
					}
				})
			}
		})
	}
}

func runProperty(t *testing.T, s subject, b backend, open envBuilder, p property) {
	var st stats
	counted := func(e *env, err error) (*env, error) {
		if e != nil {
			e.stats = &st
		}
		return e, err
	}
	mk := func(s subject, lim strategy.Limit, start time.Time, twin bool) (*env, error) {
		st.cases.Add(1)
		return counted(open(s, lim, start, twin))
	}
	params := gopter.DefaultTestParametersWithSeed(propSeed)
	params.MinSuccessfulTests = cases(p, b)
	params.MaxSize = propSteps
	params.MaxShrinkCount = propShrink
	var check gopter.Prop
	switch {
	case p.custom != nil:
		check = p.custom(t, s, b, mk, &st)
	default:
		o := p.opts
		o.windows = len(b.windows)
		check = prop.ForAll(func(c Case) string {
			lim := c.limit(b.windows)
			var envs []*env
			defer func() {
				for _, e := range envs {
					e.closeHosts() // the lease subjects' sweepers
				}
			}()
			e, err := mk(s, lim, c.start(lim), p.twin)
			if e != nil {
				envs = append(envs, e)
			}
			if err != nil {
				return "build: " + err.Error()
			}
			return p.check(e, c, func() (*env, error) {
				e, err := mk(s, lim, c.start(lim), false)
				if e != nil {
					envs = append(envs, e)
				}
				return e, err
			})
		}, genCase(o))
	}
	props := gopter.NewProperties(params)
	props.Property(p.name, check)
	var out strings.Builder
	if !props.Run(gopter.NewFormatedReporter(true, 1000, &out)) {
		t.Errorf("property %s of %s on %s failed:\n%s\nreplay: RATELIMIT_PROP_SEED=%d go test -run '^TestProperties$/^%s$/^%s$/^%s$' ./propertytests",
			p.name, s.name, b.name, out.String(), propSeed, s.name, b.name, p.name)
		return
	}
	t.Logf("%s", &st)
	// a property that never saw a denial (or never an allowed request)
	// checked nothing worth having
	if params.MinSuccessfulTests >= 2 && (st.allowed.Load() == 0 || (st.denied.Load() == 0 && !p.mayNotDeny)) {
		t.Errorf("property %s of %s on %s is vacuous: %s", p.name, s.name, b.name, &st)
	}
	if params.MinSuccessfulTests >= 2 && s.lease && st.local.Load() == 0 {
		t.Errorf("property %s of %s on %s is vacuous: no lease decided in process (%s)", p.name, s.name, b.name, &st)
	}
}
