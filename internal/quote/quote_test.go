package quote

import (
	"strings"
	"testing"
)

func TestValue(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"short", "login", `"login"`},
		{"exactly the bound", strings.Repeat("a", MaxBytes), `"` + strings.Repeat("a", MaxBytes) + `"`},
		{"one byte over", strings.Repeat("a", MaxBytes+1), `"` + strings.Repeat("a", MaxBytes) + `"...`},
		{"megabytes", strings.Repeat("b", 20<<20), `"` + strings.Repeat("b", MaxBytes) + `"...`},
		{"cut inside a rune", strings.Repeat("a", MaxBytes-1) + "é" + "zz", `"` + strings.Repeat("a", MaxBytes-1) + `"...`},
		{"control bytes escaped", "a\nb", `"a\nb"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Value(c.in); got != c.want {
				t.Errorf("Value(%d bytes) = %s, want %s", len(c.in), got, c.want)
			}
		})
	}
}
