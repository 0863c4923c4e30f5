package luacheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string // "line name"
	}{
		{"bare unpack", "local n = 1\nreturn redis.call('DEL', unpack(KEYS))", []string{"2 unpack"}},
		{"shimmed unpack", "local unpack = table.unpack or unpack\nreturn redis.call('DEL', unpack(KEYS))", nil},
		{"shim after use", "redis.call('DEL', unpack(KEYS))\nlocal unpack = table.unpack or unpack", []string{"1 unpack"}},
		{"table.unpack", "return redis.call('DEL', table.unpack(KEYS))", nil},
		{"getn", "local n = table.getn(KEYS)", []string{"1 table.getn"}},
		{"math.mod", "local r = math.mod(7, 3)", []string{"1 math.mod"}},
		{"spaced", "local r = math . mod(7, 3)", []string{"1 math.mod"}},
		{"setfenv and loadstring", "setfenv(1, {})\nlocal f = loadstring('x')", []string{"1 setfenv", "2 loadstring"}},
		{"field named like a global", "local t = {}\nt.unpack = 1\nlocal x = t:unpack()", nil},
		{"in a comment", "-- unpack(KEYS) would fail on Lua 5.4\n--[[ table.getn ]]\nreturn 1", nil},
		{"in a string", "return 'unpack(KEYS) math.mod'", nil},
		{"in a long string", "return [==[\nunpack(x)\n]==]", nil},
		{"prefix of a name", "local unpacked = 1\nlocal getnum = 2\nreturn unpacked + getnum", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range Check(tc.src) {
				got = append(got, strconv.Itoa(p.Line)+" "+p.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("Check(%q) = %v; want %v", tc.src, got, tc.want)
			}
		})
	}
}

// repoRoot is the directory of the root module's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/ratekit/ratelimit\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("root go.mod (module github.com/ratekit/ratelimit) not found above the test's directory")
		}
		dir = parent
	}
}

// TestScriptsRunOnNewerLua scans every .lua file of the repository (every
// module) and every script written inline in a NewScript call.
func TestScriptsRunOnNewerLua(t *testing.T) {
	root := repoRoot(t)
	scripts := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case strings.HasSuffix(path, ".lua"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			scripts++
			for _, p := range Check(string(b)) {
				t.Errorf("%s: %v; add `local %s = table.%s or %s` as the first code line, or use the portable function", rel, p, p.Name, p.Name, p.Name)
			}
		case strings.HasSuffix(path, ".go"):
			for _, s := range inlineScripts(t, path) {
				scripts++
				for _, p := range Check(s.src) {
					t.Errorf("%s:%d: inline script: %v", rel, s.line, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scripts < 6 {
		t.Errorf("found %d scripts; want at least the six strategies' .lua files (is the walk rooted right? %s)", scripts, root)
	}
}

type inline struct {
	line int
	src  string
}

// inlineScripts returns the string literals passed to a NewScript call.
func inlineScripts(t *testing.T, path string) []inline {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return nil
	}
	var out []inline
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 1 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "NewScript" {
			return true
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err == nil {
			out = append(out, inline{fset.Position(lit.Pos()).Line, s})
		}
		return true
	})
	return out
}
