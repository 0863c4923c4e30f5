package report

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/benchmarks/internal/targets"
	"github.com/ratekit/ratelimit/strategy"
)

// runMemory measures each target's bytes per subject on the real Redis:
// MEMORY USAGE summed over the keys of one fresh subject after 10 and after
// limit decisions. The subject is Options.SubjectBytes long ("u" and random
// digits) and our strategies use their default prefix, as a user's would.
func runMemory(ctx context.Context, o Options, b *backend, ts []targets.Target, r *Report) {
	env := targets.Env{RDB: b.work, Limit: o.Limit, Addrs: b.env(o, "").Addrs}
	for i, t := range ts {
		row := &r.Rows[i]
		if t.Kind == targets.Floor {
			if err := memoryFloor(ctx, o, b, row); err != nil {
				row.MemoryNote = "n/a: " + err.Error()
			}
			continue
		}
		if t.Kind == targets.Facade || t.Kind == targets.Batched || row.Error != "" {
			continue
		}
		if t.Stateless {
			row.MemoryNote = "n/a: keeps nothing per subject"
			continue
		}
		fmt.Fprintf(o.Progress, "\rmemory %-40s", t.Name)
		if err := memory(ctx, o, b, t, env, row); err != nil {
			row.MemoryNote = "n/a: " + err.Error()
		}
	}
}

// freshSubject returns a subject of size bytes (at least 4) that no key
// contains yet.
func freshSubject(ctx context.Context, b *backend, size int) (string, error) {
	for {
		digits := make([]byte, max(size, 4)-1)
		for i := range digits {
			digits[i] = byte('0' + rand.IntN(10))
		}
		subject := "u" + string(digits)
		keys, err := b.keysMatching(ctx, subject)
		if err != nil {
			return "", err
		}
		if len(keys) == 0 { // never measure (or delete) a key we did not write
			return subject, nil
		}
	}
}

// memoryFloor measures the least a subject can cost in Redis with our key
// layout: one key "rl:xx:{<subject>}" holding an integer, with a TTL.
func memoryFloor(ctx context.Context, o Options, b *backend, row *Row) error {
	subject, err := freshSubject(ctx, b, o.SubjectBytes)
	if err != nil {
		return err
	}
	key := "rl:xx:{" + subject + "}"
	if err := b.admin.Set(ctx, key, 1764417600000, time.Minute).Err(); err != nil {
		return err
	}
	defer b.unlink(ctx, []string{key})
	n, err := b.bytesOf(ctx, []string{key})
	if err != nil {
		return err
	}
	row.BytesAfter10, row.BytesAfterLimit, row.Keys = &n, &n, 1
	row.MemoryNote = "bytes: one integer in a key named like ours, " + key + ", with a TTL: Redis's least per subject"
	return nil
}

func memory(ctx context.Context, o Options, b *backend, t targets.Target, env targets.Env, row *Row) error {
	d, err := t.New(env)
	if err != nil {
		return err
	}
	defer closeDecider(d)
	subject, err := freshSubject(ctx, b, o.SubjectBytes)
	if err != nil {
		return err
	}
	var keys []string
	defer func() {
		if k, err := b.keysMatching(ctx, subject); err == nil {
			b.unlink(ctx, k)
		}
	}()
	denied := 0
	measure := func(upTo int64, from int64) (int64, error) {
		for range upTo - from {
			ok, err := d.Decide(ctx, subject)
			if err != nil {
				return 0, err
			}
			if !ok {
				denied++
			}
		}
		keys, err = b.keysMatching(ctx, subject)
		if err != nil {
			return 0, err
		}
		return b.bytesOf(ctx, keys)
	}
	first := min(10, o.Limit.Limit)
	n10, err := measure(first, 0)
	if err != nil {
		return err
	}
	nl, err := measure(o.Limit.Limit, first)
	if err != nil {
		return err
	}
	row.BytesAfter10, row.BytesAfterLimit = &n10, &nl
	row.Keys = len(keys)
	if denied > 0 {
		row.MemoryNote = fmt.Sprintf("%d of %d decisions denied", denied, o.Limit.Limit)
	}
	return nil
}

