package repotest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// rootModule is the library's module path.
const rootModule = "github.com/ratekit/ratelimit"

// repoRoot is the directory of the root module's go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module "+rootModule+"\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod of %s above the test's directory", rootModule)
		}
		dir = parent
	}
}

// module is one go.mod of the repository.
type module struct {
	path string // module path
	dir  string // absolute directory
	rel  string // directory from the repository root, "." for the root
	mod  string // the go.mod's text
}

// modules returns every module of the repository: the root and each nested
// go.mod (benchmarks/, ratelimitotel/, any added later), found by walking.
func modules(t *testing.T) []module {
	t.Helper()
	root := repoRoot(t)
	var out []module
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "go.mod" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		first, _, _ := strings.Cut(string(b), "\n")
		mp, ok := strings.CutPrefix(strings.TrimSpace(first), "module ")
		if !ok {
			t.Errorf("%s: first line %q is not a module directive", path, first)
			return nil
		}
		dir := filepath.Dir(path)
		rel, _ := filepath.Rel(root, dir)
		out = append(out, module{path: strings.Trim(mp, `"`), dir: dir, rel: filepath.ToSlash(rel), mod: string(b)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// goCmd runs the go command in dir with env added, and returns its output;
// it fails t when the command fails.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	out, err := goRun(dir, env, args...)
	if err != nil {
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return out
}

func goRun(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command(goBin(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

func goBin() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

var download struct {
	once sync.Once
	out  string
	err  error
}

// offlineEnv returns the environment for a go command in a module outside
// the repository that must resolve every dependency without the network.
// It first downloads what the repository's modules need into the module
// cache (a no-op when they are there). With proxyDir empty, modules come
// from that cache only (GOPROXY=off). Otherwise from proxyDir first, then
// from the cache's download directory, which is itself laid out as a
// GOPROXY, into a module cache of the test's own (so that the versions
// proxyDir makes up never land in the user's cache).
func offlineEnv(t *testing.T, proxyDir string) []string {
	t.Helper()
	root := repoRoot(t)
	download.once.Do(func() {
		download.out, download.err = goRun(root, nil, "mod", "download")
	})
	if download.err != nil {
		t.Fatalf("go mod download in the workspace: %v\n%s", download.err, download.out)
	}
	cache := strings.TrimSpace(goCmd(t, root, nil, "env", "GOMODCACHE"))
	env := []string{
		"GOWORK=off",       // outside the repository: no workspace
		"GOFLAGS=-mod=mod", // let the go command write go.mod and go.sum
		"GOSUMDB=off",      // the test modules are not in the checksum database
		"GONOPROXY=",       // a GOPRIVATE covering the module would skip the proxy
		"GOPRIVATE=",
		"GONOSUMDB=",
		"GOTOOLCHAIN=local", // never download a toolchain
	}
	if proxyDir == "" {
		return append(env, "GOPROXY=off", "GOMODCACHE="+cache)
	}
	own := t.TempDir()
	t.Cleanup(func() { goRun(root, []string{"GOMODCACHE=" + own}, "clean", "-modcache") }) // its files are read-only
	return append(env,
		"GOPROXY="+fileURL(proxyDir)+","+fileURL(filepath.Join(cache, "cache", "download")),
		"GOMODCACHE="+own)
}

// fileURL is the file:// URL of an absolute path.
func fileURL(path string) string {
	p := filepath.ToSlash(path)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter
	}
	return "file://" + p
}
