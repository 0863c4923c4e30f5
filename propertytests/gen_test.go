package propertytests

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/strategy"
)

// Operations a request can make.
const (
	opAllow = iota
	opPeek
	opReset
)

// hosts is the number of app hosts: separate clients and strategy instances
// sharing one Redis.
const hosts = 3

// subjects are the keys schedules use; bytes that keys must escape included.
var subjects = []string{"user:42", "{a}#0", "b"}

// Req is one call of a schedule.
type Req struct {
	Host    int   // the app host that makes it
	Subject int   // index into subjects
	N       int64 // cost; 0 behaves as Peek, above the capacity can never pass
	Op      int   // opAllow, opPeek or opReset
	Take    bool  // remaining: then spend exactly the Remaining just returned
}

func (r Req) String() string {
	s := fmt.Sprintf("h%d %s", r.Host, subjects[r.Subject])
	switch r.Op {
	case opPeek:
		return s + " Peek"
	case opReset:
		return s + " Reset"
	}
	s += fmt.Sprintf(" AllowN(%d)", r.N)
	if r.Take {
		s += " +take"
	}
	return s
}

// Step moves the clock, then issues a batch of requests.
type Step struct {
	Wait int // how the clock moves: see advance
	Arg  int // a parameter of Wait
	Reqs []Req
}

// Waits: how a step moves the clock.
const (
	waitNone       = iota // same millisecond
	waitMs                // 1 ms
	waitSmall             // 1 to 20 ms
	waitFraction          // Arg/16 of the window
	waitWindowLess        // the window minus 1 ms
	waitWindow            // exactly the window
	waitWindowMore        // the window plus 1 ms
	waitInterval          // the emission interval ceil(Window/Limit)
	waitEdge              // to the next aligned window edge (Arg odd: 1 ms before it)
	waitLong              // two windows and then some
	numWaits
)

// advance returns how far a step moves a clock that reads now (Unix ms).
func (s Step) advance(lim strategy.Limit, now int64) int64 {
	w := lim.Window.Milliseconds()
	arg := int64(s.Arg)
	switch s.Wait {
	case waitMs:
		return 1
	case waitSmall:
		return 1 + arg%20
	case waitFraction:
		return w * (arg % 17) / 16
	case waitWindowLess:
		return w - 1
	case waitWindow:
		return w
	case waitWindowMore:
		return w + 1
	case waitInterval:
		return ceilDiv(w, max(lim.Limit, 1))
	case waitEdge:
		next := (now/w + 1) * w
		if arg%2 == 1 && next-1 > now {
			return next - 1 - now
		}
		return next - now
	case waitLong:
		return 2*w + arg%w
	}
	return 0
}

func (s Step) String() string {
	names := [...]string{"0", "1ms", "small", "frac", "W-1", "W", "W+1", "interval", "edge", "long"}
	var b strings.Builder
	fmt.Fprintf(&b, "+%s(%d) [", names[s.Wait%numWaits], s.Arg)
	for i, r := range s.Reqs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r.String())
	}
	b.WriteString("]")
	return b.String()
}

// Case is one generated test case: a limit, a start time and a schedule.
type Case struct {
	Limit  int64
	Burst  int64 // 0 means Limit
	Window int   // index into the backend's windows
	Phase  int   // start, in thousandths of the window after an aligned edge
	Steps  []Step
}

func (c Case) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Case{Limit %d, Burst %d, Window #%d, Phase %d‰, %d steps:", c.Limit, c.Burst, c.Window, c.Phase, len(c.Steps))
	for _, s := range c.Steps {
		b.WriteString("\n    ")
		b.WriteString(s.String())
	}
	b.WriteString("}")
	return b.String()
}

// limit returns the strategy.Limit of c on a backend with the given windows.
func (c Case) limit(windows []time.Duration) strategy.Limit {
	return strategy.Limit{Limit: c.Limit, Window: windows[c.Window%len(windows)], Burst: c.Burst}
}

// start returns the clock's start: Phase thousandths of the window after
// an instant aligned to the window.
func (c Case) start(lim strategy.Limit) time.Time {
	w := lim.Window.Milliseconds()
	base := conformance.Epoch.UnixMilli()
	base -= base % w
	return time.UnixMilli(base + w*int64(c.Phase%1000)/1000).UTC()
}

// genOpts shapes the schedules of one property.
type genOpts struct {
	windows  int  // how many windows the backend offers
	maxBatch int  // largest batch (1: serial schedules)
	subjects int  // how many subjects the schedule uses
	peeks    bool // include Peek
	resets   bool // include Reset
	takes    bool // set Req.Take sometimes
	maxLimit int64
}