// simClock is a controlled clock, safe for concurrent use.
type simClock struct{ ns atomic.Int64 }

func (c *simClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *simClock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *simClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// probeEpoch is an instant aligned to every window up to a day.
var probeEpoch = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

// alignedStart returns an instant aligned to a multiple of w since the Unix
// epoch, as fixed windows are.
func alignedStart(w time.Duration) time.Time {
	ms := probeEpoch.UnixMilli()
	wm := w.Milliseconds()
	return time.UnixMilli(ms - ms%wm).UTC()
}

// event is one decision at offset ms from the probe's start.
type event = int64

// Schedules of the precision probes, in ms from an aligned start.
func boundaryBurst(lim strategy.Limit) [][]event {
	w, l := lim.Window.Milliseconds(), lim.Limit
	// A: limit just before an aligned window boundary, limit at it.
	a := append(repeat(w-1, l), repeat(w, l)...)
	// B: for windows that start at a subject's first request: one request
	// opens the window, limit just before its end, limit at its end.
	bb := append([]event{1}, append(repeat(w, l), repeat(w+1, l)...)...)
	return [][]event{a, bb}
}

func burstThenSteady(lim strategy.Limit) [][]event {
	w, l := lim.Window.Milliseconds(), lim.Limit
	// A full burst from idle, then a steady stream at twice the limit's
	// rate for two windows; the burst mid-window, and in the last ms of
	// a window (what an estimate weighting the previous window by the time
	// left of the current one undercounts most).
	var out [][]event
	for _, start := range []int64{w / 2, w - 1} {
		ev := repeat(start, l)
		step := max(w/(2*l), 1)
		for t := start + step; t <= start+2*w; t += step {
			ev = append(ev, t)
		}
		out = append(out, ev)
	}
	return out
}

func repeat(t event, n int64) []event {
	ev := make([]event, n)
	for i := range ev {
		ev[i] = t
	}
	return ev
}

// maxInWindow returns the most allowed units in any window (t - w, t].
func maxInWindow(times []event, w int64) int {
	best, j := 0, 0
	for i, t := range times {
		for times[j] <= t-w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func runPrecision(ctx context.Context, o Options, ts []targets.Target, r *Report) {
	if o.Limit.Limit == 0 {
		return
	}
	// Each probe has its own miniredis and clock: run them side by side.
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, t := range ts {
		row := &r.Rows[i]
		if t.Kind == targets.Floor || t.Kind == targets.Facade || t.Kind == targets.Batched {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			pb, err := precision(ctx, t, o.Limit, boundaryBurst(o.Limit))
			if err != nil {
				row.PrecisionNote = "n/a: " + err.Error()
				return
			}
			ps, err := precision(ctx, t, o.Limit, burstThenSteady(o.Limit))
			if err != nil {
				row.PrecisionNote = "n/a: " + err.Error()
				return
			}
			row.PrecisionBoundary, row.PrecisionBurstSteady = &pb, &ps
		}()
	}
	fmt.Fprintf(o.Progress, "\rprecision probes%40s", "")
	wg.Wait()
}

// precision runs each schedule on a fresh embedded miniredis whose time is
// the probe's and returns the worst ratio of allowed units in any window to
// the limit.
func precision(ctx context.Context, t targets.Target, lim strategy.Limit, schedules [][]event) (float64, error) {
	worst := 0.0
	for _, evs := range schedules {
		p, err := precisionOnce(ctx, t, lim, evs)
		if err != nil {
			return 0, err
		}
		worst = max(worst, p)
	}
	return worst, nil
}

func precisionOnce(ctx context.Context, t targets.Target, lim strategy.Limit, evs []event) (float64, error) {
	mr, err := miniredis.Run()
	if err != nil {
		return 0, err
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	start := alignedStart(lim.Window)
	clk := &simClock{}
	at := func(ms event) {
		now := start.Add(time.Duration(ms) * time.Millisecond)
		clk.set(now)
		mr.SetTime(now)
	}
	at(0)
	d, err := t.New(targets.Env{RDB: rdb, Limit: lim, Clock: clk})
	if err != nil {
		return 0, err
	}
	defer closeDecider(d)
	var allowed []event
	last := event(0)
	for _, ev := range evs {
		if ev != last {
			mr.FastForward(time.Duration(ev-last) * time.Millisecond)
			at(ev)
			last = ev
		}
		ok, err := d.Decide(ctx, "probe:1")
		if err != nil {
			return 0, err
		}
		if ok {
			allowed = append(allowed, ev)
		}
	}
	return float64(maxInWindow(allowed, lim.Window.Milliseconds())) / float64(lim.Limit), nil
}

// runLocal measures each of our local twins on one warm subject.
func runLocal(o Options, r *Report) {
	if o.LocalDuration < 0 {
		return
	}
	for i := range r.Rows {
		row := &r.Rows[i]
		if row.Kind != string(targets.Ours) {
			continue
		}
		fmt.Fprintf(o.Progress, "\rlocal twin %-40s", row.Name)
		l, err := measureLocal(strategy.Algorithm(row.Name), o.Limit, o.LocalDuration)
		if err == nil {
			row.Local = l
		}
	}
}

func measureLocal(a strategy.Algorithm, lim strategy.Limit, dur time.Duration) (*Local, error) {
	ctx := context.Background()
	const subject = "user:42"
	// Allowed path: the clock steps 1% less than Window/Limit per decision,
	// so the subject runs at its limit: about 99% allowed, and its state
	// never lapses (a step above the rate would let a bucket refill fully
	// and its state expire before every decision: not a warm subject).
	clk := &simClock{}
	clk.set(alignedStart(lim.Window))
	d, err := targets.Local(a, lim, clk)
	if err != nil {
		return nil, err
	}
	step := time.Millisecond
	if lim.Limit > 0 {
		step = max(lim.Window/time.Duration(lim.Limit)*99/100, time.Millisecond)
	}
	for range 2 * lim.Capacity() { // warm
		d.Decide(ctx, subject)
		clk.add(step)
	}
	ns, allocs, frac := timeLoop(func() bool {
		ok, _ := d.Decide(ctx, subject)
		clk.add(step)
		return ok
	}, dur)
	l := &Local{AllowedNanos: ns, AllowedAllocs: allocs, AllowedFraction: frac}
	// Denied path: a frozen clock and an exhausted subject.
	clk2 := &simClock{}
	clk2.set(alignedStart(lim.Window))
	d2, err := targets.Local(a, lim, clk2)
	if err != nil {
		return nil, err
	}
	for range 2 * lim.Capacity() {
		d2.Decide(ctx, subject)
	}
	l.DeniedNanos, l.DeniedAllocs, _ = timeLoop(func() bool {
		ok, _ := d2.Decide(ctx, subject)
		return ok
	}, dur)
	return l, nil
}

// timeLoop runs fn for about dur and returns ns and allocations per call
// and the fraction of calls that returned true. The time is the CPU time of
// the goroutine's locked OS thread where the OS tells it, so that other
// processes on a busy machine do not count; the wall clock otherwise.
func timeLoop(fn func() bool, dur time.Duration) (ns, allocs, frac float64) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	cpu0, cpuOK := threadCPU()
	start := time.Now()
	n, yes := 0, 0
	for time.Since(start) < dur {
		for range 1000 {
			if fn() {
				yes++
			}
		}
		n += 1000
	}
	el := time.Since(start)
	if cpu1, ok := threadCPU(); ok && cpuOK {
		el = cpu1 - cpu0
	}
	runtime.ReadMemStats(&m1)
	return float64(el.Nanoseconds()) / float64(n), float64(m1.Mallocs-m0.Mallocs) / float64(n), float64(yes) / float64(n)
}
