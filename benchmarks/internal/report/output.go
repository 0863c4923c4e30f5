package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// goals evaluates the targets against the run. Speed and memory
// goals count only on a real Redis at concurrency 64.
func goals(r *Report) []Goal {
	var gs []Goal
	row := func(name string) *Row {
		for i := range r.Rows {
			if r.Rows[i].Name == name && r.Rows[i].Kind == "ours" {
				return &r.Rows[i]
			}
		}
		return nil
	}
	real := r.Backend != BackendMiniredis
	for _, g := range []struct {
		name string
		want float64
	}{{"fixed_window", 0.90}, {"token_bucket", 0.80}, {"gcra", 0.80}, {"sliding_counter", 0.80}, {"sliding_log", 0.75}} {
		rw := row(g.name)
		if rw == nil {
			continue
		}
		goal := Goal{What: g.name + " decisions/s / floor at concurrency 64", Want: fmt.Sprintf(">= %.2f", g.want)}
		for _, c := range rw.Speed {
			if c.Concurrency == 64 && c.RatioToFloor > 0 {
				goal.Measured = ptr(c.RatioToFloor)
				if real {
					goal.Met = ptr(c.RatioToFloor >= g.want)
				} else {
					goal.Note = "miniredis: indicative only"
				}
			}
		}
		gs = append(gs, goal)
	}
	for _, g := range []struct {
		name string
		want int64
	}{{"sliding_log", 1500}, {"gcra", 60}, {"fixed_window", 60}} {
		rw := row(g.name)
		if rw == nil {
			continue
		}
		goal := Goal{What: g.name + " bytes per subject after limit requests", Want: fmt.Sprintf("<= %d", g.want)}
		if rw.BytesAfterLimit != nil {
			goal.Measured = ptr(float64(*rw.BytesAfterLimit))
			goal.Met = ptr(*rw.BytesAfterLimit <= g.want)
		} else {
			goal.Note = "needs a real Redis"
		}
		gs = append(gs, goal)
	}
	gs = append(gs, compactGoals(r)...)
	for i := range r.Rows {
		rw := &r.Rows[i]
		if rw.Kind != "ours" || rw.Local == nil {
			continue
		}
		l := rw.Local
		worst := max(l.AllowedNanos, l.DeniedNanos)
		gs = append(gs, Goal{What: rw.Name + " local twin ns per decision (worse of allowed, denied)", Want: "<= 100",
			Measured: ptr(worst), Met: ptr(worst <= 100)})
		allocs := max(l.AllowedAllocs, l.DeniedAllocs)
		gs = append(gs, Goal{What: rw.Name + " local twin allocations per decision", Want: "0",
			Measured: ptr(allocs), Met: ptr(allocs < 0.05)})
	}
	return append(gs, batchedGoals(r)...)
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

func f1(p *float64, format string) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf(format, *p)
}

func bytesStr(p *int64) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprint(*p)
}

