package propertytests

import (
	"fmt"
	"slices"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// opRefund is a request that gives units back (strategy.Refunder.RefundN).
// The generated schedules have no such op: refund schedules turn some of
// their AllowN requests into refunds (see isRefund), so that the refund
// properties reuse the generators, shrinking included.
const opRefund = 100

// isRefund reports whether request j of step s is a refund in a refund
// schedule: about one request in four, picked by the step's Arg.
func isRefund(s Step, j int) bool { return s.Reqs[j].Op == opAllow && (s.Arg/4+j)%4 == 0 }

// refundString describes ev, a refund or not.
func refundString(ev event) string {
	if ev.op != opRefund {
		return ev.String()
	}
	return fmt.Sprintf("step %d at %s h%d RefundN(%d) %q = {Allowed:%v Remaining:%d RetryAfter:%v ResetAfter:%v}",
		ev.step, ms(ev.at), ev.host, ev.n, subjects[ev.subject], ev.res.Allowed, ev.res.Remaining, ev.res.RetryAfter, ev.res.ResetAfter)
}

// runRefunds runs c's schedule one request at a time, as runSerial does,
// with the requests isRefund picks made as RefundN. after, when not nil, is
// called after each request; a non-empty return stops the run with it.
func (e *env) runRefunds(c Case, after func(ev event) string) ([]event, string) {
	var evs []event
	for i, s := range c.Steps {
		e.advance(s.advance(e.lim, e.now()))
		for j, r := range s.Reqs {
			var ev event
			if isRefund(s, j) {
				ev = event{step: i, at: e.now(), host: r.Host, subject: r.Subject, op: opRefund, n: r.N}
				rf, ok := e.hosts[r.Host].(strategy.Refunder)
				if !ok {
					return evs, fmt.Sprintf("%T does not implement strategy.Refunder", e.hosts[r.Host])
				}
				ev.res, ev.err = rf.RefundN(ctx, subjects[r.Subject], r.N)
			} else {
				ev = e.do(i, r)
			}
			evs = append(evs, ev)
			if ev.err != nil {
				return evs, refundString(ev)
			}
			if after != nil {
				if msg := after(ev); msg != "" {
					return evs, msg
				}
			}
		}
	}
	return evs, ""
}

// refundProperties are the properties of schedules with refunds.
var refundProperties = []property{
	{
		// every Result, refunds' included, is the model's: the models of
		// checkExact, where a refund takes back the newest units that still
		// count (sliding log), the current window's (fixed window, sliding
		// counter), or adds tokens up to the burst (token bucket, GCRA)
		name: "refund_exact", backends: []string{"miniredis", "miniredis-time", "redis", "local", "miniredis-batched"}, applies: notSharded,
		opts:  genOpts{maxBatch: 4, subjects: 2, peeks: true, resets: true},
		check: checkRefundExact,
	},
	{
		// refunds never mint units: the units allowed, less those given
		// back, stay within the algorithm's bound in every window
		name: "refund_bound", backends: []string{"miniredis", "redis", "local"},
		opts:  genOpts{maxBatch: 4, subjects: 2, peeks: true},
		check: checkRefundBound,
	},
}

// The refund properties run as TestProperties' own, subtests
// TestProperties/<strategy>/<backend>/refund_*, and the mutation check
// runs them with the others; refundMutants join its mutants.
func init() {
	properties = append(properties, refundProperties...)
	mutants = append(mutants, refundMutants...)
}

// refundMutants are refund bugs, one per refund script at least (but
// multilimit's, whose strategy the properties do not run: its package tests
// hold it to its twin and its rules), and the sharded wrapper's.
var refundMutants = []mutant{
	{
		name:     "sliding log refund: whole entries only (the entry where it stops is not shrunk)",
		file:     "internal/unitlog/refund.lua",
		edits:    []edit{{old: `if (e[1] - base) % M > k then`, new: `if false then`}},
		subjects: "slidinglog", backends: "redis",
	},
	{
		name:     "sliding log twin refund: whole entries only",
		file:     "internal/unitlog/refund.go",
		edits:    []edit{{old: `			e.cum -= uint64(left)` + "\n", new: "\t\t\tg.n--\n"}},
		subjects: "slidinglog", backends: "local",
	},
	{
		name:     "compact log refund: every live unit given back, whatever n",
		file:     "compactlog/refund.lua",
		edits:    []edit{{old: `local lo, hi = 0, math.min(ARGV[7] + 0, count)`, new: `local lo, hi = 0, count`}},
		subjects: "compactlog", backends: "redis",
	},
	{
		name:     "fixed window refund: one unit more than asked (mints a unit)",
		file:     "fixedwindow/refund.lua",
		edits:    []edit{{old: `redis.call('INCRBY', KEYS[1], -r)`, new: `redis.call('INCRBY', KEYS[1], -r - 1)`}},
		subjects: "fixedwindow", backends: "redis",
	},
	{
		name:     "fixed window twin refund: one unit more than asked",
		file:     "internal/exact/window.go",
		edits:    []edit{{old: `c.count -= min(n, c.count)`, new: `c.count -= min(n+1, c.count)`}},
		subjects: "fixedwindow", backends: "local",
	},
	{
		name:     "sliding counter refund: no floor at 0 (borrows from the previous window)",
		file:     "slidingcounter/refund.lua",
		edits:    []edit{{old: "      r = math.min(r, c)\n", new: "\n"}},
		subjects: "slidingcounter", backends: "redis",
	},
	{
		name:     "token bucket refund: one token more than asked",
		file:     "tokenbucket/refund.lua",
		edits:    []edit{{old: `tokens = tokens + ARGV[10] * wp`, new: `tokens = tokens + (ARGV[10] + 1) * wp`}},
		subjects: "tokenbucket", backends: "redis",
	},
	{
		name:     "token bucket twin refund: above capacity (no cap at a full bucket)",
		file:     "tokenbucket/tokenbucket.go",
		edits:    []edit{{old: `b.deficit -= n * own.WP`, new: `b.deficit -= (n + 1) * own.WP`}},
		subjects: "tokenbucket", backends: "local",
	},
	{
		name:     "gcra refund: one emission interval more than asked",
		file:     "gcra/refund.lua",
		edits:    []edit{{old: `ahead = ahead - ARGV[11] * wp`, new: `ahead = ahead - (ARGV[11] + 1) * wp`}},
		subjects: "gcra", backends: "redis",
	},
	{
		name:     "sharded refund: every shard gives back n (up to n x shards in all)",
		file:     "sharded/refund.go",
		edits:    []edit{{old: `left -= gives[i]`, new: `_ = gives[i]`}},
		subjects: "sharded-(slidinglog|fixedwindow)", backends: "local",
	},
}

// checkRefundExact holds every Result of a serial schedule with refunds to
// the model of the algorithm (see refundProperties).
func checkRefundExact(e *env, c Case, _ func() (*env, error)) string {
	k, lim := e.sub.kind, e.lim
	hist := map[int][]event{} // per subject since its last Reset: allowed units, and refunds for the token models
	_, msg := e.runRefunds(c, func(ev event) string {
		if ev.op == opReset {
			hist[ev.subject] = nil
			return ""
		}
		h := hist[ev.subject]
		n := ev.n
		if ev.op != opAllow {
			n = 0
		}
		if ev.op == opRefund {
			h = refundModel(k, lim, h, ev.at, ev.n)
			hist[ev.subject] = h
		}
		var want strategy.Result
		switch k {
		case slidingLog, fixedWindow:
			want = windowModel(k, lim, h, ev.at, n)
		case tokenBucket, gcraKind:
			want = refundTokenModel(lim, h, ev.at, n)
		case slidingCounter:
			want = counterModel(lim, h, ev.at, n)
		default:
			return fmt.Sprintf("no exact model for algorithm kind %d", k)
		}
		if ev.res != want {
			return fmt.Sprintf("%s: want {Allowed:%v Remaining:%d RetryAfter:%v ResetAfter:%v Limit:%d}, got Limit %d (the model's units of %q: %v)",
				refundString(ev), want.Allowed, want.Remaining, want.RetryAfter, want.ResetAfter, want.Limit, ev.res.Limit, subjects[ev.subject], h)
		}
		if n > 0 && ev.res.Allowed {
			if k == slidingLog {
				hist[ev.subject] = slidingRecord(lim, h, ev)
			} else {
				hist[ev.subject] = append(h, ev)
			}
		}
		return ""
	})
	return msg
}

// refundModel is the history h of a subject after a refund of r units at
// now. Sliding log: the newest units that still count go (now - at < W);
// fixed window and sliding counter: the newest units of now's aligned
// window; token bucket and GCRA: a refund event (negative n) that
// refundTokenModel reads.
func refundModel(k kind, lim strategy.Limit, h []event, now, r int64) []event {
	w := lim.Window.Milliseconds()
	if k == tokenBucket || k == gcraKind {
		return append(h[:len(h):len(h)], event{at: now, n: -r, op: opRefund})
	}
	counts := func(at int64) bool {
		if k == slidingLog {
			return now-at < w
		}
		return floorDiv(at, w) == floorDiv(now, w)
	}
	out := slices.Clone(h)
	for i := len(out) - 1; i >= 0 && r > 0 && counts(out[i].at); i-- {
		take := min(r, out[i].n)
		out[i].n -= take
		r -= take
	}
	return slices.DeleteFunc(out, func(u event) bool { return u.n == 0 })
}

// refundTokenModel is tokenModel over a history with refunds: the bucket
// after event i is min(full, before + refill - n_i) for an allowed request
// and min(full, before + refill + r_i) for a refund of r_i (never above
// the burst), so the tokens at now are the minimum, over the events i, of
// full + rate*(now - t_i) - the units allowed after i (and i's own units
// when i is an allowed request; a refund's tokens are capped at full right
// after it), in integers scaled by W.
func refundTokenModel(lim strategy.Limit, h []event, now, n int64) strategy.Result {
	w, limit, b := lim.Window.Milliseconds(), lim.Limit, lim.Capacity()
	full := b * w
	tokens := full
	sum := int64(0) // units allowed (less refunds) from i on
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].op == opRefund {
			tokens = min(tokens, full+limit*(now-h[i].at)-sum*w)
			sum += h[i].n
			continue
		}
		sum += h[i].n
		tokens = min(tokens, full+limit*(now-h[i].at)-sum*w)
	}
	want := max(n, 1)
	allowed := want <= b && want*w <= tokens
	r := strategy.Result{Allowed: allowed, Limit: b, Remaining: floorDiv(tokens, w)}
	if allowed && n > 0 {
		tokens -= n * w
		r.Remaining = floorDiv(tokens, w)
	}
	r.ResetAfter = time.Duration(ceilDivAny(full-tokens, limit)) * time.Millisecond
	switch {
	case allowed:
	case want > b:
		r.RetryAfter = strategy.Never
	default:
		r.RetryAfter = time.Duration(ceilDivAny(want*w-tokens, limit)) * time.Millisecond
	}
	return r
}

