package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratekit/ratelimit/benchmarks/internal/report"
	"github.com/ratekit/ratelimit/benchmarks/internal/targets"
)

// tiny keeps the speed section short: the test checks that the report
// works and its numbers are sane, not how fast anything is.
var tiny = []string{"-duration=400ms", "-rounds=1", "-subjects=50", "-local=2ms", "-q"}

func runReport(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append(append([]string{}, tiny...), args...), &stdout, &stderr); code != 0 {
		t.Fatalf("report %v: exit %d, stderr:\n%s", args, code, stderr.String())
	}
	return stdout.String(), stderr.String()
}

func decode(t *testing.T, out string) report.Report {
	t.Helper()
	var r report.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-json output does not parse: %v\n%s", err, out)
	}
	return r
}

func rowsByName(r report.Report) map[string]report.Row {
	m := map[string]report.Row{}
	for _, rw := range r.Rows {
		m[rw.Name] = rw
	}
	return m
}

// checkCommon checks what holds on every backend: every strategy and the
// floor are there with sane speed numbers and precision.
func checkCommon(t *testing.T, r report.Report) map[string]report.Row {
	t.Helper()
	rows := rowsByName(r)
	want := []string{"floor"}
	for _, a := range targets.Names() {
		want = append(want, string(a))
	}
	for _, name := range want {
		rw, ok := rows[name]
		if !ok {
			t.Errorf("row %q missing; rows: %v", name, keys(rows))
			continue
		}
		if rw.Error != "" {
			t.Errorf("row %q: %s", name, rw.Error)
		}
		if len(rw.Speed) != 3 {
			t.Errorf("row %q: %d speed cells, want 3 (concurrency 1, 8, 64)", name, len(rw.Speed))
		}
		for _, c := range rw.Speed {
			if c.Decisions <= 0 || c.PerSecond <= 0 || c.RatioToFloor <= 0 {
				t.Errorf("row %q c=%d: decisions %d, %.1f/s, ratio %.3f; want all > 0", name, c.Concurrency, c.Decisions, c.PerSecond, c.RatioToFloor)
			}
			if c.Errors > 0 {
				t.Errorf("row %q c=%d: %d errors, first: %s", name, c.Concurrency, c.Errors, c.FirstError)
			}
			if c.P50Micros <= 0 || c.P99Micros < c.P50Micros {
				t.Errorf("row %q c=%d: p50 %.1fµs p99 %.1fµs", name, c.Concurrency, c.P50Micros, c.P99Micros)
			}
			if c.RoundTrips < 0.99 {
				t.Errorf("row %q c=%d: %.2f round trips per decision, want >= 1", name, c.Concurrency, c.RoundTrips)
			}
		}
		if rw.Commands == nil || *rw.Commands < 1 {
			t.Errorf("row %q: commands per decision %v, want >= 1", name, rw.Commands)
		}
		if name == "floor" {
			if rw.Commands != nil && *rw.Commands > 1.01 {
				t.Errorf("floor: %.2f commands per decision, want 1", *rw.Commands)
			}
			continue
		}
		if rw.PrecisionBoundary == nil || rw.PrecisionBurstSteady == nil {
			t.Errorf("row %q: precision not measured: %s", name, rw.PrecisionNote)
			continue
		}
		if *rw.PrecisionBoundary < 1 || *rw.PrecisionBurstSteady < 1 {
			t.Errorf("row %q: precision %.2f, %.2f; want >= 1 (a full limit is always allowed from idle)", name, *rw.PrecisionBoundary, *rw.PrecisionBurstSteady)
		}
		if rw.Local == nil || rw.Local.AllowedNanos <= 0 || rw.Local.DeniedNanos <= 0 {
			t.Errorf("row %q: local twin not measured: %+v", name, rw.Local)
		} else if rw.Local.AllowedFraction < 0.9 {
			t.Errorf("row %q: local allowed path allowed only %.2f of its decisions", name, rw.Local.AllowedFraction)
		}
	}
	if rw, ok := rows["sliding_log"]; ok && rw.PrecisionBoundary != nil {
		if *rw.PrecisionBoundary != 1 || *rw.PrecisionBurstSteady != 1 {
			t.Errorf("sliding_log precision %.3f, %.3f; want exactly 1 (it is exact)", *rw.PrecisionBoundary, *rw.PrecisionBurstSteady)
		}
	}
	if rw, ok := rows["fixed_window"]; ok && rw.PrecisionBoundary != nil {
		if p := *rw.PrecisionBoundary; p < 1.9 || p > 2 {
			t.Errorf("fixed_window boundary-burst precision %.3f, want about 2 (limit just before and just after a boundary)", p)
		}
	}
	// a leased row keeps its algorithm's bound: never more in a window
	// than the same algorithm decided call by call
	for _, lt := range targets.LeasedTargets() {
		rw, ok := rows[lt.Name]
		direct := rows[lt.Algorithm]
		if !ok || rw.Error != "" {
			t.Errorf("leased row %q missing or failed: %+v", lt.Name, rw.Error)
			continue
		}
		if rw.PrecisionBoundary == nil || rw.PrecisionBurstSteady == nil || direct.PrecisionBoundary == nil || direct.PrecisionBurstSteady == nil {
			t.Errorf("row %q: precision not measured: %s", lt.Name, rw.PrecisionNote)
			continue
		}
		if *rw.PrecisionBoundary > *direct.PrecisionBoundary+0.005 || *rw.PrecisionBurstSteady > *direct.PrecisionBurstSteady+0.005 {
			t.Errorf("row %q: precision %.3f, %.3f above %s's %.3f, %.3f: leasing let more through than the algorithm's bound",
				lt.Name, *rw.PrecisionBoundary, *rw.PrecisionBurstSteady, lt.Algorithm, *direct.PrecisionBoundary, *direct.PrecisionBurstSteady)
		}
	}
	for _, name := range []string{"peer:redis_rate gcra", "peer:ulule fixed_window", "peer:mennanov sliding_window", "peer:mennanov token_bucket"} {
		if _, ok := rows[name]; !ok {
			t.Errorf("peer row %q missing (a peer that does not work must still show, with n/a)", name)
		}
	}
	return rows
}

