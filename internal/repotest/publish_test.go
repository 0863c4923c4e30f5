package repotest

import (
	"archive/zip"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// plannedVersion is the first tag of the root module, which the nested
// modules require. Bump it here and in their go.mod files together.
const plannedVersion = "v0.1.0"

// TestNestedModulesRequireARealRoot: each nested module requires a version
// of the root that can be published (no zero pseudo-version) and has no
// replace of it: local development goes through go.work instead.
func TestNestedModulesRequireARealRoot(t *testing.T) {
	requireRoot := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(rootModule) + `\s+(\S+)`)
	nested := 0
	for _, m := range modules(t) {
		if m.rel == "." {
			continue
		}
		nested++
		if strings.Contains(m.mod, "replace "+rootModule) || regexp.MustCompile(`(?m)^\s*`+regexp.QuoteMeta(rootModule)+`\s+=>`).MatchString(m.mod) {
			t.Errorf("%s/go.mod replaces %s: published, that replace is ignored and the module breaks; list the module in go.work instead", m.rel, rootModule)
		}
		got := requireRoot.FindStringSubmatch(m.mod)
		if got == nil {
			continue // a nested module need not import the root
		}
		if got[1] != plannedVersion {
			t.Errorf("%s/go.mod requires %s %s; want the planned tag %s", m.rel, rootModule, got[1], plannedVersion)
		}
	}
	if nested == 0 {
		t.Error("no nested module found (benchmarks/, ratelimitotel/)")
	}
	work, err := os.ReadFile(filepath.Join(repoRoot(t), "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range modules(t) {
		use := "./" + m.rel
		if m.rel == "." {
			use = "."
		}
		if !regexp.MustCompile(`(?m)^\s*(use\s+)?` + regexp.QuoteMeta(use) + `\s*$`).Match(work) {
			t.Errorf("go.work does not use %s: add it with go work use %s", use, use)
		}
	}
}

// TestRatelimitotelFromAProxy: a module outside the repository requires
// ratelimitotel at the planned version and builds, resolving both it and the
// root module from a module proxy (a directory laid out per the GOPROXY
// protocol, holding the two modules zipped from this working copy at that
// version) and everything else from the module cache: what a user gets once
// the tags are pushed.
func TestRatelimitotelFromAProxy(t *testing.T) {
	proxy := t.TempDir()
	var otel module
	for _, m := range modules(t) {
		switch m.path {
		case rootModule:
			publish(t, proxy, m, plannedVersion)
		case rootModule + "/ratelimitotel":
			otel = m
			publish(t, proxy, m, plannedVersion)
		}
	}
	if otel.path == "" {
		t.Fatal("module ratelimitotel not found")
	}
	user := t.TempDir()
	write(t, filepath.Join(user, "go.mod"), "module example.com/user\n\ngo 1.26.0\n\nrequire "+otel.path+" "+plannedVersion+"\n")
	write(t, filepath.Join(user, "main.go"), `package main

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/ratelimitotel"
)

func main() {
	obs, err := ratelimitotel.New()
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	_, err = ratelimit.New(rdb, ratelimit.Config{Name: "login", Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Minute},
		ratelimit.WithObserver(obs))
	if err != nil {
		panic(err)
	}
}
`)
	env := offlineEnv(t, proxy)
	goCmd(t, user, env, "mod", "tidy")
	goCmd(t, user, env, "build", "-trimpath", "./...") // -trimpath: the build cache serves it whatever GOMODCACHE is
	list := goCmd(t, user, env, "list", "-m", rootModule, otel.path)
	for _, want := range []string{rootModule + " " + plannedVersion, otel.path + " " + plannedVersion} {
		if !strings.Contains(list, want+"\n") {
			t.Errorf("go list -m: %q; want %q (resolved from the proxy, no replace)", list, want)
		}
	}
}

// publish writes m at version into the proxy directory: list, .info, .mod
// and .zip, as `go mod download` expects them. The zip holds the module's
// files under path@version/, without nested modules and dot directories.
func publish(t *testing.T, proxy string, m module, version string) {
	t.Helper()
	dir := filepath.Join(proxy, filepath.FromSlash(m.path), "@v") // the paths here are lowercase: no escaping needed
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "list"), version+"\n")
	write(t, filepath.Join(dir, version+".info"), fmt.Sprintf(`{"Version":%q,"Time":"2026-12-01T00:00:00Z"}`, version))
	write(t, filepath.Join(dir, version+".mod"), m.mod)
	f, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z := zip.NewWriter(f)
	files := 0
	err = filepath.WalkDir(m.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == m.dir {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module is not part of this one
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		rel, err := filepath.Rel(m.dir, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		w, err := z.Create(m.path + "@" + version + "/" + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		files++
		_, err = w.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("module %s: no files", m.path)
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
