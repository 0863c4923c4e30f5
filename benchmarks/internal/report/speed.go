package report

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratelimit/benchmarks/internal/targets"
)

// hist is a latency histogram in nanoseconds with about 3% resolution.
type hist [1024]uint64

func histIndex(ns int64) int {
	v := uint64(max(ns, 0))
	if v < 32 {
		return int(v)
	}
	s := bits.Len64(v) - 5
	return min(32+s*16+int(v>>s)-16, len(hist{})-1)
}

func histValue(i int) float64 {
	if i < 32 {
		return float64(i)
	}
	s := (i - 32) / 16
	m := uint64((i-32)%16 + 16)
	return float64(m<<s) + float64(uint64(1)<<s)/2
}

func (h *hist) add(o *hist) {
	for i := range h {
		h[i] += o[i]
	}
}

// quantile returns the q-quantile in nanoseconds.
func (h *hist) quantile(q float64) float64 {
	var total uint64
	for _, n := range h {
		total += n
	}
	if total == 0 {
		return 0
	}
	want := uint64(q*float64(total) + 0.5)
	want = max(want, 1)
	var seen uint64
	for i, n := range h {
		seen += n
		if seen >= want {
			return histValue(i)
		}
	}
	return histValue(len(h) - 1)
}

// acc accumulates one (target, concurrency) cell over its slices. ops
// counts decisions and errors; degraded answers (targets.ErrDegraded) are
// counted apart, in neither ops nor the latency histogram.
type acc struct {
	ops, allowed, errs int64
	degraded           int64
	firstErr           string
	elapsed            time.Duration
	h                  hist
	rts                int64
	cmds               int64
	calls              map[string]int64
	cpu                float64       // Redis's CPU seconds
	clientCPU          time.Duration // this process's CPU time
}

type worker struct {
	ops, allowed, errs int64
	degraded           int64
	err                error
	h                  hist
}

// slice runs d at concurrency conc for about dur over random subjects.
func slice(ctx context.Context, d targets.Decider, subjects []string, conc int, dur time.Duration, seed uint64, ws []worker) time.Duration {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range ws[:conc] {
		ws[i] = worker{}
	}
	start := time.Now()
	t := time.AfterFunc(dur, func() { stop.Store(true) })
	defer t.Stop()
	for w := range conc {
		wg.Add(1)
		go func(w *worker, stream uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, stream))
			n := len(subjects)
			for !stop.Load() {
				s := subjects[rng.IntN(n)]
				t0 := time.Now()
				ok, err := d.Decide(ctx, s)
				if errors.Is(err, targets.ErrDegraded) {
					w.degraded++ // not a decision: the failure policy answered
					continue
				}
				w.h[histIndex(int64(time.Since(t0)))]++
				w.ops++
				switch {
				case err != nil:
					w.errs++
					if w.err == nil {
						w.err = err
					}
				case ok:
					w.allowed++
				}
			}
		}(&ws[w], uint64(w))
	}
	wg.Wait()
	return time.Since(start)
}

