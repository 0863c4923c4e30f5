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
		case tokenBucket, gcra:
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
	w := lim.Window.Milliseconds()
	sum, lo := int64(0), 0
	for hi, ev := range a {
		sum += ev.n
		for a[lo].at <= ev.at-w {
			sum -= a[lo].n
			lo++
		}
		if sum > lim.Limit {
			return fmt.Sprintf("%d units allowed in the window (%s, %s], limit %d; from %s to %s",
				sum, ms(ev.at-w), ms(ev.at), lim.Limit, a[lo], a[hi])
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

// checkExact holds the decisions of a serial schedule to the model of
// algorithm k: sliding log and fixed window exactly (Allowed, Remaining,
// RetryAfter); token bucket and GCRA by their arrival curve, allowing only
// what fits under Burst + rate*(b-a) on every interval, and denying only
// what would not fit with 1 ms more of refill.
func checkExact(k kind, lim strategy.Limit, evs []event) string {
	hist := map[int][]event{} // allowed units per subject since its last Reset
	w, limit := lim.Window.Milliseconds(), lim.Limit
	for _, ev := range evs {
		if ev.op == opReset {
			hist[ev.subject] = nil
			continue
		}
		h := hist[ev.subject]
		n := ev.n
		if ev.op == opPeek || n == 0 {
			n = 0
		}
		want := max(n, 1) // a peek answers for one unit
		var msg string
		switch k {
		case slidingLog, fixedWindow:
			count := int64(0)
			var live []event // oldest first
			for _, u := range h {
				if (k == slidingLog && ev.at-u.at < w) || (k == fixedWindow && floorDiv(u.at, w) == floorDiv(ev.at, w)) {
					count += u.n
					live = append(live, u)
				}
			}
			allowed := want <= limit && count+want <= limit
			remaining := max(limit-count, 0)
			if allowed && n > 0 {
				remaining = limit - count - n
			}
			retry := time.Duration(0)
			switch {
			case allowed:
			case want > limit:
				retry = strategy.Never
			case k == fixedWindow:
				retry = time.Duration((floorDiv(ev.at, w)+1)*w-ev.at) * time.Millisecond
			default: // the units that must leave first: the oldest, until count+want fits
				need, i := count+want-limit, 0
				for ; need > 0; i++ {
					need -= live[i].n
				}
				retry = time.Duration(live[i-1].at+w-ev.at) * time.Millisecond
			}
			if ev.res.Allowed != allowed || ev.res.Remaining != remaining || ev.res.RetryAfter != retry || ev.res.Limit != limit {
				msg = fmt.Sprintf("want {Allowed:%v Remaining:%d RetryAfter:%v Limit:%d}: %d units count at this instant",
					allowed, remaining, retry, limit, count)
			}
		case tokenBucket, gcra:
			b := lim.Capacity()
			// over the units allowed since h[i], plus this request, at the
			// refill of d ms: does it fit?
			fits := func(d int64) bool {
				if want > b {
					return false
				}
				sum := want
				for i := len(h) - 1; i >= 0; i-- {
					sum += h[i].n
					if (i == 0 || h[i-1].at != h[i].at) && sum*w > b*w+limit*(ev.at-h[i].at+d) {
						return false
					}
				}
				return true
			}
			switch {
			case ev.res.Allowed && !fits(0):
				msg = fmt.Sprintf("allowed, but %d more units do not fit under burst %d + rate %d/%v on some interval ending now", want, b, limit, lim.Window)
			case !ev.res.Allowed && fits(-1):
				msg = fmt.Sprintf("denied, but %d more units fit under burst %d + rate %d/%v on every interval ending now, even with 1 ms less of refill", want, b, limit, lim.Window)
			case ev.res.Limit != b:
				msg = fmt.Sprintf("Limit %d, want the capacity %d", ev.res.Limit, b)
			}
		default:
			return fmt.Sprintf("no exact model for algorithm kind %d", k)
		}
		if msg != "" {
			return fmt.Sprintf("%s: %s (history of %q: %v)", ev, msg, subjects[ev.subject], h)
		}
		if n > 0 && ev.res.Allowed {
			hist[ev.subject] = append(h, ev)
		}
	}
	return ""
}

// maxTTL is the longest a key of algorithm k under lim may live after the
// last write: as long as its state can still change a decision.
func maxTTL(k kind, lim strategy.Limit) time.Duration {
	switch k {
	case slidingCounter:
		return 2 * lim.Window
	case tokenBucket, gcra: // the time to refill the whole burst
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
