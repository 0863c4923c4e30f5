package propertytests

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/lease"
	"github.com/ratekit/ratelimit/strategy"
)

// leaseSubjects returns the leasable algorithms, each behind package
// lease: every host of a case (a process) leases blocks and spends them
// as the schedule's clock moves, so units are spent later than Redis
// decided them, up to a lease's lifetime (Window/8 here). The bound
// property holds them to the algorithm's own bound, from the times the
// units were spent; lease_return checks that the bucket's leases give
// back what they did not spend.
func leaseSubjects() []subject {
	var out []subject
	for _, a := range algorithms {
		switch a.name {
		case "slidinglog", "compactlog", "fixedwindow", "slidingcounter", "tokenbucket", "gcra":
		default:
			continue
		}
		s := a
		s.name, s.lease = "lease-"+a.name, true
		s.newRedis = func(rdb redis.Scripter, lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
			return newLeased(lim, o, func(l strategy.Limit) (strategy.Strategy, error) { return a.newRedis(rdb, l, o...) })
		}
		s.newLocal = nil // the log's twin records nothing ahead
		if a.kind != slidingLog {
			s.newLocal = func(lim strategy.Limit, o ...strategy.Option) (strategy.Strategy, error) {
				return newLeased(lim, o, func(l strategy.Limit) (strategy.Strategy, error) { return a.newLocal(l, o...) })
			}
		}
		out = append(out, s)
	}
	return out
}

// leased is a host's lease limiter, with what its strategy was asked,
// and that strategy under the limit itself, to decide without a lease.
type leased struct {
	*lease.Limiter
	rec    *recorder
	direct strategy.Strategy
}

// recorder counts the units a lease limiter's strategy allowed and the
// units it was asked to give back.
type recorder struct{ taken, refunded atomic.Int64 }

func newLeased(lim strategy.Limit, o []strategy.Option, build func(strategy.Limit) (strategy.Strategy, error)) (strategy.Strategy, error) {
	so, err := strategy.Apply(o)
	if err != nil {
		return nil, err
	}
	rec := &recorder{}
	var direct strategy.Strategy
	l, err := lease.New(lim, func(l strategy.Limit) (strategy.Strategy, error) {
		s, err := build(l)
		if err != nil {
			return nil, err
		}
		if direct == nil {
			direct = s
		}
		return recording{s, rec}, nil
	}, lease.WithClock(so.Clock), lease.WithLifetime(max(lim.Window/2, time.Millisecond)), lease.WithShare(1))
	if err != nil {
		return nil, err
	}
	return &leased{l, rec, direct}, nil
}

// recording is a strategy that counts into rec; it passes on the lease
// rule and the calls package lease makes.
type recording struct {
	strategy.Strategy
	rec *recorder
}

func (r recording) LeaseRule() engine.LeaseRule {
	return r.Strategy.(interface{ LeaseRule() engine.LeaseRule }).LeaseRule()
}

func (r recording) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	res, err := r.Strategy.AllowN(ctx, key, n)
	if err == nil && res.Allowed {
		r.rec.taken.Add(n)
	}
	return res, err
}

func (r recording) AllowAhead(ctx context.Context, key string, n int64, ahead time.Duration) (strategy.Result, error) {
	res, err := r.Strategy.(interface {
		AllowAhead(context.Context, string, int64, time.Duration) (strategy.Result, error)
	}).AllowAhead(ctx, key, n, ahead)
	if err == nil && res.Allowed {
		r.rec.taken.Add(n)
	}
	return res, err
}

func (r recording) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	r.rec.refunded.Add(n)
	return r.Strategy.(strategy.Refunder).RefundN(ctx, key, n)
}

// closeHosts closes the lease limiters of e's hosts, giving back what
// their leases hold.
func (e *env) closeHosts() error {
	for _, h := range e.hosts {
		if l, ok := h.(*leased); ok {
			if err := l.Close(context.Background()); err != nil {
				return err
			}
			if e.stats != nil {
				e.stats.local.Add(l.Stats().Local)
			}
		}
	}
	return nil
}

// checkLeaseReturn: on a concurrent schedule, once every host is closed, the
// units the bucket's leases took less those they gave back, and less those
// they held until the bucket had refilled them (stranded), are exactly the
// units spent: no lease's leftover is lost.
func checkLeaseReturn(e *env, c Case, _ func() (*env, error)) string {
	evs, msg := e.runConcurrent(c)
	if msg != "" {
		return msg
	}
	var used int64
	for _, ev := range evs {
		if ev.op == opAllow && ev.n > 0 && ev.res.Allowed {
			used += ev.n
		}
	}
	if err := e.closeHosts(); err != nil {
		return "close: " + err.Error()
	}
	var taken, refunded, stranded int64
	seen := map[*recorder]bool{}
	for _, h := range e.hosts {
		l := h.(*leased)
		if seen[l.rec] { // the local backend's hosts share one limiter
			continue
		}
		seen[l.rec] = true
		taken += l.rec.taken.Load()
		refunded += l.rec.refunded.Load()
		stranded += l.Stats().Stranded
	}
	if taken-refunded-stranded != used {
		return fmt.Sprintf("leases took %d units, gave back %d and stranded %d (refilled while leased), but %d were spent: %d lost",
			taken, refunded, stranded, used, taken-refunded-stranded-used)
	}
	return ""
}

