package report

import (
	"strings"
	"testing"
)

func row(name, kind string, boundary, steady float64, bytes int64, ratio float64) Row {
	rw := Row{Name: name, Kind: kind, PrecisionBoundary: ptr(boundary), PrecisionBurstSteady: ptr(steady),
		Local: &Local{AllowedNanos: 80, DeniedNanos: 70}}
	if bytes > 0 {
		rw.BytesAfterLimit = &bytes
	}
	if ratio > 0 {
		rw.Speed = []Cell{{Concurrency: 64, RatioToFloor: ratio}}
	}
	return rw
}

// TestPicksFollowTheNumbers: the lines name what this run measured, so
// other numbers give other picks.
func TestPicksFollowTheNumbers(t *testing.T) {
	r := &Report{Backend: BackendRedis, Rows: []Row{
		row("fixed_window", "ours", 2, 2, 56, 0.69),
		row("sliding_counter", "ours", 1, 1.99, 56, 0.75),
		row("sliding_log", "ours", 1, 1, 1336, 0.56),
		row("gcra", "ours", 1.01, 1.99, 56, 0.58),
		row("peer:ulule fixed_window", "peer", 1.99, 1, 56, 0.71),
	}}
	got := strings.Join(r.Picks(), "\n")
	for _, want := range []string{
		"must hold exactly (logins, one-time codes, payments): sliding_log (never above the limit, 1,336 bytes per subject, 0.56 of the floor's speed)",
		"Least memory per subject: fixed_window, sliding_counter, gcra (56 bytes each)",
		"Most decisions per second on this Redis: sliding_counter (0.75",
		"it let 2.00x the limit through across a boundary here",
		"ulule fixed_window 0.71",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("picks lack %q:\n%s", want, got)
		}
	}
	// the same strategies measured otherwise: the picks change with them
	r.Rows[0] = row("fixed_window", "ours", 2, 2, 56, 0.95)
	r.Rows[2] = row("sliding_log", "ours", 1, 1, 5000, 0.40)
	got = strings.Join(r.Picks(), "\n")
	for _, want := range []string{"Most decisions per second on this Redis: fixed_window (0.95", "sliding_log (never above the limit, 5,000 bytes"} {
		if !strings.Contains(got, want) {
			t.Errorf("picks lack %q:\n%s", want, got)
		}
	}
}

// TestPicksOnMiniredisRankNoSpeed: without a real Redis, no line ranks on
// speed or memory, and one says they were not measured.
func TestPicksOnMiniredisRankNoSpeed(t *testing.T) {
	r := &Report{Backend: BackendMiniredis, Precise: true, Rows: []Row{
		row("fixed_window", "ours", 2, 2, 0, 0),
		row("sliding_log", "ours", 1, 1, 0, 0),
		row("peer:mennanov sliding_window", "peer", 1, 1, 0, 3.8),
	}}
	got := strings.Join(r.Picks(), "\n")
	for _, bad := range []string{"Most decisions", "Least memory", "floor's speed", "mennanov", "bytes"} {
		if strings.Contains(got, bad) {
			t.Errorf("precision-only picks mention %q:\n%s", bad, got)
		}
	}
	if !strings.Contains(got, "sliding_log (never above the limit)") || !strings.Contains(got, "not measured without a real Redis") {
		t.Errorf("precision-only picks:\n%s", got)
	}
}

// TestPicksWeighTheLogsSpread: the exact logs are weighed by their bytes
// with requests spread over the window, not by a burst's (which merges one
// millisecond's requests into one sorted-set entry): the sliding log at
// 1,336 spread comes after the compact log at 280, whatever its burst's 184.
func TestPicksWeighTheLogsSpread(t *testing.T) {
	sl := row("sliding_log", "ours", 1, 1, 184, 0.6)
	spread := int64(1336)
	sl.BytesSpread = &spread
	r := &Report{Backend: BackendRedis, Rows: []Row{
		sl,
		row("compact_log", "ours", 1, 1, 280, 0.6),
		row("fixed_window", "ours", 2, 2, 56, 0.7),
	}}
	got := strings.Join(r.Picks(), "\n")
	want := "compact_log (never above the limit, 280 bytes per subject, 0.60 of the floor's speed); or sliding_log (never above the limit, 1,336 bytes per subject"
	if !strings.Contains(got, want) {
		t.Errorf("picks lack %q:\n%s", want, got)
	}
}