// checkRefundBound: after a serial schedule of allows and refunds, the
// units allowed less the units given back stay within the algorithm's
// bound (checkBound). A refund of r at t is taken, in the check, from the
// newest units allowed in (t-W, t] not yet taken: the most any refund can
// give back, and the most lenient choice for every window after t, so a
// correct strategy (sharded too) never fails it and a refund that mints
// units does. Token bucket and GCRA: over every interval [a, b] at most
// Burst + rate*(b-a) units plus the units refunded in [a, b]. After the
// schedule every subject spends all it can, so that minted units show.
func checkRefundBound(e *env, c Case, _ func() (*env, error)) string {
	evs, msg := e.runRefunds(c, nil)
	if msg != "" {
		return msg
	}
	k, lim := e.sub.kind, e.lim
	// then every subject spends all it can, one unit at a time, at the
	// last instant: units a refund minted are spent and show
	capacity := k.capacity(lim)
	for subj := range subjects {
		for range 4*capacity + 4 {
			ev := e.call(e.hosts[0], len(c.Steps), 0, subj, opAllow, 1)
			if ev.err != nil {
				return ev.String()
			}
			evs = append(evs, ev)
			if !ev.res.Allowed {
				p := e.call(e.hosts[0], len(c.Steps), 0, subj, opPeek, 0)
				if p.err != nil {
					return p.String()
				}
				if p.res.Remaining == 0 {
					break
				}
			}
		}
	}
	if k == tokenBucket || k == gcraKind {
		return boundArrivalRefunds(lim, evs)
	}
	w := lim.Window.Milliseconds()
	var net []event // allowed requests, with the units refunds took back removed
	for _, ev := range evs {
		switch {
		case ev.op == opAllow && ev.n > 0 && ev.res.Allowed, ev.op == opReset:
			net = append(net, ev)
		case ev.op == opRefund:
			r := ev.n
			for i := len(net) - 1; i >= 0 && r > 0; i-- {
				u := &net[i]
				if u.op == opReset && u.subject == ev.subject {
					break
				}
				if u.subject != ev.subject || u.op != opAllow || ev.at-u.at >= w {
					continue
				}
				take := min(r, u.n)
				u.n -= take
				r -= take
			}
		}
	}
	return checkBound(k, lim, net)
}