// LateCase is a schedule that spends leased units late: host 0 asks K
// units at once, Rounds times in the same ms (its leases grow with its
// demand, past what it asks), D1 ms later J more (from
// what its lease holds, or a new one), and T3 ms after the start hosts 1
// and 2 ask Limit units each at once. D1 and T3 are taken modulo the
// ranges that matter: D1 in [1, W), T3 in [W, W + D1) (the lease's
// lifetime is W/2 here), so that the last batch lands where host 0's late
// units are still in the window, and its lease's units would be
// forgotten if they were not counted for a window from their use. For
// the fixed window and the sliding counter, on odd D1, the schedule
// crosses an aligned window's edge instead: it starts late in its window
// (600 to 850 ‰), J (at least 2) is spent just after the window's end and
// within the lease's lifetime, and the last batch comes at the end of the
// next window, so that a lease outliving its window would put J over
// that window's limit. For the logs and the window kinds hosts 1 and 2
// ask without leases (a lease's all-or-none block would leave units that cover an
// excess); the bucket's every process must lease.
type LateCase struct {
	Limit  int64
	Burst  int64
	Window int
	Phase  int
	K, J   int
	Rounds int
	D1, T3 int
}

func (c LateCase) String() string {
	return fmt.Sprintf("LateCase{Limit %d, Burst %d, Window #%d, Phase %d‰, K %d x %d, J %d, D1 %d, T3 %d}",
		c.Limit, c.Burst, c.Window, c.Phase, c.K, c.Rounds, c.J, c.D1, c.T3)
}

func genLate(windows int) gopter.Gen {
	return gen.Struct(reflect.TypeOf(LateCase{}), leaseGens(windows, map[string]gopter.Gen{
		"K":      gen.IntRange(2, 6),
		"J":      gen.IntRange(1, 3),
		"Rounds": gen.IntRange(2, 4),
		"D1":     gen.IntRange(0, 1<<20),
		"T3":     gen.IntRange(0, 1<<20),
	})).SuchThat(func(c LateCase) bool {
		return c.Limit >= 8 && c.Burst >= 0 && c.Window >= 0 && c.Window < windows && c.K >= 2 && c.J >= 1 && c.Rounds >= 2 &&
			int64(c.K*c.Rounds) < c.Limit && c.D1 >= 0 && c.T3 >= 0
	})
}

// leaseGens returns more with the generators of the fields every lease
// case has: Limit, Burst, Window and Phase.
func leaseGens(windows int, more map[string]gopter.Gen) map[string]gopter.Gen {
	m := map[string]gopter.Gen{
		"Limit":  gen.Int64Range(8, 32),
		"Burst":  gen.OneGenOf(gen.Const(int64(0)), gen.Int64Range(8, 32)),
		"Window": gen.IntRange(0, windows-1),
		"Phase":  gen.IntRange(0, 999),
	}
	maps.Copy(m, more)
	return m
}

// lateProp runs LateCases and holds their allowed units to the bound.
func lateProp(_ *testing.T, s subject, b backend, mk envBuilder, _ *stats) gopter.Prop {
	return prop.ForAll(func(c LateCase) string {
		lim := strategy.Limit{Limit: c.Limit, Window: b.windows[c.Window%len(b.windows)], Burst: c.Burst}
		// across the edge: a window algorithm's lease taken late in its
		// aligned window, J spent just after the window's end
		edge := (s.kind == fixedWindow || s.kind == slidingCounter) && c.D1%2 == 1
		phase, j := c.Phase, c.J
		if edge {
			phase, j = 600+c.Phase%250, max(j, 2)
		}
		e, err := mk(s, lim, Case{Window: c.Window, Phase: phase}.start(lim), false)
		if err != nil {
			return "build: " + err.Error()
		}
		defer e.closeHosts()
		w := lim.Window.Milliseconds()
		t0 := e.now()
		var evs []event
		batch := func(step int, counts ...int) string {
			var reqs []Req
			for h, n := range counts {
				for range n {
					reqs = append(reqs, Req{Host: h, N: 1})
				}
			}
			out, msg := e.runConcurrent(Case{Steps: []Step{{Reqs: reqs}}})
			for i := range out {
				out[i].step = step
			}
			evs = append(evs, out...)
			return msg
		}
		for range c.Rounds {
			if msg := batch(0, c.K); msg != "" {
				return msg
			}
		}
		d1 := 1 + int64(c.D1)%(w-1)
		last := t0 + w + int64(c.T3)%d1
		if edge {
			pos := t0 - floorDiv(t0, w)*w
			d1 = w - pos + 1 + int64(c.D1/2)%max(1, w/2-(w-pos)-1)
			// the last ms of the next window (the fixed window's guard
			// keeps a real Redis out of its last eighth)
			last = (floorDiv(t0, w)+2)*w - 1
			if s.kind == fixedWindow {
				last -= w / 8
			}
		}
		e.advance(d1)
		if msg := batch(1, j); msg != "" {
			return msg
		}
		e.advance(last - e.now())
		if s.kind.usesBurst() {
			if msg := batch(2, 0, int(c.Limit), int(c.Limit)); msg != "" {
				return msg
			}
		} else {
			out := make([]event, 2*c.Limit)
			var wg sync.WaitGroup
			for i := range out {
				h := 1 + i%2
				wg.Go(func() { out[i] = e.call(e.hosts[h].(*leased).direct, 2, h, 0, opAllow, 1) })
			}
			wg.Wait()
			for _, ev := range out {
				if ev.err != nil {
					return ev.String()
				}
			}
			evs = append(evs, out...)
		}
		return checkBound(s.kind, lim, evs)
	}, genLate(len(b.windows)))
}

