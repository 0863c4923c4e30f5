package ratelimit_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ratekit/ratelimit"
)

// BenchmarkPoliciesDecode is what reading a policy document costs: decoding
// and validating it, for a small document and for one of 200 policies.
func BenchmarkPoliciesDecode(b *testing.B) {
	small := []byte(`{
	  "login":  {"algorithm": "sliding_log", "limit": 5, "window": "1m", "on_failure": "closed"},
	  "search": {"algorithm": "token_bucket", "limit": 100, "window": "1s", "burst": 200,
	             "tiers": {"pro": {"limit": 1000, "burst": 2000}}},
	  "export": {"algorithm": "fixed_window", "limit": 10, "window": "1h", "mode": "shadow"},
	  "upload": {"algorithm": "sliding_counter", "limit": 1000, "window": "1h",
	             "candidate": {"algorithm": "gcra", "limit": 1000, "window": "1h"}},
	  "multi":  {"algorithm": "multi", "rules": [{"algorithm": "sliding_log", "limit": 10, "window": "1s"},
	             {"algorithm": "fixed_window", "limit": 1000, "window": "1h"}]}
	}`)
	var large strings.Builder
	large.WriteString("{")
	for i := range 200 {
		if i > 0 {
			large.WriteString(",")
		}
		fmt.Fprintf(&large, `"p%d": {"algorithm": "token_bucket", "limit": %d, "window": "1s", "burst": 20, "timeout": "100ms", "tiers": {"pro": {"limit": 100}}}`, i, 10+i)
	}
	large.WriteString("}")
	for _, c := range []struct {
		name string
		doc  []byte
	}{{"small", small}, {"200 policies", []byte(large.String())}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.doc)))
			for b.Loop() {
				var p ratelimit.Policies
				if err := json.Unmarshal(c.doc, &p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
