// Package report measures what each rate-limiting strategy costs and what
// it gives up, side by side in one run: decisions per second against a
// trivial EVALSHA floor, latency, round trips, Redis commands and CPU per
// decision, bytes per subject, precision, and the local twins' speed. The
// report command (benchmarks/cmd/report) is its front end.
package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/ratekit/ratelimit/benchmarks/internal/targets"
	"github.com/ratekit/ratelimit/strategy"
)

// The backends a report can run on.
const (
	BackendMiniredis = "miniredis" // embedded, in this process
	BackendRedis     = "redis"     // one server at Options.Addrs[0]
	BackendCluster   = "cluster"   // a Redis Cluster reached through Options.Addrs
)

// Options configure a run. The zero value of a field takes its default.
type Options struct {
	Backend       string        // default BackendMiniredis
	Addrs         []string      // the server or cluster seeds for BackendRedis, BackendCluster
	Duration      time.Duration // total time of the speed slices; default 30s
	Rounds        int           // times every (target, concurrency) cell is visited; default 5
	Concurrency   []int         // default 1, 8, 64
	Subjects      int           // distinct subjects of the workload; default 10,000
	Limit         strategy.Limit
	Peers         bool          // measure the peer libraries too
	LocalDuration time.Duration // per local twin and path; default 300ms; < 0 skips
	SubjectBytes  int           // length of the memory probes' subjects; default 6
	Only          []string      // measure only targets with these names (the floor always)
	PrecisionOnly bool          // skip speed and memory (on miniredis they would mislead)
	Progress      io.Writer     // progress lines; nil for none
}

func (o *Options) defaults() {
	if o.Backend == "" {
		o.Backend = BackendMiniredis
	}
	if o.Duration <= 0 {
		o.Duration = 30 * time.Second
	}
	if o.Rounds <= 0 {
		o.Rounds = 5
	}
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{1, 8, 64}
	}
	if o.Subjects <= 0 {
		o.Subjects = 10000
	}
	if o.Limit == (strategy.Limit{}) {
		o.Limit = strategy.PerMinute(100)
	}
	if o.LocalDuration == 0 {
		o.LocalDuration = 300 * time.Millisecond
	}
	if o.SubjectBytes <= 0 {
		o.SubjectBytes = 6
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Report is the outcome of a run; its JSON form is the -json output.
type Report struct {
	Backend  string   `json:"backend"`
	Server   string   `json:"server"`           // "redis 7.0.15", "miniredis"
	Origin   string   `json:"origin,omitempty"` // how the server came to be: "started by the report on 127.0.0.1:40123"
	Commit   string   `json:"commit,omitempty"` // the commit the report ran at, "+ changes" when the tree was not clean
	Precise  bool     `json:"precision_only,omitempty"`
	Machine  Machine  `json:"machine"`
	Workload Workload `json:"workload"`
	Rows     []Row    `json:"rows"`
	Goals    []Goal   `json:"goals"`
	Notes    []string `json:"notes"`

	// MemoryAtLimits: the exact logs' bytes per subject at limits 100,
	// 1,000 and 10,000 (real Redis only).
	MemoryAtLimits []LimitBytes `json:"memory_at_limits,omitempty"`
}

// Machine describes where the numbers come from.
type Machine struct {
	Cores       int    `json:"cores"`
	GOMAXPROCS  int    `json:"gomaxprocs"`
	GoVersion   string `json:"go"`
	OS          string `json:"os"`
	LoadBefore  string `json:"load_before,omitempty"` // 1, 5 and 15 minute load averages
	LoadAfter   string `json:"load_after,omitempty"`
	StartedAt   string `json:"started_at"`
	SpeedMillis int64  `json:"speed_millis"` // wall time of the speed section
}

// Workload is what the speed section ran.
type Workload struct {
	Subjects    int    `json:"subjects"`
	Limit       string `json:"limit"`
	Concurrency []int  `json:"concurrency"`
	Duration    string `json:"duration"`
	Rounds      int    `json:"rounds"`
	SliceMillis int64  `json:"slice_millis"`
}

// Row is one target's numbers. A nil pointer means not measured ("n/a").
type Row struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"` // floor, ours, peer
	Algorithm string `json:"algorithm"`
	Note      string `json:"note,omitempty"`
	Error     string `json:"error,omitempty"` // why the row has no numbers

	Speed []Cell `json:"speed"`
	// Per decision, over every speed slice.
	RoundTrips       *float64           `json:"round_trips_per_decision"` // nil: through a client of its own, not counted
	Commands         *float64           `json:"commands_per_decision"`
	CommandBreakdown map[string]float64 `json:"commands_breakdown,omitempty"`

	BytesAfter10    *int64 `json:"bytes_after_10"`
	BytesAfterLimit *int64 `json:"bytes_after_limit"`
	// BytesSpread: the exact logs' bytes at the run's limit with its
	// requests spread over the window (see MemoryAtLimits), where
	// BytesAfterLimit, one burst, merges requests of one millisecond.
	BytesSpread *int64 `json:"bytes_spread,omitempty"`
	Keys        int    `json:"keys_per_subject,omitempty"` // keys holding the subject after limit requests
	MemoryNote  string `json:"memory_note,omitempty"`

	PrecisionBoundary    *float64 `json:"precision_boundary"`
	PrecisionBurstSteady *float64 `json:"precision_burst_steady"`
	PrecisionNote        string   `json:"precision_note,omitempty"`

	Local *Local `json:"local,omitempty"`
}