// WriteTable writes r as plain-text tables for a reader who has not seen
// the code: what ran where, the numbers with a legend, a "which to pick"
// drawn from them, and notes on method.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintln(w, "ratelimit: every strategy side by side, measured in this run")
	if r.Commit != "" {
		fmt.Fprintf(w, "commit:   %s\n", r.Commit)
	}
	server := r.Server
	if r.Origin != "" {
		server += ", " + r.Origin
	}
	fmt.Fprintf(w, "server:   %s\n", server)
	fmt.Fprintf(w, "machine:  %d cores, GOMAXPROCS %d, %s %s; load average before %s, after %s\n",
		r.Machine.Cores, r.Machine.GOMAXPROCS, r.Machine.GoVersion, r.Machine.OS,
		orDash(r.Machine.LoadBefore), orDash(r.Machine.LoadAfter))
	if r.Precise {
		fmt.Fprintf(w, "workload: limit %s\n\n", r.Workload.Limit)
		fmt.Fprint(w, `NO REAL REDIS: this run used miniredis, an imitation of Redis inside this
process. It measured precision (the same on any backend) and the in-process
twins only. Speed, memory per subject and Redis CPU need a real Redis, and
no strategy or peer is ranked on miniredis speed. Install redis-server
(Debian, Ubuntu: apt-get install redis-server; it needs 7.0 or newer) and run
this again: the report starts its own server on a free loopback port.

`)
	} else {
		fmt.Fprintf(w, "workload: %d subjects, limit %s, concurrency %v, %s in %d rounds of %dms slices\n\n",
			r.Workload.Subjects, r.Workload.Limit, r.Workload.Concurrency, r.Workload.Duration, r.Workload.Rounds, r.Workload.SliceMillis)
		r.writeSpeed(w)
	}
	r.writeCost(w)
	r.writeLegend(w)

	writeMemoryAtLimits(w, r)

	var breakdown []string
	for _, rw := range r.Rows {
		if len(rw.CommandBreakdown) > 0 {
			breakdown = append(breakdown, fmt.Sprintf("  %s: %s", rw.Name, commandList(rw.CommandBreakdown)))
		}
	}
	if len(breakdown) > 0 {
		fmt.Fprintf(w, "\nRedis commands per decision:\n%s\n", strings.Join(breakdown, "\n"))
	}
	var rowNotes []string
	for _, rw := range r.Rows {
		for _, n := range []string{rw.Error, rw.Note, rw.MemoryNote, rw.PrecisionNote} {
			if n != "" && n != "n/a on miniredis" {
				rowNotes = append(rowNotes, fmt.Sprintf("  %s: %s", rw.Name, n))
			}
		}
		for _, c := range rw.Speed {
			if c.FirstError != "" {
				rowNotes = append(rowNotes, fmt.Sprintf("  %s: c=%d: %d errors, first: %s", rw.Name, c.Concurrency, c.Errors, c.FirstError))
			}
			if c.Degraded > 0 {
				rowNotes = append(rowNotes, fmt.Sprintf("  %s: c=%d: %d degraded answers (Redis failed or the breaker was open; the failure policy answered), not counted as decisions", rw.Name, c.Concurrency, c.Degraded))
			}
		}
	}
	if len(rowNotes) > 0 {
		fmt.Fprintf(w, "\nrows:\n%s\n", strings.Join(rowNotes, "\n"))
	}

	writeBatching(w, r)

	if len(r.Goals) > 0 {
		fmt.Fprintln(w, "\nthe project's own targets (-goals):")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, g := range r.Goals {
			st := "not measured"
			if g.Met != nil {
				st = map[bool]string{true: "met", false: "NOT met"}[*g.Met]
			} else if g.Measured != nil {
				st = "indicative"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", g.What, g.Want, f1(g.Measured, "%.2f"), st, g.Note)
		}
		tw.Flush()
	}
	if picks := r.Picks(); len(picks) > 0 {
		fmt.Fprintln(w, "\nwhich to pick, from the numbers above:")
		for _, p := range picks {
			fmt.Fprintf(w, "  - %s\n", p)
		}
	}
	fmt.Fprintln(w, "\nnotes:")
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  - %s\n", n)
	}
	return nil
}

