// Package luacheck finds what a Redis script uses of Lua 5.1 that newer Lua
// versions dropped, so the scripts run on Redis (Lua 5.1) and on
// Redis-compatible servers that embed a newer Lua (Dragonfly, Lua 5.4)
// alike. Its test scans every .lua file of the repository and every script
// written inline in a redis.NewScript call.
package luacheck

import (
	"fmt"
	"regexp"
	"strings"
)

// globals are Lua 5.1 globals that Lua 5.2+ removed. A script may still
// use one through a local it declares first, e.g.
//
//	local unpack = table.unpack or unpack
var globals = []string{"unpack", "getfenv", "setfenv", "loadstring", "module", "gcinfo", "newproxy"}

// qualified are library functions that Lua 5.2+ removed; there is no
// portable spelling that keeps them, so a script must not call them.
var qualified = []string{"table.getn", "table.setn", "table.maxn", "table.foreach", "table.foreachi",
	"math.mod", "math.pow", "math.log10", "math.ldexp", "math.frexp", "math.cosh", "math.sinh", "math.tanh",
	"string.gfind", "package.loaders", "package.seeall"}

// Problem is one use of a removed function.
type Problem struct {
	Line int
	Name string
}

func (p Problem) String() string {
	return fmt.Sprintf("line %d: %s is Lua 5.1 only", p.Line, p.Name)
}

var ident = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*(?:\s*[.:]\s*[A-Za-z_][A-Za-z0-9_]*)*`)
var localDecl = regexp.MustCompile(`\blocal\s+([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)`)

// Check returns every use in src of a Lua 5.1-only global or library
// function. A global counts as used where it is not preceded, earlier in
// src, by a local of the same name (the portable shim). Comments and string
// literals are ignored.
func Check(src string) []Problem {
	code := strip(src)
	var out []Problem
	declared := map[string]bool{}
	for i, line := range strings.Split(code, "\n") {
		// a declaration's right-hand side may name the global it shadows:
		// local unpack = table.unpack or unpack
		var newly []string
		if m := localDecl.FindStringSubmatch(line); m != nil {
			for _, n := range strings.Split(m[1], ",") {
				newly = append(newly, strings.TrimSpace(n))
			}
		}
		for _, loc := range ident.FindAllStringIndex(line, -1) {
			if loc[0] > 0 && (line[loc[0]-1] == '.' || line[loc[0]-1] == ':') {
				continue
			}
			name := strings.Join(strings.Fields(line[loc[0]:loc[1]]), "")
			for _, q := range qualified {
				if name == q || strings.HasPrefix(name, q+".") {
					out = append(out, Problem{i + 1, q})
				}
			}
			head, _, _ := strings.Cut(name, ".")
			head, _, _ = strings.Cut(head, ":")
			for _, g := range globals {
				if head == g && !declared[g] && !declaredHere(line, g, newly) {
					out = append(out, Problem{i + 1, g})
				}
			}
		}
		for _, n := range newly {
			declared[n] = true
		}
	}
	return out
}

// declaredHere reports whether the global name is used on a line that
// declares a local of that name from a library field of the same name,
// the portable shim: local unpack = table.unpack or unpack.
func declaredHere(line string, name string, newly []string) bool {
	for _, n := range newly {
		if n == name {
			return regexp.MustCompile(`[A-Za-z_]\s*\.\s*` + name + `\b`).MatchString(line)
		}
	}
	return false
}

// strip blanks comments and string literals, keeping line breaks so that
// line numbers hold.
func strip(src string) string {
	b := []byte(src)
	out := make([]byte, len(b))
	copy(out, b)
	blank := func(from, to int) {
		for k := from; k < to && k < len(out); k++ {
			if out[k] != '\n' {
				out[k] = ' '
			}
		}
	}
	for i := 0; i < len(b); {
		switch {
		case strings.HasPrefix(src[i:], "--"):
			end := len(b)
			if lvl, ok := longBracket(src[i+2:]); ok {
				close := "]" + strings.Repeat("=", lvl) + "]"
				if j := strings.Index(src[i+2:], close); j >= 0 {
					end = i + 2 + j + len(close)
				}
			} else if j := strings.IndexByte(src[i:], '\n'); j >= 0 {
				end = i + j
			}
			blank(i, end)
			i = end
		case b[i] == '\'' || b[i] == '"':
			q := b[i]
			j := i + 1
			for j < len(b) && b[j] != q && b[j] != '\n' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			blank(i, j+1)
			i = j + 1
		case b[i] == '[':
			if lvl, ok := longBracket(src[i:]); ok {
				close := "]" + strings.Repeat("=", lvl) + "]"
				end := len(b)
				if j := strings.Index(src[i:], close); j >= 0 {
					end = i + j + len(close)
				}
				blank(i, end)
				i = end
				continue
			}
			i++
		default:
			i++
		}
	}
	return string(out)
}

// longBracket reports whether s starts with a Lua long bracket [[ or [==[
// and its level.
func longBracket(s string) (int, bool) {
	if !strings.HasPrefix(s, "[") {
		return 0, false
	}
	n := 0
	for n+1 < len(s) && s[n+1] == '=' {
		n++
	}
	if n+1 < len(s) && s[n+1] == '[' {
		return n, true
	}
	return 0, false
}
