// Package quote quotes values for error messages, bounded: a caller may pass
// megabytes, and an error must not repeat them.
package quote

import (
	"strconv"
	"unicode/utf8"
)

// MaxBytes is the most bytes of a value that Value quotes.
const MaxBytes = 32

// Value returns s as a Go string literal (as %q prints it) when it is at most
// MaxBytes long, and otherwise its first MaxBytes bytes (cut at a rune
// boundary) quoted, followed by "...".
func Value(s string) string {
	if len(s) <= MaxBytes {
		return strconv.Quote(s)
	}
	cut := MaxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}
