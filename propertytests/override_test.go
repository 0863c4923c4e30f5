package propertytests

import (
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/ratekit/ratelimit/strategy"
)

// The "tiers" property: one subject whose calls switch between per-call
// limits (strategy.LimitOverrider), tiers of the same window, at random
// instants, including the strategy's own calls (AllowN, Peek) between them.
// Every decision must be the one the documented rules give (the model
// below, an independent statement of each algorithm with the usage a
// subject keeps across a change of limit), and on Redis it must equal the
// local twin's on the same clock, field by field. The model is the bound:
// after any change of tier, no window lets through more than it allows.
//
// The rules (see strategy.LimitOverrider and the package docs):
//   - sliding log and compact log: a call of limit L at now passes when
//     the units allowed in (now - W, now] plus its cost are at most L.
//   - fixed window: the same over the aligned window that holds now.
//   - sliding counter: curr and prev are the units allowed in the aligned
//     window of now and the one before; used = min(curr, L) +
//     ⌈min(prev, L) × (W - elapsed) / W⌉; a call passes when used + cost <= L.
//   - token bucket and GCRA: u, the units used (a rational), falls by
//     L'/W per ms since the last allowed request, L' that request's limit,
//     down to 0; at a call of capacity C and limit L it is rounded up to a
//     multiple of 1/wp (wp = W / gcd(L, W)), capped at C, and the call
//     passes when u + cost <= C; an allowed call adds its cost. A Limit of
//     0 denies everything.
func init() {
	properties = append(properties, property{
		name: "tiers", backends: []string{"miniredis", "miniredis-time", "redis", "local"},
		applies: notSharded,
		custom: func(_ *testing.T, s subject, b backend, mk envBuilder, st *stats) gopter.Prop {
			return prop.ForAll(func(c TierCase) string {
				return checkTiers(mk, s, b.windows, c, st)
			}, genTierCase(len(b.windows)))
		},
	})
}

// TierCase is a subject's limit (tier 0 is the strategy's own) and the
// tiers its calls switch between.
type TierCase struct {
	Window int
	Phase  int
	Limits []int64 // the Limit of each tier; Limits[0] is the strategy's
	Bursts []int64 // the Burst of each tier (token bucket and GCRA)
	Steps  []TierStep
}

// TierStep moves the clock Wait thousandths of the window, then makes one
// call.
type TierStep struct {
	Wait int
	Tier int   // index into Limits; len(Limits): the strategy's own AllowN or Peek
	N    int64 // 0: PeekWith (Peek)
	Host int
}

func (c TierCase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "window #%d phase %d limits %v bursts %v:", c.Window, c.Phase, c.Limits, c.Bursts)
	for _, s := range c.Steps {
		fmt.Fprintf(&b, " +%d‰ t%d n%d;", s.Wait, s.Tier, s.N)
	}
	return b.String()
}

const tiers = 3

func genTierCase(windows int) gopter.Gen {
	// tier 1 low, tier 2 high, so that changes cross what a subject used
	low := gen.Frequency(map[int]gopter.Gen{1: gen.Const(int64(0)), 6: gen.Int64Range(1, 6)})
	high := gen.Int64Range(8, 24)
	burst := gen.OneGenOf(gen.Const(int64(0)), gen.Int64Range(1, 30))
	step := gen.Struct(reflect.TypeOf(TierStep{}), map[string]gopter.Gen{
		"Wait": gen.Frequency(map[int]gopter.Gen{4: gen.Const(0), 5: gen.IntRange(1, 150), 2: gen.IntRange(150, 1100)}),
		"Tier": gen.IntRange(0, tiers),
		"N":    gen.Frequency(map[int]gopter.Gen{1: gen.Const(int64(0)), 6: gen.Int64Range(1, 4), 2: gen.Int64Range(5, 12)}),
		"Host": gen.IntRange(0, hosts-1),
	})
	return gen.Struct(reflect.TypeOf(TierCase{}), map[string]gopter.Gen{
		"Window": gen.IntRange(0, windows-1),
		"Phase":  gen.IntRange(0, 999),
		"Limits": gopter.CombineGens(gen.Int64Range(1, 16), low, high).Map(func(v []any) []int64 {
			return []int64{v[0].(int64), v[1].(int64), v[2].(int64)}
		}),
		"Bursts": gen.SliceOfN(tiers, burst),
		"Steps": gen.IntRange(30, 80).FlatMap(func(n any) gopter.Gen {
			return gen.SliceOfN(n.(int), step)
		}, reflect.TypeOf([]TierStep{})),
	})
}

// tierModel is the documented rules, on the requests allowed so far.
type tierModel struct {
	kind    kind
	w       int64
	allowed []tierUnit // for the window kinds
	// token bucket and GCRA
	used    *big.Rat
	last    int64
	lastLim int64
}

type tierUnit struct{ at, n int64 }

