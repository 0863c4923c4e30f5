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

// WriteTable writes r as plain-text tables.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "backend: %s (%s); %d cores, GOMAXPROCS %d, %s %s; load before %s, after %s\n",
		r.Backend, r.Server, r.Machine.Cores, r.Machine.GOMAXPROCS, r.Machine.GoVersion, r.Machine.OS,
		orDash(r.Machine.LoadBefore), orDash(r.Machine.LoadAfter))
	fmt.Fprintf(w, "workload: %d subjects, limit %s, concurrency %v, %s in %d rounds of %dms slices\n\n",
		r.Workload.Subjects, r.Workload.Limit, r.Workload.Concurrency, r.Workload.Duration, r.Workload.Rounds, r.Workload.SliceMillis)

	last := len(r.Workload.Concurrency) - 1
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hdr := []string{"target"}
	for _, c := range r.Workload.Concurrency {
		hdr = append(hdr, fmt.Sprintf("dec/s c=%d", c), "x floor")
	}
	cl := r.Workload.Concurrency[last]
	hdr = append(hdr, fmt.Sprintf("p50 µs c=%d", cl), fmt.Sprintf("p99 µs c=%d", cl), "allowed", "errors")
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
		c := rw.Speed[last]
		f = append(f, fmt.Sprintf("%.0f", c.P50Micros), fmt.Sprintf("%.0f", c.P99Micros),
			fmt.Sprintf("%.0f%%", 100*c.AllowedFraction), fmt.Sprint(errs))
		fmt.Fprintln(tw, strings.Join(f, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "target\tRT/dec\tcmds/dec\tCPU µs/dec c=%d\tkeys\tB/subj @10\tB/subj @limit\tprec boundary\tprec burst+steady\tlocal ns allow/deny\tlocal allocs\t\n", cl)
	for _, rw := range r.Rows {
		if len(rw.Speed) == 0 {
			continue
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
		if rw.Kind == "ours" || rw.Kind == "peer" {
			pb, ps = f1(rw.PrecisionBoundary, "%.2f"), f1(rw.PrecisionBurstSteady, "%.2f")
			b10, bl = bytesStr(rw.BytesAfter10), bytesStr(rw.BytesAfterLimit)
		}
		keys := "-"
		if rw.Keys > 0 {
			keys = fmt.Sprint(rw.Keys)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", rw.Name, rw.RoundTrips, f1(rw.Commands, "%.2f"),
			f1(rw.Speed[last].CPUMicros, "%.1f"), keys, b10, bl, pb, ps, local, allocs)
	}
	tw.Flush()

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
		}
	}
	if len(rowNotes) > 0 {
		fmt.Fprintf(w, "\nrows:\n%s\n", strings.Join(rowNotes, "\n"))
	}

	writeBatching(w, r)

	if len(r.Goals) > 0 {
		fmt.Fprintln(w, "\ngoals:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
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
	fmt.Fprintln(w, "\nnotes:")
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  - %s\n", n)
	}
	return nil
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