// Cell is one target at one concurrency.
type Cell struct {
	Concurrency     int      `json:"concurrency"`
	Decisions       int64    `json:"decisions"`
	Seconds         float64  `json:"seconds"`
	PerSecond       float64  `json:"decisions_per_second"`
	RatioToFloor    float64  `json:"ratio_to_floor"`
	P50Micros       float64  `json:"p50_us"`
	P99Micros       float64  `json:"p99_us"`
	AllowedFraction float64  `json:"allowed_fraction"`
	Errors          int64    `json:"errors"`
	FirstError      string   `json:"first_error,omitempty"`
	RoundTrips      float64  `json:"round_trips_per_decision"`
	Commands        *float64 `json:"commands_per_decision"`
	CPUMicros       *float64 `json:"redis_cpu_us_per_decision"`
	// ClientCPUMicros is the report process's CPU time (user and system)
	// per decision: the target's client work plus the load generator's,
	// which is the same for every target.
	ClientCPUMicros *float64 `json:"client_cpu_us_per_decision"`
	// Degraded counts the answers the backend did not make (the facade's
	// failure policy answering for a failed Redis or an open breaker):
	// they are in neither Decisions, PerSecond nor the latencies.
	Degraded int64 `json:"degraded"`
}

// Local is the in-process twin's speed on a warm subject, one goroutine.
type Local struct {
	AllowedNanos    float64 `json:"allowed_ns"`
	AllowedAllocs   float64 `json:"allowed_allocs"`
	AllowedFraction float64 `json:"allowed_path_allowed_fraction"`
	DeniedNanos     float64 `json:"denied_ns"`
	DeniedAllocs    float64 `json:"denied_allocs"`
}

// Goal is one of the targets and where the run stands.
type Goal struct {
	What     string   `json:"what"`
	Want     string   `json:"want"`
	Measured *float64 `json:"measured"`
	Met      *bool    `json:"met"` // nil: not measured in this run
	Note     string   `json:"note,omitempty"`
}