// writeSpeed writes the speed table: decisions per second at each
// concurrency, their ratio to the floor, latency at the highest.
func (r *Report) writeSpeed(w io.Writer) {
	if len(r.Workload.Concurrency) == 0 {
		return
	}
	last := len(r.Workload.Concurrency) - 1
	cl := r.Workload.Concurrency[last]
	fmt.Fprintln(w, "speed on Redis (higher is better):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hdr := []string{"target"}
	for _, c := range r.Workload.Concurrency {
		hdr = append(hdr, fmt.Sprintf("decisions/s, %d %s", c, plural(c, "caller", "callers")), "vs floor")
	}
	hdr = append(hdr, fmt.Sprintf("median µs @%d", cl), fmt.Sprintf("p99 µs @%d", cl), "allowed", "errors")
	fmt.Fprintln(tw, strings.Join(hdr, "\t")+"\t")
	for _, rw := range r.Rows {
		if len(rw.Speed) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t\n", rw.Name, rw.Error)
			continue
		}
		f := []string{rw.Name}
		var errs int64
		for _, c := range rw.Speed {
			f = append(f, fmt.Sprintf("%.0f", c.PerSecond), fmt.Sprintf("%.2f", c.RatioToFloor))
			errs += c.Errors
		}
		c := rw.Speed[len(rw.Speed)-1]
		f = append(f, fmt.Sprintf("%.0f", c.P50Micros), fmt.Sprintf("%.0f", c.P99Micros),
			fmt.Sprintf("%.0f%%", 100*c.AllowedFraction), fmt.Sprint(errs))
		fmt.Fprintln(tw, strings.Join(f, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// writeCost writes what each target costs per decision and per subject and
// what it gives up in precision; without a real Redis, precision and the
// in-process twins only.
func (r *Report) writeCost(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cl := 0
	if n := len(r.Workload.Concurrency); n > 0 {
		cl = r.Workload.Concurrency[n-1]
	}
	if r.Precise {
		fmt.Fprintln(w, "precision and the in-process twins:")
		fmt.Fprintf(tw, "target\tmost in a window: boundary burst\tmost in a window: burst, then steady\tin-process ns allow/deny\tin-process allocs\t\n")
	} else {
		fmt.Fprintln(w, "cost and precision (lower is better):")
		fmt.Fprintf(tw, "target\tround trips\tRedis cmds\tRedis CPU µs @%d\tclient CPU µs @%d\tkeys\tbytes after 10\tbytes after limit\tmost in a window: boundary burst\tmost in a window: burst, then steady\tin-process ns allow/deny\tin-process allocs\t\n", cl, cl)
	}
	for _, rw := range r.Rows {
		if !r.Precise && len(rw.Speed) == 0 {
			continue
		}
		if r.Precise && rw.Kind != "ours" && rw.Kind != "peer" && rw.Kind != "leased" {
			continue // the floor and the facade have no precision of their own
		}
		local, allocs := "-", "-"
		if rw.Local != nil {
			local = fmt.Sprintf("%.0f/%.0f", rw.Local.AllowedNanos, rw.Local.DeniedNanos)
			allocs = fmt.Sprintf("%.2f/%.2f", rw.Local.AllowedAllocs, rw.Local.DeniedAllocs)
		}
		pb, ps := "-", "-"
		b10, bl := "-", "-"
		if rw.Kind == "floor" && rw.BytesAfterLimit != nil {
			b10, bl = bytesStr(rw.BytesAfter10), bytesStr(rw.BytesAfterLimit)
		}
		if rw.Kind == "ours" || rw.Kind == "peer" || rw.Kind == "leased" {
			pb, ps = times(rw.PrecisionBoundary), times(rw.PrecisionBurstSteady)
			b10, bl = bytesStr(rw.BytesAfter10), bytesStr(rw.BytesAfterLimit)
		}
		if r.Precise {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", rw.Name, pb, ps, local, allocs)
			continue
		}
		keys := "-"
		if rw.Keys > 0 {
			keys = fmt.Sprint(rw.Keys)
		}
		last := rw.Speed[len(rw.Speed)-1]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", rw.Name, f1(rw.RoundTrips, "%.2f"), f1(rw.Commands, "%.2f"),
			f1(last.CPUMicros, "%.1f"), f1(last.ClientCPUMicros, "%.1f"), keys, b10, bl, pb, ps, local, allocs)
	}
	tw.Flush()
}

// writeLegend says what every column means.
func (r *Report) writeLegend(w io.Writer) {
	fmt.Fprintln(w, "\nlegend:")
	lines := [][2]string{}
	if !r.Precise {
		lines = append(lines,
			[2]string{"floor", "a trivial script (EVALSHA \"return 1\"): the fastest any one-script decision can be on this Redis"},
			[2]string{"decisions/s, N callers", "decisions per second with N goroutines deciding at once through one client"},
			[2]string{"vs floor", "that rate divided by the floor's at the same concurrency (1.00 = as fast as a trivial script)"},
			[2]string{"median, p99 µs", "latency of one decision as its caller sees it, at the highest concurrency"},
			[2]string{"round trips, Redis cmds", "network round trips, and Redis commands run (the script's own calls included), per decision"},
			[2]string{"Redis CPU µs", "server CPU time per decision, network work included"},
			[2]string{"client CPU µs", "this process's CPU time per decision: the target's client and the load generator's (the same for every target)"},
			[2]string{"keys, bytes after N", "keys one subject occupies, and their MEMORY USAGE after N requests"},
		)
	}
	lines = append(lines,
		[2]string{"most in a window", "the most units let through in any sliding window of the limit's length, as a multiple of the limit: 1.00x never exceeds it, 2.00x lets twice through (boundary burst: a full burst just before a window boundary and another just after; burst, then steady: a full burst followed by a stream at twice the rate)"},
		[2]string{"in-process", "the strategy's local twin (NewLocal, no Redis), one goroutine: ns and allocations per decision, allowed/denied"},
	)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range lines {
		fmt.Fprintf(tw, "  %s\t%s\n", l[0], l[1])
	}
	tw.Flush()
}

func times(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", *p)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func commandList(m map[string]float64) string {
	type kv struct {
		k string
		v float64
	}
	var l []kv
	for k, v := range m {
		if v >= 0.005 {
			l = append(l, kv{k, v})
		}
	}
	// most frequent first, then by name
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && (l[j].v > l[j-1].v || (l[j].v == l[j-1].v && l[j].k < l[j-1].k)); j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = fmt.Sprintf("%s %.2f", e.k, e.v)
	}
	return strings.Join(parts, ", ")
}
