package repotest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The root package's budget: what a user reads to use the library.
const (
	maxRootExports = 46  // exported names and exported methods of exported types
	maxRootDoc     = 300 // lines of go doc -all
)

// TestRootAPISize keeps the root package small: at most maxRootExports
// exported names, counting top-level constants, variables, functions and
// types and the exported methods of exported types (not struct fields), and
// at most maxRootDoc lines of go doc -all. Another way to build or configure
// a Limiter goes into Config, an Option or a package of its own.
func TestRootAPISize(t *testing.T) {
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			names = append(names, exported(d)...)
		}
	}
	sort.Strings(names)
	if len(names) > maxRootExports {
		t.Errorf("the root package exports %d names, want at most %d:\n%s", len(names), maxRootExports, strings.Join(names, "\n"))
	}
	cmd := exec.Command("go", "doc", "-all", ".")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go doc -all: %v", err)
	}
	if n := strings.Count(string(out), "\n"); n > maxRootDoc {
		t.Errorf("go doc -all . is %d lines, want at most %d", n, maxRootDoc)
	}
}

// exported returns the exported names d declares, methods as Type.Method.
func exported(d ast.Decl) []string {
	var out []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			break
		}
		if d.Recv == nil {
			return []string{d.Name.Name}
		}
		t := d.Recv.List[0].Type
		if s, ok := t.(*ast.StarExpr); ok {
			t = s.X
		}
		if x, ok := t.(*ast.IndexExpr); ok {
			t = x.X
		}
		if id, ok := t.(*ast.Ident); ok && id.IsExported() {
			out = append(out, id.Name+"."+d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					out = append(out, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}