// Run measures every target (see package targets) on the backend o names.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	if err := o.Limit.Validate(); err != nil {
		return nil, err
	}
	ts := selectTargets(o)
	if len(ts) < 2 {
		return nil, errors.New("report: no target besides the floor matches -only")
	}
	r := &Report{
		Backend: o.Backend,
		Machine: Machine{Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
			OS: runtime.GOOS + "/" + runtime.GOARCH, LoadBefore: loadAvg(), StartedAt: time.Now().UTC().Format(time.RFC3339)},
		Workload: Workload{Subjects: o.Subjects, Limit: o.Limit.String(), Concurrency: o.Concurrency,
			Duration: o.Duration.String(), Rounds: o.Rounds},
	}
	b, err := openBackend(ctx, o)
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			b.close()
		}
	}()
	r.Server = b.version
	for _, t := range ts {
		r.Rows = append(r.Rows, Row{Name: t.Name, Kind: string(t.Kind), Algorithm: t.Algorithm, Note: t.Note})
	}

	start := time.Now()
	r.Precise = o.PrecisionOnly
	if !o.PrecisionOnly {
		if err := runSpeed(ctx, o, b, ts, r); err != nil {
			return nil, err
		}
	}
	r.Machine.SpeedMillis = time.Since(start).Milliseconds()
	r.Machine.LoadAfter = loadAvg()
	if b.real() && !o.PrecisionOnly {
		runMemory(ctx, o, b, ts, r)
		runMemoryAtLimits(ctx, o, b, r)
	} else {
		for i := range r.Rows {
			if r.Rows[i].Kind == string(targets.Ours) || r.Rows[i].Kind == string(targets.Peer) {
				r.Rows[i].MemoryNote = "n/a on miniredis"
			}
		}
	}
	b.close() // nothing of the backend may allocate while the twins are timed
	closed = true
	runPrecision(ctx, o, ts, r)
	runLocal(o, r)
	r.Goals = goals(r)
	r.Notes = notes(o, b)
	fmt.Fprintf(o.Progress, "\rdone in %s%s\n", time.Since(start).Round(time.Second), strings.Repeat(" ", 50))
	return r, nil
}

func selectTargets(o Options) []targets.Target {
	all := targets.All(o.Peers)
	if len(o.Only) == 0 {
		return all
	}
	var ts []targets.Target
	for _, t := range append(all, targets.Evaluations()...) {
		for _, n := range o.Only {
			if t.Kind == targets.Floor || t.Name == n {
				ts = append(ts, t)
				break
			}
		}
	}
	return ts
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func notes(o Options, b *backend) []string {
	var n []string
	if !o.PrecisionOnly {
		n = append(n,
			"ratio = decisions/s of the row / decisions/s of the floor at the same concurrency; the cells were measured in "+
				"interleaved slices (every round visits every cell, in a rotated order), so machine noise hits all rows alike",
			"round trips counted by a client hook; commands per decision include the EVALSHA itself and every command a script calls")
	}
	n = append(n,
		"precision = the most units allowed in any sliding window of the limit's length / the limit, worst over the probe's variants; "+
			"probes run on an embedded miniredis with a controlled clock (client clock, server TIME via SetTime, TTLs via FastForward), so they are deterministic",
		"local = the in-process twin (the strategy NewLocal builds, called directly), one goroutine, one warm subject: allowed path with a client clock stepping 0.99 Window/Limit per decision (about 99% allowed, the state never lapses), denied path on an exhausted subject; ns = CPU time of the loop's thread / decisions (so other processes do not count); allocations = the process's mallocs over the loop / decisions",
	)
	if b.real() {
		n = append(n, fmt.Sprintf("bytes = MEMORY USAGE ... SAMPLES 0 summed over the keys of one %d-byte subject, after 10 and after limit decisions at once; "+
			"a string key costs 48 bytes plus its name's allocation (56 for names of 7-14 bytes, 72 for 15-30), so the subject's length moves every row alike (-subject-bytes)", o.SubjectBytes),
			"Redis CPU = delta of used_cpu_sys + used_cpu_user over the slices / decisions; it includes the server's network work")
	} else {
		n = append(n, "precision only: miniredis runs in this process and interprets Lua in Go, so its speed says nothing about Redis's; "+
			"speed, memory and Redis CPU were not measured (they need a real redis-server)")
	}
	if !o.Peers {
		n = append(n, "peers not measured (-peers=false)")
	}
	return n
}