func runSpeed(ctx context.Context, o Options, b *backend, ts []targets.Target, r *Report) error {
	run := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	token := "b" + run + "/"
	subjects := make([]string, o.Subjects)
	for i := range subjects {
		subjects[i] = token + "u" + strconv.Itoa(i)
	}
	env := b.env(o, "rlbench:")
	deciders := make([]targets.Decider, len(ts))
	for i, t := range ts {
		d, err := t.New(env)
		if err != nil {
			r.Rows[i].Error = "n/a: " + err.Error()
			if t.Kind == targets.Floor {
				return fmt.Errorf("report: floor: %w", err)
			}
			continue
		}
		deciders[i] = d
		defer closeDecider(d)
	}
	maxConc := 0
	for _, c := range o.Concurrency {
		maxConc = max(maxConc, c)
	}
	ws := make([]worker, maxConc)
	live := 0
	for _, d := range deciders {
		if d != nil {
			live++
		}
	}
	cells := live * len(o.Concurrency)
	sliceDur := o.Duration / time.Duration(o.Rounds*cells)
	sliceDur = max(sliceDur, 5*time.Millisecond)
	r.Workload.SliceMillis = sliceDur.Milliseconds()

	// Warm up at the highest concurrency: load every script, open every
	// connection (a new one costs a handshake of its own), and learn which
	// targets fail on this backend before measuring anything.
	for i, d := range deciders {
		if d == nil {
			continue
		}
		fmt.Fprintf(o.Progress, "\rwarming up %-32s", ts[i].Name)
		slice(ctx, d, subjects, maxConc, min(sliceDur, 200*time.Millisecond), 1, ws)
		var errs int64
		var first error
		for _, w := range ws[:maxConc] {
			errs += w.errs
			if first == nil {
				first = w.err
			}
		}
		if errs > 0 {
			if ts[i].Kind == targets.Floor {
				return fmt.Errorf("report: floor fails: %w", first)
			}
			r.Rows[i].Error = "n/a: " + first.Error()
			deciders[i] = nil
		}
	}
	live = 0
	for _, d := range deciders {
		if d != nil {
			live++
		}
	}
	cells = live * len(o.Concurrency)

	accs := make([][]acc, len(ts))
	for i := range accs {
		accs[i] = make([]acc, len(o.Concurrency))
	}
	order := make([]int, 0, len(ts))
	for i, d := range deciders {
		if d != nil {
			order = append(order, i)
		}
	}
	done := 0
	total := o.Rounds * cells
	began := time.Now()
	for round := range o.Rounds {
		for ci, conc := range o.Concurrency {
			for k := range order {
				i := order[(k+round+ci)%len(order)]
				done++
				left := time.Duration(0)
				if done > 1 {
					left = time.Since(began) / time.Duration(done-1) * time.Duration(total-done+1)
				}
				fmt.Fprintf(o.Progress, "\rspeed %3d/%d  round %d/%d  c=%-3d %-30s ~%s left  ", done, total, round+1, o.Rounds, conc, ts[i].Name, left.Round(time.Second))
				before, err := b.snapshot(ctx)
				if err != nil {
					return fmt.Errorf("report: INFO: %w", err)
				}
				rt0, cpu0 := b.rts.Load(), processCPU()
				el := slice(ctx, deciders[i], subjects, conc, sliceDur, uint64(round*1000+ci), ws)
				rts, clientCPU := b.rts.Load()-rt0, processCPU()-cpu0
				after, err := b.snapshot(ctx)
				if err != nil {
					return fmt.Errorf("report: INFO: %w", err)
				}
				a := &accs[i][ci]
				a.elapsed += el
				a.rts += rts
				a.cmds += after.total - before.total
				a.cpu += after.cpu - before.cpu
				a.clientCPU += clientCPU
				if after.calls != nil {
					if a.calls == nil {
						a.calls = map[string]int64{}
					}
					for k, v := range after.calls {
						if d := v - before.calls[k]; d != 0 {
							a.calls[k] += d
						}
					}
				}
				for _, w := range ws[:conc] {
					a.ops += w.ops
					a.allowed += w.allowed
					a.errs += w.errs
					a.degraded += w.degraded
					if w.err != nil && a.firstErr == "" {
						a.firstErr = w.err.Error()
					}
					a.h.add(&w.h)
				}
			}
		}
	}
	fmt.Fprintf(o.Progress, "\r%90s", "")

	floorRate := make([]float64, len(o.Concurrency))
	for i := range ts {
		if deciders[i] == nil {
			continue
		}
		row := &r.Rows[i]
		var ops, rts, cmds int64
		calls := map[string]int64{}
		for ci, conc := range o.Concurrency {
			a := &accs[i][ci]
			c := Cell{Concurrency: conc, Decisions: a.ops, Seconds: a.elapsed.Seconds(),
				P50Micros: a.h.quantile(0.50) / 1e3, P99Micros: a.h.quantile(0.99) / 1e3,
				Errors: a.errs, FirstError: a.firstErr, Degraded: a.degraded}
			if a.elapsed > 0 {
				c.PerSecond = float64(a.ops) / a.elapsed.Seconds()
			}
			if ts[i].Kind == targets.Floor {
				floorRate[ci] = c.PerSecond
			}
			if a.ops > 0 {
				n := float64(a.ops)
				c.AllowedFraction = float64(a.allowed) / n
				c.RoundTrips = float64(a.rts) / n
				c.Commands = ptr(float64(a.cmds) / n)
				if b.real() {
					c.CPUMicros = ptr(a.cpu * 1e6 / n)
				}
				if a.clientCPU > 0 {
					c.ClientCPUMicros = ptr(float64(a.clientCPU.Microseconds()) / n)
				}
			}
			ops += a.ops
			rts += a.rts
			cmds += a.cmds
			for k, v := range a.calls {
				calls[k] += v
			}
			row.Speed = append(row.Speed, c)
		}
		if ops > 0 {
			if !ts[i].OwnClient {
				row.RoundTrips = ptr(float64(rts) / float64(ops))
			}
			row.Commands = ptr(float64(cmds) / float64(ops))
			if len(calls) > 0 {
				row.CommandBreakdown = map[string]float64{}
				for k, v := range calls {
					row.CommandBreakdown[k] = float64(v) / float64(ops)
				}
			}
		}
	}
	for i := range r.Rows {
		for ci := range r.Rows[i].Speed {
			if floorRate[ci] > 0 {
				r.Rows[i].Speed[ci].RatioToFloor = r.Rows[i].Speed[ci].PerSecond / floorRate[ci]
			}
		}
	}
	if b.real() {
		// The workload's keys carry the run's token; delete them.
		if keys, err := b.keysMatching(ctx, token); err == nil {
			b.unlink(ctx, keys)
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
