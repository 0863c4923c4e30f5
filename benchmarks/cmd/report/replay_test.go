package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/compare"
)

const (
	fw2 = `{"algorithm":"fixed_window","limit":2,"window":"1s"}`
	sl2 = `{"algorithm":"sliding_log","limit":2,"window":"1s"}`
)

// replayRun runs the report with args and returns its exit code, stdout
// and stderr.
func replayRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func writeTrace(t *testing.T, body string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "trace.csv")
	if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestReplayFile: a small trace whose matrix is worked out by hand, for a
// fixed window of 2 per second enforced and a sliding log of 2 per second
// as the candidate.
func TestReplayFile(t *testing.T) {
	trace := writeTrace(t, `ms,subject,cost
# a: two units late in window [0, 1s), then the fixed window's edge
900,a,1
950,a,1
1000,a,1
1100,a,1
1200,a,1
1950,a,1
# b asks more than either capacity; "c,d" is a subject with a comma
0,b,3
500,"c,d",2
`)
	// by hand, in time order:
	//   0    b 3: over capacity          fw deny  sl deny   both deny
	//   500  c,d 2                       fw allow sl allow  both allow
	//   900  a: fw 1/2, sl 1/2                              both allow
	//   950  a: fw 2/2, sl 2/2                              both allow
	//   1000 a: fw new window 1/2, sl (0,1000] holds 2      candidate only deny
	//   1100 a: fw 2/2, sl still 2                          candidate only deny
	//   1200 a: fw full, sl full                            both deny
	//   1950 a: fw full; sl (950,1950] holds none           enforced only deny
	want := compare.Agreement{BothAllow: 3, BothDeny: 2, EnforcedOnlyDeny: 1, CandidateOnlyDeny: 2}
	code, out, errOut := replayRun(t, "-replay", trace, "-enforced", fw2, "-candidate", sl2, "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r replayResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Matrix != want {
		t.Errorf("matrix %+v, want %+v", r.Matrix, want)
	}
	if r.Requests != 8 || r.Subjects != 3 || r.EnforcedUnits != 6 || r.CandidateUnits != 5 {
		t.Errorf("got %d requests, %d subjects, units %d enforced %d candidate; want 8, 3, 6, 5", r.Requests, r.Subjects, r.EnforcedUnits, r.CandidateUnits)
	}
	// the table prints the same numbers
	code, out, _ = replayRun(t, "-replay", trace, "-enforced", fw2, "-candidate", sl2)
	if code != 0 {
		t.Fatal(out)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, line := range []string{"both allow 3 37.5%", "both deny 2 25.0%", "enforced only deny 1 12.5%", "candidate only deny 2 25.0%", "agreement 62.5%"} {
		if !strings.Contains(flat, line) {
			t.Errorf("table lacks %q:\n%s", line, out)
		}
	}
}

// TestReplayShape: the boundary shape sends a full limit just before a
// fixed window's edge and another just after: the fixed window allows
// both, the sliding log only the first.
func TestReplayShape(t *testing.T) {
	code, out, errOut := replayRun(t, "-replay", "boundary", "-replay-subjects", "3", "-replay-windows", "4", "-json",
		"-enforced", `{"algorithm":"fixed_window","limit":50,"window":"10s"}`,
		"-candidate", `{"algorithm":"sliding_log","limit":50,"window":"10s"}`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r replayResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	// 3 subjects x 2 edges (windows 1 and 3) x 50 units on each side
	want := compare.Agreement{BothAllow: 300, CandidateOnlyDeny: 300}
	if r.Matrix != want {
		t.Errorf("matrix %+v, want %+v", r.Matrix, want)
	}
	for _, shape := range shapes {
		code, out, errOut := replayRun(t, "-replay", shape, "-enforced", fw2, "-candidate", sl2)
		if code != 0 || !strings.Contains(out, "agreement") {
			t.Errorf("%s: exit %d, %s%s", shape, code, out, errOut)
		}
	}
}

func TestReplayErrors(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.csv")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxTraceBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no enforced", []string{"-replay", "steady", "-candidate", sl2}, "-enforced: want a policy"},
		{"bad candidate", []string{"-replay", "steady", "-enforced", fw2, "-candidate", `{"algorithm":"nope","limit":1,"window":"1s"}`}, `-candidate: policy "candidate": field "algorithm": invalid option: algorithm must be one of`},
		{"policies without replay", []string{"-enforced", fw2}, "go with -replay"},
		{"no such file", []string{"-replay", "nope.csv", "-enforced", fw2, "-candidate", sl2}, "neither a shape"},
		{"big file", []string{"-replay", big, "-enforced", fw2, "-candidate", sl2}, "at most 67108864 bytes"},
		{"cost", []string{"-replay", writeTrace(t, "1,a,1\n2,a,0\n"), "-enforced", fw2, "-candidate", sl2}, "line 2: cost"},
		{"ms", []string{"-replay", writeTrace(t, "-1,a,1\n"), "-enforced", fw2, "-candidate", sl2}, "line 1: ms"},
		{"subject", []string{"-replay", writeTrace(t, "1,,1\n"), "-enforced", fw2, "-candidate", sl2}, "line 1: subject"},
		{"fields", []string{"-replay", writeTrace(t, "1,a\n"), "-enforced", fw2, "-candidate", sl2}, "line 1"},
		{"empty", []string{"-replay", writeTrace(t, "# nothing\n"), "-enforced", fw2, "-candidate", sl2}, "no request"},
		{"subjects", []string{"-replay", "many", "-replay-subjects", "0", "-enforced", fw2, "-candidate", sl2}, "-replay-subjects"},
		{"too many", []string{"-replay", "many", "-replay-subjects", "100000", "-replay-windows", "1000", "-enforced", fw2, "-candidate", sl2}, "exceed 1000000 requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := replayRun(t, tc.args...)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want failure naming %q", code, errOut, tc.want)
			}
			if strings.Count(errOut, "ratelimit: ")+strings.Count(errOut, "report: ") != 1 {
				t.Errorf("stderr %q: want exactly one prefix", errOut)
			}
		})
	}
}

// TestReplayClockUnderSweep: the twins' idle sweep (a timer, every
// max(Window, 100 ms)) reads the replay's clock from its own goroutine
// while the replay sets it before each request. Under -race this fails
// unless the replay's clock is safe for concurrent use, as strategy.Clock
// requires. The trace is long enough to outlast a few sweeps; the replay
// stops when the context does.
func TestReplayClockUnderSweep(t *testing.T) {
	cfg, err := parsePolicy("enforced", `{"algorithm":"sliding_log","limit":2,"window":"100ms"}`)
	if err != nil {
		t.Fatal(err)
	}
	events := make([]event, maxTraceEvents)
	for i := range events {
		events[i] = event{ms: int64(i), subject: "a", cost: 1}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 350*time.Millisecond)
	defer cancel()
	// the replay ends with an error once the context is done: only an
	// error before that is a failure
	if _, err := replay(ctx, events, cfg, cfg); err != nil && ctx.Err() == nil {
		t.Fatalf("replay: got %v, want nil or an error after the context ended", err)
	}
}
