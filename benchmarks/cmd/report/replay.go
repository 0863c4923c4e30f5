package main

import (
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/compare"
	"github.com/ratekit/ratelimit/strategy"
)

// Bounds of a replay: a trace is read whole into memory and replayed on
// in-process twins.
const (
	maxTraceBytes  = 64 << 20  // a CSV trace file
	maxTraceEvents = 1_000_000 // requests in a trace, read or generated; < strategy.DefaultMaxSubjects
	maxTraceMs     = int64(strategy.MaxWindow / time.Millisecond)
	maxSubjectLen  = 256
)

// shapes are the generated traces -replay accepts besides a file.
var shapes = []string{"steady", "bursty", "many", "boundary"}

// event is one request of a trace: at ms after the trace's start, subject
// asks for cost units.
type event struct {
	ms      int64
	subject string
	cost    int64
}

// replayOptions are the flags of the replay mode.
type replayOptions struct {
	trace     string // a shape or a CSV file
	enforced  string // a policy as a JSON object
	candidate string
	subjects  int
	windows   int
	seed      uint64
	json      bool
}

// replayResult is what the replay mode prints.
type replayResult struct {
	Trace     string            `json:"trace"`
	Requests  int               `json:"requests"`
	Subjects  int               `json:"subjects"`
	Span      string            `json:"span"`
	Enforced  string            `json:"enforced"`
	Candidate string            `json:"candidate"`
	Matrix    compare.Agreement `json:"matrix"`
	Agreed    float64           `json:"agreed"`
	// Allowed counts the units each policy let through.
	EnforcedUnits  int64 `json:"enforced_units"`
	CandidateUnits int64 `json:"candidate_units"`
}

// maxPolicyBytes is the largest policy document the library reads.
const maxPolicyBytes = 1 << 20

// parsePolicy decodes one policy given as a JSON object, with the
// library's own decoder, so errors name the flag and the field.
func parsePolicy(flagName, obj string) (ratelimit.Config, error) {
	if strings.TrimSpace(obj) == "" {
		return ratelimit.Config{}, fmt.Errorf("-%s: want a policy as a JSON object, e.g. '{\"algorithm\":\"fixed_window\",\"limit\":100,\"window\":\"1m\"}'", flagName)
	}
	if len(obj) > maxPolicyBytes {
		return ratelimit.Config{}, fmt.Errorf("-%s: the policy must be at most %d bytes, got %d", flagName, maxPolicyBytes, len(obj))
	}
	var p ratelimit.Policies
	if err := json.Unmarshal([]byte(`{"`+flagName+`":`+obj+`}`), &p); err != nil {
		return ratelimit.Config{}, fmt.Errorf("-%s: %s", flagName, unprefixed(err))
	}
	return p[flagName], nil
}

// unprefixed returns err's message without the library's "ratelimit: "
// prefix: the command prints its own.
func unprefixed(err error) string {
	return strings.TrimPrefix(err.Error(), "ratelimit: ")
}

// describe returns "fixed_window 100/1m0s".
func describe(c ratelimit.Config) string {
	lim := strategy.Limit{Limit: c.Limit, Window: c.Window, Burst: c.Burst}
	s := fmt.Sprintf("%s %v", c.Algorithm, lim)
	if c.Shards > 1 {
		s += fmt.Sprintf(", %d shards", c.Shards)
	}
	return s
}

// runReplay replays a trace through two policies on local twins that share
// a manual clock, and prints the agreement matrix.
func runReplay(ctx context.Context, o replayOptions, stdout io.Writer) error {
	ecfg, err := parsePolicy("enforced", o.enforced)
	if err != nil {
		return err
	}
	ccfg, err := parsePolicy("candidate", o.candidate)
	if err != nil {
		return err
	}
	var events []event
	name := o.trace
	if slices.Contains(shapes, o.trace) {
		if o.subjects < 1 || o.subjects > 100_000 {
			return fmt.Errorf("-replay-subjects must be in [1, 100000], got %d", o.subjects)
		}
		if o.windows < 1 || o.windows > 1000 {
			return fmt.Errorf("-replay-windows must be in [1, 1000], got %d", o.windows)
		}
		events, err = generate(o.trace, ecfg, o.subjects, o.windows, o.seed)
		name = fmt.Sprintf("%s (generated, seed %d)", o.trace, o.seed)
	} else {
		events, err = readTrace(o.trace)
	}
	if err != nil {
		return err
	}
	res, err := replay(ctx, events, ecfg, ccfg)
	if err != nil {
		return err
	}
	res.Trace = name
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return res.write(stdout)
}