func genReq(o genOpts) gopter.Gen {
	ops := []gen.WeightedGen{{Weight: 17, Gen: gen.Const(opAllow)}}
	if o.peeks {
		ops = append(ops, gen.WeightedGen{Weight: 3, Gen: gen.Const(opPeek)})
	}
	if o.resets {
		ops = append(ops, gen.WeightedGen{Weight: 1, Gen: gen.Const(opReset)})
	}
	take := gen.Const(false)
	if o.takes {
		take = gen.Weighted([]gen.WeightedGen{{Weight: 3, Gen: gen.Const(false)}, {Weight: 1, Gen: gen.Const(true)}})
	}
	return gen.Struct(reflect.TypeOf(Req{}), map[string]gopter.Gen{
		"Host":    gen.IntRange(0, hosts-1),
		"Subject": gen.IntRange(0, o.subjects-1),
		"N": gen.Weighted([]gen.WeightedGen{
			{Weight: 12, Gen: gen.Const(int64(1))},
			{Weight: 5, Gen: gen.Int64Range(1, 3)},
			{Weight: 1, Gen: gen.Const(int64(0))},
			{Weight: 2, Gen: gen.Int64Range(1, 2*o.maxLimit+1)},
		}),
		"Op":   gen.Weighted(ops),
		"Take": take,
	})
}

// genBatch generates batches of 1 to o.maxBatch requests, mostly small.
func genBatch(o genOpts) gopter.Gen {
	reqs := gen.SliceOf(genReq(o), reflect.TypeOf(Req{}))
	return func(p *gopter.GenParameters) *gopter.GenResult {
		size := 2 // SliceOf draws a length in [MinSize, MaxSize)
		if o.maxBatch > 1 {
			switch r := p.Rng.Intn(10); {
			case r < 3:
				size = 2
			case r < 7:
				size = 1 + min(4, o.maxBatch)
			default:
				size = 1 + o.maxBatch
			}
		}
		q := *p
		q.MinSize = 1
		q.MaxSize = size
		return reqs(&q)
	}
}

func genStep(o genOpts) gopter.Gen {
	return gen.Struct(reflect.TypeOf(Step{}), map[string]gopter.Gen{
		"Wait": gen.Weighted([]gen.WeightedGen{
			{Weight: 6, Gen: gen.Const(waitNone)},
			{Weight: 2, Gen: gen.Const(waitMs)},
			{Weight: 2, Gen: gen.Const(waitSmall)},
			{Weight: 6, Gen: gen.Const(waitFraction)},
			{Weight: 1, Gen: gen.Const(waitWindowLess)},
			{Weight: 1, Gen: gen.Const(waitWindow)},
			{Weight: 1, Gen: gen.Const(waitWindowMore)},
			{Weight: 2, Gen: gen.Const(waitInterval)},
			{Weight: 2, Gen: gen.Const(waitEdge)},
			{Weight: 1, Gen: gen.Const(waitLong)},
		}),
		"Arg":  gen.IntRange(0, 999),
		"Reqs": genBatch(o),
	})
}

// genCase generates cases whose schedules have up to the size parameter of
// steps (gopter grows it from 1 to RATELIMIT_PROP_STEPS over a run).
func genCase(o genOpts) gopter.Gen {
	if o.maxLimit == 0 {
		o.maxLimit = 8
	}
	return gen.Struct(reflect.TypeOf(Case{}), map[string]gopter.Gen{
		"Limit": gen.Weighted([]gen.WeightedGen{
			{Weight: 8, Gen: gen.Int64Range(1, 4)},
			{Weight: 4, Gen: gen.Int64Range(1, o.maxLimit)},
		}),
		"Burst": gen.Weighted([]gen.WeightedGen{
			{Weight: 1, Gen: gen.Const(int64(0))},
			{Weight: 1, Gen: gen.Int64Range(1, 2*o.maxLimit)},
		}),
		"Window": gen.IntRange(0, o.windows-1),
		"Phase":  gen.IntRange(0, 999),
		"Steps":  gen.SliceOf(genStep(o), reflect.TypeOf(Step{})),
	}).SuchThat(o.valid)
}

// valid reports whether c is a case o can generate. Shrinking (which halves
// and negates numbers, and drops elements) is kept to valid cases by it.
func (o genOpts) valid(c Case) bool {
	if c.Limit < 1 || c.Limit > o.maxLimit || c.Burst < 0 || c.Burst > 2*o.maxLimit ||
		c.Window < 0 || c.Window >= o.windows || c.Phase < 0 || c.Phase > 999 {
		return false
	}
	for _, s := range c.Steps {
		if s.Wait < 0 || s.Wait >= numWaits || s.Arg < 0 || s.Arg > 999 || len(s.Reqs) < 1 || len(s.Reqs) > o.maxBatch {
			return false
		}
		for _, r := range s.Reqs {
			if r.Host < 0 || r.Host >= hosts || r.Subject < 0 || r.Subject >= o.subjects ||
				r.N < 0 || r.N > 2*o.maxLimit+1 || r.Op < opAllow || r.Op > opReset ||
				(r.Op == opPeek && !o.peeks) || (r.Op == opReset && !o.resets) || (r.Take && !o.takes) {
				return false
			}
		}
	}
	return true
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
