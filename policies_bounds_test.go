package ratelimit_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/strategy"
)

// manyPolicies returns a JSON document of n valid policies.
func manyPolicies(n int) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d": {"algorithm": "fixed_window", "limit": 5, "window": "1m"}`, i)
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// allocated returns the bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A document beyond MaxPolicyBytes or MaxPolicies is refused before it is
// decoded, and neither it nor the largest accepted one costs more than a
// few times its size.
func TestParsePoliciesBounds(t *testing.T) {
	atMax := manyPolicies(ratelimit.MaxPolicies)
	if len(atMax) > ratelimit.MaxPolicyBytes {
		t.Fatalf("MaxPolicies policies take %d bytes, above MaxPolicyBytes %d", len(atMax), ratelimit.MaxPolicyBytes)
	}
	if _, err := parsePolicies(atMax); err != nil {
		t.Fatalf("%d policies: %v", ratelimit.MaxPolicies, err)
	}
	huge := manyPolicies(3 << 20 / 64) // about 3 MB
	padded := []byte(`{"a": {"algorithm": "fixed_window", "limit": 5, "window": "1m", "prefix": "` +
		strings.Repeat("x", ratelimit.MaxPolicyBytes) + `"}}`)
	for _, c := range []struct {
		name     string
		doc      []byte
		want     string
		maxAlloc uint64
	}{
		{"3 MB of policies", huge, fmt.Sprintf("at most %d bytes", ratelimit.MaxPolicyBytes), 1 << 20},
		{"one field over the size", padded, fmt.Sprintf("at most %d bytes", ratelimit.MaxPolicyBytes), 1 << 20},
		{"one policy too many", manyPolicies(ratelimit.MaxPolicies + 1), fmt.Sprintf("at most %d policies", ratelimit.MaxPolicies), 4 << 20},
		{"the most accepted", atMax, "", 32 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			got := allocated(func() { _, err = parsePolicies(c.doc) })
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, strategy.ErrInvalidOption) {
				t.Fatalf("ParsePolicies(%d bytes) = %v; want an ErrInvalidOption saying %q", len(c.doc), err, c.want)
			}
			t.Logf("ParsePolicies(%d bytes): %d bytes allocated", len(c.doc), got)
			if got > c.maxAlloc {
				t.Errorf("ParsePolicies(%d bytes) allocated %d bytes, want at most %d", len(c.doc), got, c.maxAlloc)
			}
		})
	}
	many := ratelimit.Policies{}
	for i := range ratelimit.MaxPolicies + 1 {
		many[fmt.Sprint("p", i)] = ratelimit.Config{Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Minute}
	}
	if err := validate(many); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("Validate of %d policies = %v; want an error", len(many), err)
	}
	if _, err := ratelimit.NewSet(nil, many); err == nil {
		t.Errorf("NewLocalSet of %d policies: no error", len(many))
	}
}

// Every error quotes at most a short prefix of a bad value, however long.
func TestPolicyErrorsQuoteAShortPrefix(t *testing.T) {
	long := strings.Repeat("v", 512<<10)
	ok := `"algorithm": "fixed_window", "limit": 5, "window": "1m"`
	for _, c := range []struct{ name, json string }{
		{"algorithm", `{"a": {"algorithm": "` + long + `", "limit": 5, "window": "1m"}}`},
		{"window", `{"a": {"algorithm": "fixed_window", "limit": 5, "window": "` + long + `"}}`},
		{"timeout", `{"a": {` + ok + `, "timeout": "` + long + `"}}`},
		{"on_failure", `{"a": {` + ok + `, "on_failure": "` + long + `"}}`},
		{"prefix with a brace", `{"a": {` + ok + `, "prefix": "{` + long + `"}}`},
		{"policy name", `{"` + long + `": {` + ok + `}}`},
		{"field name", `{"a": {` + ok + `, "` + long + `": 1}}`},
		{"number", `{"a": {"algorithm": "fixed_window", "limit": ` + strings.Repeat("9", 512<<10) + `, "window": "1m"}}`},
		{"not an object", `"` + long + `"`},
		{"member name not a string", `{"a": {` + ok + `}, ` + strings.Repeat("9", 512<<10) + `: 1}`},
		{"shared namespace", `{"a` + strings.Repeat("b", 100) + `": {` + ok + `}, "b": {` + ok + `, "prefix": "rl:a` + strings.Repeat("b", 100) + `:"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parsePolicies([]byte(c.json))
			if err == nil {
				t.Fatal("no error")
			}
			if n := len(err.Error()); n > 400 {
				t.Errorf("error of %d bytes: %.300s", n, err)
			}
			if strings.Count(err.Error(), "ratelimit:") != 1 {
				t.Errorf("error %.300q repeats its prefix", err)
			}
		})
	}
	set, err := ratelimit.NewSet(nil, ratelimit.Policies{"login": {Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Get(long); err == nil || len(err.Error()) > 400 {
		t.Errorf("Get(%d bytes) = %d bytes of error", len(long), len(fmt.Sprint(err)))
	}
	if _, err := ratelimit.New(nil, ratelimit.Config{Algorithm: strategy.Algorithm(long), Limit: 1, Window: time.Second}); err == nil || len(err.Error()) > 400 {
		t.Errorf("NewLocal with a %d-byte Algorithm = %d bytes of error", len(long), len(fmt.Sprint(err)))
	}
}