func keys(m map[string]report.Row) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

// TestReportOnMiniredis runs the precision-only report (no server) once and
// checks both outputs: the tables on stdout and the JSON beside them.
func TestReportOnMiniredis(t *testing.T) {
	jsonFile := filepath.Join(t.TempDir(), "report.json")
	out, _ := runReport(t, "-miniredis", "-json-file", jsonFile)
	checkPrecisionOnly(t, out)
	js, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	r := decode(t, string(js))
	if r.Backend != "miniredis" || !r.Precise {
		t.Errorf("backend %q, precision only %v; want miniredis, true", r.Backend, r.Precise)
	}
	rows := rowsByName(r)
	for _, a := range targets.Names() {
		rw, ok := rows[string(a)]
		if !ok {
			t.Errorf("row %q missing", a)
			continue
		}
		if len(rw.Speed) != 0 || rw.BytesAfterLimit != nil {
			t.Errorf("row %q: speed %v, bytes %v on miniredis; want neither measured", a, rw.Speed, rw.BytesAfterLimit)
		}
		if rw.PrecisionBoundary == nil || rw.PrecisionBurstSteady == nil || *rw.PrecisionBoundary < 1 {
			t.Errorf("row %q: precision %v, %v; want measured, >= 1", a, rw.PrecisionBoundary, rw.PrecisionBurstSteady)
		}
		if rw.Local == nil || rw.Local.AllowedNanos <= 0 {
			t.Errorf("row %q: in-process twin not measured: %+v", a, rw.Local)
		}
	}
	if rw, ok := rows["sliding_log"]; ok && rw.PrecisionBoundary != nil && (*rw.PrecisionBoundary != 1 || *rw.PrecisionBurstSteady != 1) {
		t.Errorf("sliding_log precision %.3f, %.3f; want exactly 1 (it is exact)", *rw.PrecisionBoundary, *rw.PrecisionBurstSteady)
	}
	if len(r.Goals) != 0 {
		t.Errorf("%d goals without -goals; want none", len(r.Goals))
	}
}

