package report

import (
	"fmt"
	"slices"
	"strings"
)

// Picks is the report's "which to pick": one line per need, each naming the
// strategies of this module that serve it, with the numbers this run
// measured for them. On miniredis only precision and the in-process twins
// count: no line ranks anything on speed or memory there.
func (r *Report) Picks() []string {
	var ours []*Row
	for i := range r.Rows {
		if rw := &r.Rows[i]; rw.Kind == "ours" && rw.Error == "" {
			ours = append(ours, rw)
		}
	}
	if len(ours) == 0 {
		return nil
	}
	real := !r.Precise && r.Backend != BackendMiniredis
	byName := map[string]*Row{}
	for _, rw := range ours {
		byName[rw.Name] = rw
	}
	// facts: the numbers of one row, as a phrase
	facts := func(rw *Row) string {
		var f []string
		if p := worstPrecision(rw); p != nil {
			if *p <= 1.005 {
				f = append(f, "never above the limit")
			} else {
				f = append(f, fmt.Sprintf("up to %.2fx the limit in a window", *p))
			}
		}
		if b := bytesOf(rw); real && b != nil {
			f = append(f, fmt.Sprintf("%s bytes per subject", thousands(*b)))
		}
		if s := topRatio(rw); real && s > 0 {
			f = append(f, fmt.Sprintf("%.2f of the floor's speed", s))
		}
		return strings.Join(f, ", ")
	}
	line := func(need string, names ...string) string {
		var parts []string
		for _, n := range names {
			if rw := byName[n]; rw != nil {
				parts = append(parts, fmt.Sprintf("%s (%s)", n, facts(rw)))
			}
		}
		if len(parts) == 0 {
			return ""
		}
		return need + ": " + strings.Join(parts, "; or ")
	}

	var out []string
	add := func(s string) {
		if s != "" {
			out = append(out, s)
		}
	}
	// exact: every strategy measured never above the limit, cheapest first
	var exact []string
	for _, rw := range ours {
		if p := worstPrecision(rw); p != nil && *p <= 1.005 {
			exact = append(exact, rw.Name)
		}
	}
	slices.SortStableFunc(exact, func(a, b string) int { return cmpBytes(byName[a], byName[b]) })
	add(line("A limit that must hold exactly (logins, one-time codes, payments)", exact...))
	add(line("Smooth per-key API quotas for the price of one integer", "sliding_counter"))
	add(line("A burst allowance, then a steady pace", "gcra", "token_bucket"))
	if fw := byName["fixed_window"]; fw != nil && fw.PrecisionBoundary != nil {
		add(fmt.Sprintf("Coarse quotas (per hour, per day) where a burst at a window boundary does no harm: fixed_window (%s; "+
			"it let %.2fx the limit through across a boundary here)", facts(fw), *fw.PrecisionBoundary))
	}
	if real {
		least := slices.Clone(ours)
		slices.SortStableFunc(least, cmpBytes)
		if b := bytesOf(least[0]); b != nil {
			var names []string
			for _, rw := range least {
				if rb := bytesOf(rw); rb != nil && *rb == *b {
					names = append(names, rw.Name)
				}
			}
			add(fmt.Sprintf("Least memory per subject: %s (%s bytes each)", strings.Join(names, ", "), thousands(*b)))
		}
		fast := slices.Clone(ours)
		slices.SortStableFunc(fast, func(a, b *Row) int { return cmpFloat(topRatio(b), topRatio(a)) })
		if top := topRatio(fast[0]); top > 0 {
			spread := top - topRatio(fast[len(fast)-1])
			verdict := "speed need not decide"
			if spread >= 0.1 {
				verdict = "weigh it against precision and memory"
			}
			add(fmt.Sprintf("Most decisions per second on this Redis: %s (%.2f of the floor's speed; the strategies are within %.2f of each other, "+
				"and a loaded machine moves ratios by about 0.05 between runs: %s)", fast[0].Name, top, spread, verdict))
		}
		var peers []string
		for _, rw := range r.Rows {
			if rw.Kind == "peer" && rw.Error == "" && topRatio(&rw) > 0 {
				peers = append(peers, fmt.Sprintf("%s %.2f", strings.TrimPrefix(rw.Name, "peer:"), topRatio(&rw)))
			}
		}
		if len(peers) > 0 {
			add("The peer libraries, in the floor's speed at the highest concurrency for comparison: " + strings.Join(peers, ", "))
		}
	}
	var lo, hi float64
	for _, rw := range ours {
		if rw.Local == nil {
			continue
		}
		ns := max(rw.Local.AllowedNanos, rw.Local.DeniedNanos)
		if lo == 0 || ns < lo {
			lo = ns
		}
		hi = max(hi, ns)
	}
	if hi > 0 {
		add(fmt.Sprintf("One process, no Redis: any strategy's NewLocal twin, the same decisions in %.0f to %.0f ns each here", lo, hi))
	}
	if !real {
		add("Speed and memory: not measured without a real Redis; install redis-server and run the report again")
	}
	return out
}

// worstPrecision is the larger of a row's two precision probes, nil when
// either was not measured.
func worstPrecision(rw *Row) *float64 {
	if rw.PrecisionBoundary == nil || rw.PrecisionBurstSteady == nil {
		return nil
	}
	p := max(*rw.PrecisionBoundary, *rw.PrecisionBurstSteady)
	return &p
}

// topRatio is a row's ratio to the floor at the highest concurrency, 0 when
// not measured.
func topRatio(rw *Row) float64 {
	if len(rw.Speed) == 0 {
		return 0
	}
	return rw.Speed[len(rw.Speed)-1].RatioToFloor
}

// bytesOf is a row's bytes per subject at the limit, as a subject whose
// requests are spread over the window holds them: BytesSpread for the
// exact logs (a burst merges one millisecond's requests into one entry,
// which would make a log look cheaper than it is), BytesAfterLimit for the
// others, whose state does not grow with the requests.
func bytesOf(rw *Row) *int64 {
	if rw.BytesSpread != nil {
		return rw.BytesSpread
	}
	return rw.BytesAfterLimit
}

// cmpBytes orders rows by bytes per subject at the limit (bytesOf),
// unmeasured last.
func cmpBytes(a, b *Row) int {
	ab, bb := bytesOf(a), bytesOf(b)
	switch {
	case ab == nil && bb == nil:
		return 0
	case ab == nil:
		return 1
	case bb == nil:
		return -1
	}
	return int(*ab - *bb)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// thousands formats n with commas: 1,336.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