// replayEpoch is the manual clock's time at the trace's start: a multiple
// of every window up to a day, so fixed windows start with the trace.
var replayEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// manualClock is the twins' clock, set before each request. It is safe
// for concurrent use, as a strategy.Clock must be: the twins' idle sweep
// reads it from its own goroutine while the replay sets it.
type manualClock struct{ ns atomic.Int64 }

// newManualClock returns a manualClock at t.
func newManualClock(t time.Time) *manualClock {
	c := &manualClock{}
	c.set(t)
	return c
}

func (c *manualClock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

func (c *manualClock) set(t time.Time) { c.ns.Store(t.UnixNano()) }

// replay runs events through the two policies, compared inline.
func replay(ctx context.Context, events []event, ecfg, ccfg ratelimit.Config) (replayResult, error) {
	clock := newManualClock(replayEpoch)
	// A trace has at most maxTraceEvents subjects, below the twins'
	// default bound (strategy.DefaultMaxSubjects): none is ever evicted.
	subjects := map[string]struct{}{}
	for _, e := range events {
		subjects[e.subject] = struct{}{}
	}
	enf, err := ratelimit.New(nil, ecfg, ratelimit.WithClock(clock))
	if err != nil {
		return replayResult{}, fmt.Errorf("-enforced: %s", unprefixed(err))
	}
	cand, err := ratelimit.New(nil, ccfg, ratelimit.WithClock(clock))
	if err != nil {
		return replayResult{}, fmt.Errorf("-candidate: %s", unprefixed(err))
	}
	var r replayResult
	report := compare.WithReport(func(_ context.Context, n int64, _, c strategy.Result, o compare.Outcome) {
		if o != compare.CandidateError && o != compare.Dropped && c.Allowed {
			r.CandidateUnits += n
		}
	})
	l, err := compare.New(enf, cand, compare.WithInline(), report)
	if err != nil {
		return replayResult{}, err
	}
	defer l.Close()
	for i, e := range events {
		if i%4096 == 0 && ctx.Err() != nil {
			return replayResult{}, ctx.Err()
		}
		clock.set(replayEpoch.Add(time.Duration(e.ms) * time.Millisecond))
		res, err := l.AllowN(ctx, e.subject, e.cost)
		if err != nil {
			return replayResult{}, fmt.Errorf("request %d (%q at %dms): %s", i+1, e.subject, e.ms, unprefixed(err))
		}
		if res.Allowed {
			r.EnforcedUnits += e.cost
		}
	}
	r.Requests, r.Subjects = len(events), len(subjects)
	if len(events) > 0 {
		r.Span = (time.Duration(events[len(events)-1].ms) * time.Millisecond).String()
	}
	r.Enforced, r.Candidate = describe(ecfg), describe(ccfg)
	r.Matrix = l.Agreement()
	r.Agreed = r.Matrix.Agreed()
	return r, nil
}

// write prints the matrix as a table.
func (r replayResult) write(w io.Writer) error {
	fmt.Fprintf(w, "replay: %s: %d requests, %d subjects, over %s, on local twins\n", r.Trace, r.Requests, r.Subjects, r.Span)
	fmt.Fprintf(w, "enforced:  %s (%d units allowed)\ncandidate: %s (%d units allowed)\n\n", r.Enforced, r.EnforcedUnits, r.Candidate, r.CandidateUnits)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "outcome\trequests\tshare\t")
	n := float64(max(r.Matrix.Compared(), 1))
	for _, row := range []struct {
		name string
		v    uint64
	}{
		{"both allow", r.Matrix.BothAllow},
		{"both deny", r.Matrix.BothDeny},
		{"enforced only deny", r.Matrix.EnforcedOnlyDeny},
		{"candidate only deny", r.Matrix.CandidateOnlyDeny},
	} {
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t\n", row.name, row.v, 100*float64(row.v)/n)
	}
	fmt.Fprintf(tw, "agreement\t\t%.1f%%\t\n", 100*r.Agreed)
	return tw.Flush()
}

