package repotest

// TestReadmeSnippetsCompile builds every Go snippet of README.md and of
// each docs/*.md (none there is fine), and requires the README's Quickstart
// and Production settings sections to hold one each. The convention, for
// whoever adds a section to any of them:
//
//   - Every block fenced as ```go is compiled. (A block that must not be,
//     say a signature listing, is fenced ```go nocompile; keep them rare.)
//   - A block whose code starts with a package clause is a whole file,
//     compiled as its own package.
//   - Any other block is a fragment: its import declarations first (show
//     them: a reader copies them too), then statements. It is compiled as
//     the body of func(ctx context.Context) error, so it may use ctx and
//     return an error; everything else it uses it declares or imports.
//   - Imports may name any package of this repository's modules, nested
//     ones included (ratelimitotel, grpclimit ...): the test module requires
//     each module a snippet imports, replaced by its directory here, and
//     takes every other dependency from the module cache, offline.
//   - Snippets of different files, or of one file, never share a package:
//     each declares or imports what it uses.
//
// Errors point at the lines of the Markdown file the snippet is in.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// snippet is one ```go block of a Markdown file.
type snippet struct {
	file    string // the Markdown file's path
	line    int    // its line of the block's first code line
	section string // the ## heading the block is under (a ### one counts as its ##), "" before any
	code    string // the block's text
}

// markdownSnippets returns the compiled Go blocks of the Markdown file at
// path.
func markdownSnippets(t *testing.T, path string) []snippet {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []snippet
	var cur *snippet
	var body []string
	section := ""
	fenced := false // inside a block of another language
	for i, l := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case cur == nil && !fenced && strings.HasPrefix(trimmed, "```go"):
			info := strings.Fields(strings.TrimPrefix(trimmed, "```"))
			if len(info) > 0 && info[0] == "go" && !slices.Contains(info[1:], "nocompile") {
				cur, body = &snippet{file: path, line: i + 2, section: section}, nil
			} else if len(info) > 0 && info[0] == "go" {
				cur, body = &snippet{line: -1}, nil // skipped
			} else {
				fenced = true // ```gomod, say
			}
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			fenced = !fenced
		case cur == nil && !fenced && strings.HasPrefix(l, "## "):
			section = strings.TrimSpace(strings.TrimLeft(l, "#"))
		case cur != nil && trimmed == "```":
			if cur.line > 0 {
				cur.code = strings.Join(body, "\n")
				out = append(out, *cur)
			}
			cur = nil
		case cur != nil:
			body = append(body, l)
		}
	}
	if cur != nil {
		t.Fatalf("%s: a ```go block from line %d is not closed", path, cur.line-1)
	}
	return out
}

var (
	packageClause = regexp.MustCompile(`(?m)^package \w+`)
	importPath    = regexp.MustCompile(`"([^"]+)"`)
)

// splitImports returns a fragment's leading import declarations and the
// statements after them, and the line within the fragment where those
// start.
func splitImports(code string) (imports []string, stmts string, at int) {
	lines := strings.Split(code, "\n")
	i := 0
	for i < len(lines) {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == "" || strings.HasPrefix(l, "//"):
			i++
		case strings.HasPrefix(l, "import ("):
			for i < len(lines) && strings.TrimSpace(lines[i]) != ")" {
				imports = append(imports, lines[i])
				i++
			}
			imports = append(imports, ")")
			i++
		case strings.HasPrefix(l, "import "):
			imports = append(imports, lines[i])
			i++
		default:
			return imports, strings.Join(lines[i:], "\n"), i
		}
	}
	return imports, "", i
}

// readmeSections are the README sections that must hold a compiled block.
var readmeSections = []string{"Quickstart", "Production settings"}

func TestReadmeSnippetsCompile(t *testing.T) {
	root := repoRoot(t)
	snips := markdownSnippets(t, filepath.Join(root, "README.md"))
	for _, want := range readmeSections {
		if !slices.ContainsFunc(snips, func(s snippet) bool { return s.section == want }) {
			t.Errorf("README.md has no ```go block under ## %s; want at least the quickstart and production-settings ones", want)
		}
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(docs)
	for _, d := range docs {
		snips = append(snips, markdownSnippets(t, d)...)
	}
	dir := t.TempDir()
	imported := map[string]bool{}
	for i, s := range snips {
		var src string
		if loc := packageClause.FindStringIndex(s.code); loc != nil && strings.TrimSpace(stripComments(s.code[:loc[0]])) == "" {
			src = fmt.Sprintf("//line %s:%d\n%s\n", s.file, s.line, s.code)
			for _, m := range importPath.FindAllStringSubmatch(s.code, -1) {
				imported[m[1]] = true
			}
		} else {
			imports, stmts, at := splitImports(s.code)
			imp := strings.Join(imports, "\n")
			for _, m := range importPath.FindAllStringSubmatch(imp, -1) {
				imported[m[1]] = true
			}
			if !strings.Contains(imp, `"context"`) {
				imp += "\nimport \"context\""
			}
			src = fmt.Sprintf("package snippet%d\n\n%s\n\nvar _ = snippet\n\nfunc snippet(ctx context.Context) error {\n//line %s:%d\n%s\n\treturn nil\n}\n",
				i, imp, s.file, s.line+at, stmts)
		}
		pkg := filepath.Join(dir, fmt.Sprintf("snippet%02d", i))
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(pkg, "snippet.go"), src)
	}
	// require each of the repository's modules that a snippet imports
	mods := modules(t)
	slices.SortFunc(mods, func(a, b module) int { return len(b.path) - len(a.path) }) // longest path first
	var gomod strings.Builder
	gomod.WriteString("module example.com/readme\n\ngo 1.26.0\n")
	needed := map[string]module{}
	for p := range imported {
		for _, m := range mods {
			if p == m.path || strings.HasPrefix(p, m.path+"/") {
				needed[m.path] = m
				break
			}
		}
	}
	needed[rootModule] = mods[slices.IndexFunc(mods, func(m module) bool { return m.path == rootModule })]
	for _, m := range needed {
		fmt.Fprintf(&gomod, "\nrequire %s %s\nreplace %s => %s\n", m.path, plannedVersion, m.path, filepath.ToSlash(m.dir))
	}
	write(t, filepath.Join(dir, "go.mod"), gomod.String())
	if out, err := goRun(dir, offlineEnv(t, ""), "build", "./..."); err != nil {
		t.Errorf("Go snippets of README.md or docs/*.md do not compile (the convention is at the top of %s):\n%s", "internal/repotest/readme_test.go", out)
	}
}

// stripComments drops // comment lines.
func stripComments(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "//") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