// decide returns what a call of lim and cost n (0: peek) at now must get:
// allowed, remaining, and the capacity reported; and records it if allowed.
func (m *tierModel) decide(lim strategy.Limit, now, n int64) (bool, int64, int64) {
	want := max(n, 1)
	if m.kind.usesBurst() {
		return m.decideBucket(lim, now, n, want)
	}
	L := lim.Limit
	var used int64
	idx := floorDiv(now, m.w)
	switch m.kind {
	case slidingLog:
		for _, u := range m.allowed {
			if now-u.at < m.w {
				used += u.n
			}
		}
	case fixedWindow:
		for _, u := range m.allowed {
			if floorDiv(u.at, m.w) == idx {
				used += u.n
			}
		}
	case slidingCounter:
		var curr, prev int64
		for _, u := range m.allowed {
			switch floorDiv(u.at, m.w) {
			case idx:
				curr += u.n
			case idx - 1:
				prev += u.n
			}
		}
		elapsed := now - idx*m.w
		used = min(curr, L) + ceilDiv(min(prev, L)*(m.w-elapsed), m.w)
	}
	if want > L || used+want > L {
		return false, max(L-used, 0), L
	}
	if n > 0 {
		m.allowed = append(m.allowed, tierUnit{now, n})
	}
	return true, L - used - n, L
}

func (m *tierModel) decideBucket(lim strategy.Limit, now, n, want int64) (bool, int64, int64) {
	if lim.Limit == 0 {
		return false, 0, 0
	}
	c := lim.Capacity()
	u := new(big.Rat).Set(m.used)
	if now > m.last {
		u.Sub(u, big.NewRat((now-m.last)*m.lastLim, m.w))
		if u.Sign() < 0 {
			u.SetInt64(0)
		}
	}
	// rounded up to the call's scale, capped at its capacity
	wp := m.w / gcd(lim.Limit, m.w)
	x := new(big.Rat).Mul(u, big.NewRat(wp, 1))
	q := new(big.Int).Quo(x.Num(), x.Denom())
	if new(big.Rat).SetInt(q).Cmp(x) < 0 {
		q.Add(q, big.NewInt(1))
	}
	u.SetFrac(q, big.NewInt(wp))
	if capR := big.NewRat(c, 1); u.Cmp(capR) > 0 {
		u = capR
	}
	free := new(big.Rat).Sub(big.NewRat(c, 1), u)
	remaining := floorRat(free)
	if want > c || free.Cmp(big.NewRat(want, 1)) < 0 {
		return false, remaining, c
	}
	if n > 0 {
		m.used = u.Add(u, big.NewRat(n, 1))
		m.last, m.lastLim = now, lim.Limit
		remaining = floorRat(free.Sub(free, big.NewRat(n, 1)))
	}
	return true, remaining, c
}

