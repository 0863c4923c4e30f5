package report

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/ratekit/ratelimit/benchmarks/internal/targets"
	"github.com/ratekit/ratelimit/strategy"
)

// LimitBytes is what one subject full at a limit costs in Redis.
type LimitBytes struct {
	Algorithm string  `json:"algorithm"`
	Limit     int64   `json:"limit"` // units per Window
	Window    string  `json:"window"`
	Bytes     int64   `json:"bytes"` // MEMORY USAGE summed over the subject's keys
	PerUnit   float64 `json:"bytes_per_unit"`
}

// exactLogs are the strategies whose memory grows with the limit; the
// report measures them at memoryLimits.
var (
	exactLogs    = []strategy.Algorithm{"compact_log", "sliding_log"}
	memoryLimits = []int64{100, 1000, 10000}
)

// runMemoryAtLimits measures, on the real Redis, one subject full at each
// of memoryLimits per window, for each of exactLogs that the run measures:
// limit decisions of one unit each, 0.998 window apart in all, on a client
// clock, so every unit is still in the window when MEMORY USAGE reads it.
// One unit per request is the sorted-set log's worst case (one entry per
// unit); the compact log's cost does not depend on it.
func runMemoryAtLimits(ctx context.Context, o Options, b *backend, r *Report) {
	for _, a := range exactLogs {
		if !slices.ContainsFunc(r.Rows, func(rw Row) bool { return rw.Name == string(a) && rw.Kind == string(targets.Ours) }) {
			continue
		}
		for _, limit := range memoryLimits {
			fmt.Fprintf(o.Progress, "\rmemory %s at limit %d%-20s", a, limit, "")
			lb, err := memoryAtLimit(ctx, o, b, a, limit)
			if err != nil {
				r.Notes = append(r.Notes, fmt.Sprintf("memory of %s at limit %d: n/a: %v", a, limit, err))
				continue
			}
			r.MemoryAtLimits = append(r.MemoryAtLimits, lb)
			if limit == o.Limit.Limit {
				for i := range r.Rows {
					if rw := &r.Rows[i]; rw.Name == string(a) && rw.Kind == string(targets.Ours) {
						rw.BytesSpread = &lb.Bytes
					}
				}
			}
		}
	}
}

func memoryAtLimit(ctx context.Context, o Options, b *backend, a strategy.Algorithm, limit int64) (LimitBytes, error) {
	clock := &simClock{}
	clock.set(probeEpoch)
	st, err := targets.NewStrategy(a, b.work, strategy.Limit{Limit: limit, Window: o.Limit.Window}, "", clock, 0)
	if err != nil {
		return LimitBytes{}, err
	}
	subject, err := freshSubject(ctx, b, o.SubjectBytes)
	if err != nil {
		return LimitBytes{}, err
	}
	defer func() {
		if k, err := b.keysMatching(ctx, subject); err == nil {
			b.unlink(ctx, k)
		}
	}()
	step := o.Limit.Window * 998 / 1000 / time.Duration(limit)
	for i := range limit {
		res, err := st.AllowN(ctx, subject, 1)
		if err != nil {
			return LimitBytes{}, err
		}
		if !res.Allowed {
			return LimitBytes{}, fmt.Errorf("decision %d denied", i)
		}
		clock.add(max(step, time.Millisecond))
	}
	keys, err := b.keysMatching(ctx, subject)
	if err != nil {
		return LimitBytes{}, err
	}
	n, err := b.bytesOf(ctx, keys)
	if err != nil {
		return LimitBytes{}, err
	}
	return LimitBytes{Algorithm: string(a), Limit: limit, Window: o.Limit.Window.String(), Bytes: n, PerUnit: float64(n) / float64(limit)}, nil
}

// compactGoals are issue 17's targets for compact_log: at most 8 bytes per
// unit at every limit measured, and decisions/s within 0.05 of sliding_log's
// (as ratios to the floor at concurrency 64) or better.
func compactGoals(r *Report) []Goal {
	var gs []Goal
	for _, lb := range r.MemoryAtLimits {
		if lb.Algorithm == "compact_log" {
			gs = append(gs, Goal{What: fmt.Sprintf("compact_log bytes per unit, full at limit %d", lb.Limit), Want: "<= 8",
				Measured: ptr(lb.PerUnit), Met: ptr(lb.PerUnit <= 8)})
		}
	}
	ratio := func(name string) float64 {
		for _, rw := range r.Rows {
			if rw.Name == name && rw.Kind == string(targets.Ours) {
				for _, c := range rw.Speed {
					if c.Concurrency == 64 {
						return c.RatioToFloor
					}
				}
			}
		}
		return 0
	}
	if c, s := ratio("compact_log"), ratio("sliding_log"); c > 0 && s > 0 {
		g := Goal{What: "compact_log x floor minus sliding_log x floor at concurrency 64", Want: ">= -0.05", Measured: ptr(c - s)}
		if r.Backend != BackendMiniredis {
			g.Met = ptr(c-s >= -0.05)
		} else {
			g.Note = "miniredis: indicative only"
		}
		gs = append(gs, g)
	}
	return gs
}

// writeMemoryAtLimits writes the bytes of the exact logs at each limit.
func writeMemoryAtLimits(w io.Writer, r *Report) {
	if len(r.MemoryAtLimits) == 0 {
		return
	}
	fmt.Fprintf(w, "\nbytes per subject full at a limit per %s (bytes per unit):\n", r.MemoryAtLimits[0].Window)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "target\t")
	for _, l := range memoryLimits {
		fmt.Fprintf(tw, "limit %d\t", l)
	}
	fmt.Fprintln(tw)
	for _, a := range exactLogs {
		row := []string{string(a)}
		for _, l := range memoryLimits {
			cell := "-"
			for _, lb := range r.MemoryAtLimits {
				if lb.Algorithm == string(a) && lb.Limit == l {
					cell = fmt.Sprintf("%d (%.2f)", lb.Bytes, lb.PerUnit)
				}
			}
			row = append(row, cell)
		}
		if row[1] == "-" && row[2] == "-" && row[3] == "-" {
			continue
		}
		for _, c := range row {
			fmt.Fprintf(tw, "%s\t", c)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