// checkPrecisionOnly checks the table of a run without a real Redis: it
// says so plainly, and ranks nothing on speed or memory.
func checkPrecisionOnly(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{"NO REAL REDIS", "need a real Redis", "boundary burst", "legend:", "which to pick", "sliding_log (never above the limit)"} {
		if !strings.Contains(out, want) {
			t.Errorf("precision-only table lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"decisions/s", "vs floor", "Most decisions per second", "Least memory", "targets (-goals)"} {
		if strings.Contains(out, bad) {
			t.Errorf("precision-only table shows %q:\n%s", bad, out)
		}
	}
}

// TestReportFallsBackWithoutRedis: with no redis-server to start, the
// default run says so and measures precision on miniredis.
func TestReportFallsBackWithoutRedis(t *testing.T) {
	t.Setenv("REDIS_SERVER", filepath.Join(t.TempDir(), "no-redis-server"))
	out, stderr := runReport(t, "-only", "sliding_log,fixed_window", "-peers=false")
	if !strings.Contains(stderr, "no redis-server") {
		t.Errorf("stderr %q; want it to say no redis-server was found", stderr)
	}
	if !strings.Contains(out, "NO REAL REDIS") || strings.Contains(out, "decisions/s") {
		t.Errorf("fallback table does not say it has no real Redis, or shows speed:\n%s", out)
	}
}

func TestReportHelpSaysWhatItDoes(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &stdout, &stderr); code != 0 {
		t.Errorf("-h: exit %d, want 0", code)
	}
	if !strings.HasPrefix(stderr.String(), "report measures every rate-limiting strategy") || !strings.Contains(stderr.String(), "-miniredis") {
		t.Errorf("-h starts %q; want what the tool does first, then the flags", tail(stderr.String(), 200))
	}
}

func tail(s string, n int) string { return s[:min(len(s), n)] }

// stateless names the targets that keep nothing per subject (a peer's
// floor): their rows have no bytes per subject.
var stateless = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range targets.All(true) {
		if t.Stateless {
			m[t.Name] = true
		}
	}
	return m
}()