func floorRat(r *big.Rat) int64 {
	return new(big.Int).Div(r.Num(), r.Denom()).Int64() // Euclidean: floor for a positive denominator
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// checkTiers runs c on a fresh environment and returns "" or the failure.
func checkTiers(mk envBuilder, s subject, windows []time.Duration, c TierCase, st *stats) string {
	w := windows[c.Window%len(windows)]
	lims := make([]strategy.Limit, max(len(c.Limits), 1))
	// shrinking may leave the generators' ranges: bring values back
	for i := range lims {
		lims[i] = strategy.Limit{Window: w}
		if i < len(c.Limits) {
			lims[i].Limit = inRange(c.Limits[i], 25)
		}
		if s.kind.usesBurst() && i < len(c.Bursts) {
			lims[i].Burst = inRange(c.Bursts[i], 31)
		}
	}
	lims[0].Limit = max(lims[0].Limit, 1)
	base := Case{Window: c.Window, Phase: c.Phase}
	e, err := mk(s, lims[0], base.start(lims[0]), true)
	if err != nil {
		return "build: " + err.Error()
	}
	m := &tierModel{kind: s.kind, w: w.Milliseconds(), used: new(big.Rat)}
	var log []string
	fail := func(format string, a ...any) string {
		return fmt.Sprintf("%s\nafter:\n  %s", fmt.Sprintf(format, a...), strings.Join(log, "\n  "))
	}
	for i, step := range c.Steps {
		step.N = inRange(step.N, 13)
		if step.Tier < 0 {
			step.Tier = 0
		}
		if step.Wait > 0 {
			e.advance(max(m.w*int64(step.Wait)/1000, 1))
		}
		now := e.now()
		lim, own := lims[0], step.Tier >= len(lims)
		if !own {
			lim = lims[step.Tier]
		}
		call := func(st strategy.Strategy) (strategy.Result, error) {
			if own {
				if step.N == 0 {
					return st.Peek(ctx, "user:42")
				}
				return st.AllowN(ctx, "user:42", step.N)
			}
			o, ok := st.(strategy.LimitOverrider)
			if !ok {
				return strategy.Result{}, fmt.Errorf("%T does not implement strategy.LimitOverrider", st)
			}
			if step.N == 0 {
				return o.PeekWith(ctx, "user:42", lim)
			}
			return o.AllowNWith(ctx, "user:42", step.N, lim)
		}
		// the twin first: it must not see the host's write
		var twin strategy.Result
		if e.twin != nil {
			if twin, err = call(e.twin); err != nil {
				return fail("step %d: twin: %v", i, err)
			}
		}
		res, err := call(e.hosts[step.Host%len(e.hosts)])
		if err != nil {
			return fail("step %d: %v", i, err)
		}
		st.calls.Add(1)
		if res.Allowed {
			st.allowed.Add(1)
		} else {
			st.denied.Add(1)
		}
		desc := fmt.Sprintf("t=%d %s n=%d: allowed %v remaining %d limit %d retry %v reset %v",
			now-base.start(lims[0]).UnixMilli(), lim, step.N, res.Allowed, res.Remaining, res.Limit, res.RetryAfter, res.ResetAfter)
		if own {
			desc += " (the strategy's own call)"
		}
		wantOK, wantRem, wantLim := m.decide(lim, now, step.N)
		if res.Allowed != wantOK || res.Remaining != wantRem || res.Limit != wantLim {
			return fail("step %d: %s; the rules say allowed %v remaining %d limit %d", i, desc, wantOK, wantRem, wantLim)
		}
		if e.twin != nil && twin != res {
			return fail("step %d: %s; the twin said %+v", i, desc, twin)
		}
		log = append(log, desc)
	}
	return ""
}

// inRange maps v into [0, n).
func inRange(v, n int64) int64 {
	if v < 0 {
		v = -v
	}
	return v % n
}

// The bugs of per-call limits that the tiers property must catch: an
// override ignored, usage forgotten on a change of limit, usage read in the
// wrong scale, usage above a lower limit forgotten. They join the mutation
// check (TestMutants) here rather than in mutation_test.go's table.
func init() {
	mutants = append(mutants,
		mutant{
			name:     "token bucket: a per-call limit ignored on Redis",
			file:     "internal/exact/spec.go",
			edits:    []edit{{old: `append(a, p.args[0], p.args[1], p.args[2], n, now)`, new: `append(a, own.args[0], own.args[1], own.args[2], n, now)`}},
			subjects: "tokenbucket", backends: "miniredis",
		},
		mutant{
			name:     "token bucket script: the bucket refilled on a change of limit",
			file:     "tokenbucket/tokenbucket.lua",
			edits:    []edit{{old: `tokens = full - math.min(math.ceil(d * (window / owp) / (window / wp)), full)`, new: `tokens = full -- MUTANT`}},
			subjects: "tokenbucket", backends: "redis",
		},
		mutant{
			name:     "GCRA script: TAT read as if written under the call's limit",
			file:     "gcra/gcra.lua",
			edits:    []edit{{old: `ahead = math.ceil(ahead * (window / owp) / (window / wp))`, new: `ahead = ahead -- MUTANT`}},
			subjects: "gcra", backends: "miniredis",
		},
		mutant{
			name:     "GCRA twin: the stored scale ignored",
			file:     "gcra/gcra.go",
			edits:    []edit{{old: `olp, owp := v.Of(own)`, new: `olp, owp := own.LP, own.WP // MUTANT`}},
			subjects: "gcra", backends: "local",
		},
		mutant{
			name:     "sliding counter twin: the previous window stored capped at the call's limit",
			file:     "slidingcounter/slidingcounter.go",
			edits:    []edit{{old: `curr: curr + n, prev: rawPrev}`, new: `curr: curr + n, prev: min(rawPrev, limit)} // MUTANT`}},
			subjects: "slidingcounter", backends: "local",
		},
		mutant{
			name:     "sliding counter script: the previous window stored capped at the call's limit",
			file:     "slidingcounter/slidingcounter.lua",
			edits:    []edit{{old: `int((tag * 1048576 + rawprev) * 1048576 + curr + n), 'PX', int(reset))`, new: `int((tag * 1048576 + prev) * 1048576 + curr + n), 'PX', int(reset))`}},
			subjects: "slidingcounter", backends: "miniredis",
		},
		mutant{
			name: "fixed window: a per-call limit ignored",
			file: "fixedwindow/fixedwindow.go",
			edits: []edit{{
				old: `Params: func(lim strategy.Limit, _ *params) (params, error) {`,
				new: "Params: func(lim strategy.Limit, own *params) (params, error) {\nif own != nil { lim.Limit = own.limit } // MUTANT\n",
			}},
			subjects: "fixedwindow", backends: "local",
		},
		mutant{
			name:     "engine: a per-call limit ignored (the strategy's own decides)",
			file:     "internal/engine/redis.go",
			edits:    []edit{{old: `	if !with {`, new: `	if true { // MUTANT`}},
			subjects: "gcra", backends: "local",
		},
	)
}