// RefillCase is a schedule that gives a lease back after the bucket has
// refilled its units: host 0 asks K units at once, Rounds times in the
// same ms (its leases grow with its demand, past what it asks), the clock
// moves past a full refill of the bucket (and Extra ms more), host 1
// drains the bucket deciding directly, and host 0 closes, giving back what
// its lease holds. Those units are back in the bucket already: a refund of
// them would put them in a second time, over the limit.
type RefillCase struct {
	Limit     int64
	Burst     int64
	Window    int
	Phase     int
	K, Rounds int
	Extra     int
}

func (c RefillCase) String() string {
	return fmt.Sprintf("RefillCase{Limit %d, Burst %d, Window #%d, Phase %d‰, K %d x %d, Extra %d}",
		c.Limit, c.Burst, c.Window, c.Phase, c.K, c.Rounds, c.Extra)
}

func genRefill(windows int) gopter.Gen {
	return gen.Struct(reflect.TypeOf(RefillCase{}), leaseGens(windows, map[string]gopter.Gen{
		"K":      gen.IntRange(1, 4),
		"Rounds": gen.IntRange(2, 4),
		"Extra":  gen.IntRange(0, 1<<20),
	})).SuchThat(func(c RefillCase) bool {
		return c.Limit >= 8 && c.Burst >= 0 && c.Window >= 0 && c.Window < windows && c.K >= 1 && c.Rounds >= 2 &&
			int64(c.K*c.Rounds) < c.Limit && c.Extra >= 0
	})
}

// refillProp runs RefillCases: host 0's Close leaves the drained bucket as
// it was. held counts the cases where host 0's lease held units at its
// Close (the others check nothing); the property fails at its end if none
// did.
func refillProp(t *testing.T, s subject, b backend, mk envBuilder, _ *stats) gopter.Prop {
	var held atomic.Int64
	t.Cleanup(func() {
		if !t.Failed() && held.Load() == 0 {
			t.Errorf("lease_refilled of %s on %s is vacuous: no lease held units at its Close", s.name, b.name)
		}
	})
	return prop.ForAll(func(c RefillCase) string {
		lim := strategy.Limit{Limit: c.Limit, Window: b.windows[c.Window%len(b.windows)], Burst: c.Burst}
		e, err := mk(s, lim, Case{Window: c.Window, Phase: c.Phase}.start(lim), false)
		if err != nil {
			return "build: " + err.Error()
		}
		defer e.closeHosts()
		var spent int64
		for range c.Rounds {
			reqs := make([]Req, c.K)
			for i := range reqs {
				reqs[i] = Req{Host: 0, N: 1}
			}
			evs, msg := e.runConcurrent(Case{Steps: []Step{{Reqs: reqs}}})
			if msg != "" {
				return msg
			}
			for _, ev := range evs {
				if ev.res.Allowed {
					spent += ev.n
				}
			}
		}
		h0, h1 := e.hosts[0].(*leased), e.hosts[1].(*leased)
		st := h0.Stats()
		if st.Taken-st.Returned-st.Stranded-spent > 0 {
			held.Add(1)
		}
		// a full refill from empty, and more
		w := lim.Window.Milliseconds()
		e.advance(ceilDiv(lim.Capacity()*w, lim.Limit) + 1 + int64(c.Extra)%w)
		for {
			res, err := h1.direct.AllowN(ctx, subjects[0], 1)
			if err != nil {
				return "drain: " + err.Error()
			}
			if !res.Allowed {
				break
			}
		}
		before, err := h1.direct.Peek(ctx, subjects[0])
		if err != nil {
			return "peek: " + err.Error()
		}
		if err := h0.Close(ctx); err != nil {
			return "close: " + err.Error()
		}
		after, err := h1.direct.Peek(ctx, subjects[0])
		if err != nil {
			return "peek: " + err.Error()
		}
		if after.Remaining != before.Remaining {
			return fmt.Sprintf("host 0's lease given back after the bucket refilled its units: %d remaining before its Close, %d after (%+v, then %+v)",
				before.Remaining, after.Remaining, st, h0.Stats())
		}
		return ""
	}, genRefill(len(b.windows)))
}