// generate builds a trace of a named shape around the enforced policy's
// limit L per window W, over subjects subjects and windows windows:
//
//   - steady: each subject asks one unit at a fixed pace of 1.2 L per W,
//     with a random phase;
//   - bursty: each subject sends bursts of L/2 units at random times, about
//     2.4 bursts per W (1.2 L per W on average);
//   - many: every subject asks one unit at random times, L per W on
//     average (meant for -replay-subjects in the thousands);
//   - boundary: each subject sends L units in the last tenth of a window
//     and L more in the first tenth of the next, every other window (the
//     burst a fixed window lets through at its edge).
func generate(shape string, cfg ratelimit.Config, subjects, windows int, seed uint64) ([]event, error) {
	r := rand.New(rand.NewPCG(seed, 0x7265706c6179))
	wms := cfg.Window.Milliseconds()
	span := wms * int64(windows)
	lim := max(cfg.Limit, 1)
	var out []event
	add := func(ms int64, s int, cost int64) error {
		if len(out) >= maxTraceEvents {
			return fmt.Errorf("-replay %s: the trace would exceed %d requests: lower -replay-subjects or -replay-windows", shape, maxTraceEvents)
		}
		out = append(out, event{ms: ms, subject: "subject:" + strconv.Itoa(s), cost: cost})
		return nil
	}
	for s := range subjects {
		switch shape {
		case "steady":
			step := max(wms*10/(lim*12), 1)
			for ms := r.Int64N(step); ms < span; ms += step {
				if err := add(ms, s, 1); err != nil {
					return nil, err
				}
			}
		case "bursty":
			bursts := int(float64(windows) * 2.4)
			for range bursts {
				at := r.Int64N(span)
				for range max(lim/2, 1) {
					if err := add(at, s, 1); err != nil {
						return nil, err
					}
				}
			}
		case "many":
			for range lim * int64(windows) {
				if err := add(r.Int64N(span), s, 1); err != nil {
					return nil, err
				}
			}
		case "boundary":
			tenth := max(wms/10, 1)
			for w := int64(1); w < int64(windows); w += 2 {
				edge := w * wms
				for range lim {
					if err := add(edge-1-r.Int64N(tenth), s, 1); err != nil {
						return nil, err
					}
					if err := add(edge+r.Int64N(tenth), s, 1); err != nil {
						return nil, err
					}
				}
			}
		default:
			return nil, fmt.Errorf("-replay: unknown shape %q", shape)
		}
	}
	slices.SortStableFunc(out, byTime)
	return out, nil
}

// readTrace reads a CSV trace: one request a line, "ms,subject,cost", ms
// the request's time in milliseconds since the trace's start (lines in any
// order; they are replayed sorted by time, ties in file order), cost >= 1.
// Blank lines, lines starting with '#' and a first line "ms,subject,cost"
// are skipped.
func readTrace(name string) ([]event, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("-replay: %q is neither a shape (%s) nor a readable file: %w", name, strings.Join(shapes, ", "), err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxTraceBytes {
		return nil, fmt.Errorf("-replay %s: the file must be at most %d bytes, got %d", name, maxTraceBytes, st.Size())
	}
	events, err := parseTrace(io.LimitReader(f, maxTraceBytes+1))
	if err != nil {
		return nil, fmt.Errorf("-replay %s: %w", name, err)
	}
	return events, nil
}

func byTime(a, b event) int { return cmp.Compare(a.ms, b.ms) }

// parseTrace parses a CSV trace (see readTrace).
func parseTrace(r io.Reader) ([]event, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 3
	cr.Comment = '#'
	cr.ReuseRecord = true
	var out []event
	read := int64(0)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return nil, err // csv errors name the line
		}
		if read = cr.InputOffset(); read > maxTraceBytes {
			return nil, fmt.Errorf("the trace must be at most %d bytes", maxTraceBytes)
		}
		if len(out) == 0 && rec[0] == "ms" && rec[1] == "subject" && rec[2] == "cost" {
			continue
		}
		if len(out) >= maxTraceEvents {
			return nil, fmt.Errorf("line %d: the trace must hold at most %d requests", line, maxTraceEvents)
		}
		ms, err := strconv.ParseInt(strings.TrimSpace(rec[0]), 10, 64)
		if err != nil || ms < 0 || ms > maxTraceMs {
			return nil, fmt.Errorf("line %d: ms: want an integer in [0, %d], got %q", line, maxTraceMs, rec[0])
		}
		subject := rec[1]
		if subject == "" || len(subject) > maxSubjectLen {
			return nil, fmt.Errorf("line %d: subject: want 1 to %d bytes, got %d", line, maxSubjectLen, len(subject))
		}
		cost, err := strconv.ParseInt(strings.TrimSpace(rec[2]), 10, 64)
		if err != nil || cost < 1 || cost > strategy.MaxUnits {
			return nil, fmt.Errorf("line %d: cost: want an integer in [1, %d], got %q", line, int64(strategy.MaxUnits), rec[2])
		}
		out = append(out, event{ms: ms, subject: strings.Clone(subject), cost: cost})
	}
	if len(out) == 0 {
		return nil, errors.New("the trace holds no request")
	}
	slices.SortStableFunc(out, byTime)
	return out, nil
}
