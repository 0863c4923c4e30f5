package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ratekit/ratelimit/benchmarks/internal/targets"
)

// pair is a batched row and the direct row it repeats.
type pair struct {
	name          string // the direct row's name
	via           string // "batched", "autopipeline"
	direct, batch *Row
}

// batchedPairs returns every batched row with measured speed beside its
// direct row.
func batchedPairs(r *Report) []pair {
	var ps []pair
	for i := range r.Rows {
		b := &r.Rows[i]
		if b.Kind != string(targets.Batched) || len(b.Speed) == 0 {
			continue
		}
		name, via, ok := strings.Cut(b.Name, " ")
		if strings.HasPrefix(b.Name, "facade ") {
			// "facade fixed_window batched"
			k := strings.LastIndex(b.Name, " ")
			name, via, ok = b.Name[:k], b.Name[k+1:], true
		}
		if !ok {
			continue
		}
		for j := range r.Rows {
			if d := &r.Rows[j]; d.Name == name && d.Kind != string(targets.Batched) && len(d.Speed) == len(b.Speed) {
				ps = append(ps, pair{name, via, d, b})
			}
		}
	}
	return ps
}

// writeBatching writes each batched row beside its direct row, at every
// concurrency.
func writeBatching(w io.Writer, r *Report) {
	ps := batchedPairs(r)
	if len(ps) == 0 {
		return
	}
	fmt.Fprintln(w, "\nbatched against direct (x floor = ratio to the direct floor at the same concurrency; p50, p99 and Redis CPU per decision direct -> batched):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tvia\tc\tx floor direct\tx floor via\tvia / direct\tp50 µs\tp99 µs\tRedis CPU µs/dec\tRT/dec via\t")
	for _, p := range ps {
		for ci, d := range p.direct.Speed {
			b := p.batch.Speed[ci]
			ratio := 0.0
			if d.PerSecond > 0 {
				ratio = b.PerSecond / d.PerSecond
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.0f -> %.0f\t%.0f -> %.0f\t%s -> %s\t%.2f\t\n", p.name, p.via, d.Concurrency,
				d.RatioToFloor, b.RatioToFloor, ratio, d.P50Micros, b.P50Micros, d.P99Micros, b.P99Micros,
				f1(d.CPUMicros, "%.1f"), f1(b.CPUMicros, "%.1f"), b.RoundTrips)
		}
	}
	tw.Flush()
}

// batchedGoals are issue 13's goals for the batched rows.
func batchedGoals(r *Report) []Goal {
	real := r.Backend != BackendMiniredis
	var gs []Goal
	add := func(what, want string, v float64, met bool) {
		g := Goal{What: what, Want: want, Measured: ptr(v)}
		if real {
			g.Met = ptr(met)
		} else {
			g.Note = "miniredis: indicative only"
		}
		gs = append(gs, g)
	}
	floorWant := map[string]map[int]float64{
		"fixed_window":    {64: 1.5, 256: 2.0},
		"sliding_counter": {64: 1.5},
		"gcra":            {64: 1.25},
		"token_bucket":    {64: 1.25},
		"sliding_log":     {64: 1.1},
	}
	for _, p := range batchedPairs(r) {
		if p.via != "batched" || p.direct.Kind != string(targets.Ours) {
			continue
		}
		for ci, d := range p.direct.Speed {
			b := p.batch.Speed[ci]
			if want, ok := floorWant[p.name][d.Concurrency]; ok {
				add(fmt.Sprintf("%s batched decisions/s / floor at concurrency %d", p.name, d.Concurrency),
					fmt.Sprintf(">= %.2f", want), b.RatioToFloor, b.RatioToFloor >= want)
			}
			switch d.Concurrency {
			case 1, 8:
				if d.PerSecond > 0 {
					v := b.PerSecond / d.PerSecond
					add(fmt.Sprintf("%s batched / direct decisions/s at concurrency %d", p.name, d.Concurrency), ">= 0.95", v, v >= 0.95)
				}
			case 64:
				if d.P99Micros > 0 {
					v := b.P99Micros / d.P99Micros
					add(p.name+" batched / direct p99 at concurrency 64", "<= 1.00", v, v <= 1)
				}
				if d.CPUMicros != nil && b.CPUMicros != nil && *d.CPUMicros > 0 {
					v := *b.CPUMicros / *d.CPUMicros
					add(p.name+" batched / direct Redis CPU per decision at concurrency 64", "<= 0.50", v, v <= 0.5)
				}
			}
		}
	}
	// against rueidis's auto-pipelined limiter, at the same concurrency
	named := func(name string) *Row {
		for i := range r.Rows {
			if r.Rows[i].Name == name && len(r.Rows[i].Speed) > 0 {
				return &r.Rows[i]
			}
		}
		return nil
	}
	peer := named("peer:rueidislimiter fixed_window")
	for _, g := range []struct {
		name string
		want map[int]float64
	}{{"fixed_window batched", map[int]float64{1: 1, 8: 1, 64: 2, 256: 2}}, {"gcra batched", map[int]float64{64: 1.5}}} {
		ours := named(g.name)
		if ours == nil || peer == nil {
			continue
		}
		for ci, c := range ours.Speed {
			want, ok := g.want[c.Concurrency]
			if !ok || ci >= len(peer.Speed) || peer.Speed[ci].PerSecond == 0 {
				continue
			}
			v := c.PerSecond / peer.Speed[ci].PerSecond
			add(fmt.Sprintf("%s / rueidislimiter decisions/s at concurrency %d", g.name, c.Concurrency), fmt.Sprintf(">= %.2f", want), v, v >= want)
		}
	}
	if ours := named("fixed_window batched"); ours != nil && peer != nil {
		for ci, c := range ours.Speed {
			if c.Concurrency != 8 || ci >= len(peer.Speed) || c.ClientCPUMicros == nil || peer.Speed[ci].ClientCPUMicros == nil || *peer.Speed[ci].ClientCPUMicros == 0 {
				continue
			}
			v := *c.ClientCPUMicros / *peer.Speed[ci].ClientCPUMicros
			add("fixed_window batched / rueidislimiter client CPU per decision at concurrency 8", "<= 1.00", v, v <= 1)
		}
	}
	return gs
}
