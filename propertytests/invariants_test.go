package propertytests

import (
	"fmt"
	"sort"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// allowedUnits returns, per subject, the allowed AllowN events with n > 0,
// in time order, forgetting what came before a Reset of the subject.
func allowedUnits(evs []event) map[int][]event {
	out := map[int][]event{}
	for _, ev := range evs {
		switch {
		case ev.op == opReset:
			out[ev.subject] = nil
		case ev.op == opAllow && ev.n > 0 && ev.res.Allowed:
			out[ev.subject] = append(out[ev.subject], ev)
		}
	}
	for _, a := range out {
		sort.SliceStable(a, func(i, j int) bool { return a[i].at < a[j].at })
	}
	return out
}

// checkBound checks that the allowed units of every subject stay within the
// bound of algorithm k for lim. It returns "" or the violation.
func checkBound(k kind, lim strategy.Limit, evs []event) string {
	for subj, a := range allowedUnits(evs) {
		var msg string
		switch k {
		case slidingLog:
			msg = boundSliding(lim, a)
		case fixedWindow:
			msg = boundFixed(lim, a)
		case slidingCounter:
			// its package's bound: at most Limit per aligned window, and
			// Limit + floor(Limit*(W-2ms)/W) per sliding window
			if msg = boundFixed(lim, a); msg == "" {
				msg = boundSlidingCap(lim, lim.Limit+lim.Limit*(lim.Window.Milliseconds()-2)/lim.Window.Milliseconds(), a)
			}
		case tokenBucket, gcraKind:
			msg = boundArrival(lim, a)
		default:
			msg = fmt.Sprintf("no bound known for algorithm kind %d", k)
		}
		if msg != "" {
			return fmt.Sprintf("subject %q: %s", subjects[subj], msg)
		}
	}
	return ""
}

// boundSliding: in every window (t-W, t] at most Limit units.
func boundSliding(lim strategy.Limit, a []event) string {
	return boundSlidingCap(lim, lim.Limit, a)
}

// boundSlidingCap: in every window (t-W, t] at most limit units.
func boundSlidingCap(lim strategy.Limit, limit int64, a []event) string {
	w := lim.Window.Milliseconds()
	sum, lo := int64(0), 0
	for hi, ev := range a {
		sum += ev.n
		for a[lo].at <= ev.at-w {
			sum -= a[lo].n
			lo++
		}
		if sum > limit {
			return fmt.Sprintf("%d units allowed in the window (%s, %s], at most %d; from %s to %s",
				sum, ms(ev.at-w), ms(ev.at), limit, a[lo], a[hi])
		}
	}
	return ""
}

// boundFixed: in every aligned window [kW, (k+1)W) at most Limit units.
func boundFixed(lim strategy.Limit, a []event) string {
	w := lim.Window.Milliseconds()
	sums := map[int64]int64{}
	for _, ev := range a {
		k := floorDiv(ev.at, w)
		sums[k] += ev.n
		if sums[k] > lim.Limit {
			return fmt.Sprintf("%d units allowed in the aligned window [%s, %s), limit %d; the last %s",
				sums[k], ms(k*w), ms((k+1)*w), lim.Limit, ev)
		}
	}
	return ""
}

// boundArrival: over every interval [a, b] at most Burst + rate*(b-a) units,
// rate = Limit/Window, in exact integer arithmetic.
func boundArrival(lim strategy.Limit, a []event) string {
	w, b := lim.Window.Milliseconds(), lim.Capacity()
	for i := range a {
		sum := int64(0)
		for j := i; j < len(a); j++ {
			sum += a[j].n
			if j+1 < len(a) && a[j+1].at == a[j].at {
				continue
			}
			if sum*w > b*w+lim.Limit*(a[j].at-a[i].at) {
				return fmt.Sprintf("%d units allowed in [%s, %s] (%d ms), more than burst %d + %d/%v x %d ms = %.3f; from %s to %s",
					sum, ms(a[i].at), ms(a[j].at), a[j].at-a[i].at, b, lim.Limit, lim.Window, a[j].at-a[i].at,
					float64(b)+float64(lim.Limit)*float64(a[j].at-a[i].at)/float64(w), a[i], a[j])
			}
		}
	}
	return ""
}

// checkExact holds every decision of a serial schedule to the model of
// algorithm k, computed from the units allowed before it: Allowed,
// Remaining, RetryAfter and ResetAfter must be exactly the model's (each
// algorithm documents exact integer arithmetic). The models:
//
//   - sliding log: the units recorded in (now-W, now] count, a request
//     being recorded at max(now, the newest recorded time);
//   - fixed window: the units of the aligned window of now count;
//   - token bucket and GCRA: the tokens at now are
//     min(Burst, min over allowed i of Burst + rate*(now - t_i) - (units
//     allowed from i on)), in integers scaled by W; RetryAfter and
//     ResetAfter are the ceilings, in ms, of the time the missing tokens
//     take to refill.
func checkExact(k kind, lim strategy.Limit, evs []event) string {
	hist := map[int][]event{} // allowed units per subject since its last Reset
	for _, ev := range evs {
		if ev.op == opReset {
			hist[ev.subject] = nil
			continue
		}
		h := hist[ev.subject]
		n := ev.n
		if ev.op == opPeek {
			n = 0
		}
		var want strategy.Result
		switch k {
		case slidingLog, fixedWindow:
			want = windowModel(k, lim, h, ev.at, n)
		case tokenBucket, gcraKind:
			want = tokenModel(lim, h, ev.at, n)
		case slidingCounter:
			want = counterModel(lim, h, ev.at, n)
		default:
			return fmt.Sprintf("no exact model for algorithm kind %d", k)
		}
		if ev.res != want {
			return fmt.Sprintf("%s: want {Allowed:%v Remaining:%d RetryAfter:%v ResetAfter:%v Limit:%d}, got Limit %d (allowed before, of %q: %v)",
				ev, want.Allowed, want.Remaining, want.RetryAfter, want.ResetAfter, want.Limit, ev.res.Limit, subjects[ev.subject], h)
		}
		if n > 0 && ev.res.Allowed {
			if k == slidingLog {
				hist[ev.subject] = slidingRecord(lim, h, ev)
			} else {
				hist[ev.subject] = append(h, ev)
			}
		}
	}
	return ""
}

// slidingRecord is the sliding log h after ev is allowed: the requests
// recorded at or before ev.at - W leave, and ev's units are recorded at
// max(ev.at, the newest recorded time), so that recording times never
// decrease even when the clock steps back (the semantics package slidinglog
// documents; with a clock that never steps back, ev.at).
func slidingRecord(lim strategy.Limit, h []event, ev event) []event {
	w := lim.Window.Milliseconds()
	var out []event
	for _, u := range h {
		if ev.at-u.at < w {
			out = append(out, u)
		}
	}
	if len(out) > 0 {
		ev.at = max(ev.at, out[len(out)-1].at)
	}
	return append(out, ev)
}

// windowModel is the decision of a sliding log or fixed window at now for
// n units (0: Peek), given the units allowed before (h, oldest first).
func windowModel(k kind, lim strategy.Limit, h []event, now, n int64) strategy.Result {
	w, limit := lim.Window.Milliseconds(), lim.Limit
	counts := func(at int64) bool {
		if k == slidingLog {
			return now-at < w
		}
		return floorDiv(at, w) == floorDiv(now, w)
	}
	var count int64
	var live []event // oldest first
	for _, u := range h {
		if counts(u.at) {
			count += u.n
			live = append(live, u)
		}
	}
	want := max(n, 1) // a Peek answers for one unit
	allowed := want <= limit && count+want <= limit
	r := strategy.Result{Allowed: allowed, Limit: limit, Remaining: max(limit-count, 0)}
	if allowed && n > 0 {
		r.Remaining = limit - count - n
		at := now
		if k == slidingLog && len(live) > 0 { // recorded at max(now, newest)
			at = max(at, live[len(live)-1].at)
		}
		live = append(live, event{at: at, n: n})
	}
	edge := (floorDiv(now, w)+1)*w - now // ms left in the aligned window
	if len(live) > 0 {                   // until the newest unit stops counting
		if k == slidingLog {
			r.ResetAfter = time.Duration(live[len(live)-1].at+w-now) * time.Millisecond
		} else {
			r.ResetAfter = time.Duration(edge) * time.Millisecond
		}
	}
	switch {
	case allowed:
	case want > limit:
		r.RetryAfter = strategy.Never
	case k == fixedWindow:
		r.RetryAfter = time.Duration(edge) * time.Millisecond
	default: // the oldest units must leave until count+want fits
		need, i := count+want-limit, 0
		for ; need > 0; i++ {
			need -= live[i].n
		}
		r.RetryAfter = time.Duration(live[i-1].at+w-now) * time.Millisecond
	}
	return r
}

// tokenModel is the decision of a token bucket (or GCRA, which decides the
// same) at now for n units (0: Peek), given the units allowed before (h,
// oldest first). Tokens are scaled by W so that a millisecond refills
// exactly Limit scaled units.
func tokenModel(lim strategy.Limit, h []event, now, n int64) strategy.Result {
	w, limit, b := lim.Window.Milliseconds(), lim.Limit, lim.Capacity()
	full := b * w
	tokens := full
	sum := int64(0)
	for i := len(h) - 1; i >= 0; i-- {
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

// counterModel is the decision of the sliding counter at now for n units
// (0: Peek), given the units allowed before (h): its package's estimate
// curr + ceil(prev*(W-elapsed)/W) of the units in the sliding window, and a
// RetryAfter found by searching the first millisecond at which the request
// passes (the estimate never grows while nothing is recorded).
func counterModel(lim strategy.Limit, h []event, now, n int64) strategy.Result {
	w, limit := lim.Window.Milliseconds(), lim.Limit
	counts := func(at int64) (curr, prev int64) {
		idx := floorDiv(at, w)
		for _, u := range h {
			switch floorDiv(u.at, w) {
			case idx:
				curr += u.n
			case idx - 1:
				prev += u.n
			}
		}
		return curr, prev
	}
	used := func(at int64) int64 {
		curr, prev := counts(at)
		return curr + ceilDivAny(prev*(w-(at-floorDiv(at, w)*w)), w)
	}
	want := max(n, 1)
	u := used(now)
	allowed := want <= limit && u+want <= limit
	r := strategy.Result{Allowed: allowed, Limit: limit, Remaining: max(limit-u, 0)}
	if allowed && n > 0 {
		r.Remaining = limit - u - n
		h = append(h[:len(h):len(h)], event{at: now, n: n})
	}
	elapsed := now - floorDiv(now, w)*w
	switch curr, prev := counts(now); {
	case curr > 0:
		r.ResetAfter = time.Duration(2*w-elapsed) * time.Millisecond
	case prev > 0:
		r.ResetAfter = time.Duration(w-elapsed) * time.Millisecond
	}
	switch {
	case allowed:
	case want > limit:
		r.RetryAfter = strategy.Never
	default: // the first d in [1, 2W] at which used(now+d)+want <= limit
		lo, hi := int64(1), 2*w
		for lo < hi {
			mid := (lo + hi) / 2
			if used(now+mid)+want <= limit {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		r.RetryAfter = time.Duration(lo) * time.Millisecond
	}
	return r
}

// ceilDivAny is ⌈a/b⌉ for any a and b > 0.
func ceilDivAny(a, b int64) int64 { return -floorDiv(-a, b) }

// maxTTL is the longest a key of subject s under lim may live after the
// last write: as long as its state can still change a decision.
func (s subject) maxTTL(lim strategy.Limit) time.Duration {
	var d time.Duration
	for _, l := range s.limits(lim) {
		d = max(d, maxTTL(s.kind, l))
	}
	return d
}

func maxTTL(k kind, lim strategy.Limit) time.Duration {
	switch k {
	case slidingCounter:
		return 2 * lim.Window
	case tokenBucket, gcraKind: // the time to refill the whole burst
		w := lim.Window.Milliseconds()
		return time.Duration(ceilDiv(lim.Capacity()*w, max(lim.Limit, 1))) * time.Millisecond
	}
	return lim.Window
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ms(t int64) string { return time.UnixMilli(t).UTC().Format("15:04:05.000") }