// boundArrivalRefunds: over every interval [a, b] at most Burst +
// rate*(b-a) units are allowed, plus the units refunds asked back in
// [a, b], in exact integer arithmetic.
func boundArrivalRefunds(lim strategy.Limit, evs []event) string {
	w, b := lim.Window.Milliseconds(), lim.Capacity()
	for subj := range subjects {
		var a []event // allowed requests (n > 0) and refunds (n < 0) since the last Reset
		for _, ev := range evs {
			switch {
			case ev.subject != subj:
			case ev.op == opReset:
				a = nil
			case ev.op == opAllow && ev.n > 0 && ev.res.Allowed:
				a = append(a, ev)
			case ev.op == opRefund:
				ev.n = -ev.n
				a = append(a, ev)
			}
		}
		for i := range a {
			if a[i].n < 0 {
				continue
			}
			allowed, refunded := int64(0), int64(0)
			for j := i; j < len(a); j++ {
				if a[j].n < 0 {
					refunded -= a[j].n
					continue
				}
				allowed += a[j].n
				if allowed*w > (b+refunded)*w+lim.Limit*(a[j].at-a[i].at) {
					return fmt.Sprintf("subject %q: %d units allowed in [%s, %s] (%d ms), more than burst %d + %d/%v x %d ms + %d refunded; from %s to %s",
						subjects[subj], allowed, ms(a[i].at), ms(a[j].at), a[j].at-a[i].at, b, lim.Limit, lim.Window, a[j].at-a[i].at, refunded, a[i], a[j])
				}
			}
		}
	}
	return ""
}