// TestReportOnRealRedis: the plain command (no backend flag) starts its own
// redis-server and measures everything there, peers included.
func TestReportOnRealRedis(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "chart.svg")
	jsonFile := filepath.Join(t.TempDir(), "report.json")
	out, _ := runReport(t, "-json-file", jsonFile, "-chart", chart, "-goals")
	for _, want := range []string{"server:   redis ", "started by the report on 127.0.0.1:", "decisions/s, 1 caller", "vs floor",
		"bytes after limit", "legend:", "which to pick", "Least memory per subject", "the project's own targets (-goals)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "NO REAL REDIS") {
		t.Errorf("real-Redis table says it had none:\n%s", out)
	}
	js, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	r := decode(t, string(js))
	if r.Backend != "redis" || !strings.HasPrefix(r.Server, "redis ") || !strings.Contains(r.Origin, "started by the report") {
		t.Errorf("backend %q server %q origin %q, want a real redis the report started", r.Backend, r.Server, r.Origin)
	}
	if len(r.Goals) == 0 {
		t.Error("-goals: no goals in the report")
	}
	rows := checkCommon(t, r)
	for name, rw := range rows {
		if rw.Kind != "ours" && rw.Kind != "peer" {
			continue
		}
		if rw.Error != "" {
			t.Errorf("row %q: %s", name, rw.Error)
			continue
		}
		if stateless[name] {
			if rw.BytesAfter10 != nil || rw.BytesAfterLimit != nil {
				t.Errorf("row %q keeps nothing per subject but has bytes per subject %v, %v", name, rw.BytesAfter10, rw.BytesAfterLimit)
			}
		} else if rw.BytesAfter10 == nil || rw.BytesAfterLimit == nil || *rw.BytesAfter10 <= 0 || *rw.BytesAfterLimit < *rw.BytesAfter10 {
			t.Errorf("row %q: bytes per subject %v, %v (%s); want 0 < after 10 <= after limit", name, rw.BytesAfter10, rw.BytesAfterLimit, rw.MemoryNote)
		}
		if c := rw.Speed[len(rw.Speed)-1]; c.CPUMicros == nil || *c.CPUMicros < 0 {
			t.Errorf("row %q: Redis CPU per decision %v", name, c.CPUMicros)
		}
		if c := rw.Speed[len(rw.Speed)-1]; c.ClientCPUMicros == nil || *c.ClientCPUMicros <= 0 {
			t.Errorf("row %q: client CPU per decision %v", name, c.ClientCPUMicros)
		}
		if len(rw.CommandBreakdown) == 0 {
			t.Errorf("row %q: no command breakdown from INFO commandstats", name)
		}
	}
	// the exact logs at limits 100, 1,000 and 10,000: the compact log
	// within 8 bytes per unit and under the sorted set
	byLimit := map[string]map[int64]float64{}
	for _, lb := range r.MemoryAtLimits {
		if byLimit[lb.Algorithm] == nil {
			byLimit[lb.Algorithm] = map[int64]float64{}
		}
		byLimit[lb.Algorithm][lb.Limit] = lb.PerUnit
	}
	for _, limit := range []int64{100, 1000, 10000} {
		c, s := byLimit["compact_log"][limit], byLimit["sliding_log"][limit]
		if c <= 0 || c > 8 || s <= c {
			t.Errorf("bytes per unit at limit %d: compact_log %.2f, sliding_log %.2f; want 0 < compact_log <= 8, below sliding_log", limit, c, s)
		}
	}
	f, err := os.Open(chart)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := xml.NewDecoder(f)
	points := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed SVG: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "circle" {
			points++
		}
	}
	if want := len(targets.Names()); points < want {
		t.Errorf("chart has %d circles, want at least one per strategy (%d)", points, want)
	}
}

// TestReportOnCluster: INFO counters and SCAN must cover every master, and
// every strategy (and peer) must run where keys live in different slots.
func TestReportOnCluster(t *testing.T) {
	out, _ := runReport(t, "-start-cluster", "3", "-json", "-local=-1ms")
	r := decode(t, out)
	if r.Backend != "cluster" || !strings.Contains(r.Server, "cluster of 3 masters") {
		t.Errorf("backend %q server %q, want a cluster of 3 masters", r.Backend, r.Server)
	}
	for _, rw := range r.Rows {
		if rw.Kind != "ours" && rw.Kind != "peer" && rw.Kind != "floor" {
			continue
		}
		if rw.Error != "" {
			t.Errorf("row %q: %s", rw.Name, rw.Error)
			continue
		}
		if rw.Commands == nil || *rw.Commands < 1 {
			t.Errorf("row %q: commands per decision %v, want >= 1 (counters summed over every master)", rw.Name, rw.Commands)
		}
		if (rw.BytesAfterLimit == nil || *rw.BytesAfterLimit <= 0) && !stateless[rw.Name] {
			t.Errorf("row %q: bytes per subject %v (%s)", rw.Name, rw.BytesAfterLimit, rw.MemoryNote)
		}
		for _, c := range rw.Speed {
			if c.Errors > 0 || c.PerSecond <= 0 {
				t.Errorf("row %q c=%d: %.0f/s, %d errors: %s", rw.Name, c.Concurrency, c.PerSecond, c.Errors, c.FirstError)
			}
		}
	}
}

func TestReportRejectsChartWithoutMemory(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append(append([]string{}, tiny...), "-miniredis", "-chart", filepath.Join(t.TempDir(), "c.svg")), &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "real Redis") {
		t.Errorf("-chart on miniredis: exit %d, stderr %q; want a failure naming the need for a real Redis", code, stderr.String())
	}
}
