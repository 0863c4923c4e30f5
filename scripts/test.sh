#!/usr/bin/env bash
# Runs the whole test suite, real Redis included, in steps:
#
#   1. redis-server: the one on PATH (or $REDIS_SERVER), which must be 7.0 or
#      newer; when there is none, Debian's redis-server package is installed.
#   2. gofmt on every Go file.
#   3. every module of the repository (every go.mod, nested ones included,
#      found anew on each run): go vet, staticcheck, then the race-enabled
#      tests, without the repository checks and the mutation check. go vet
#      and staticcheck build with -race too, so that the tests reuse what
#      they compiled instead of building every dependency a second time;
#      the packages with files built only without -race are vetted without
#      it as well.
#   4. the repository checks (internal/repotest: the README's and docs/'
#      snippets compile, the nested modules build from a module proxy), on
#      their own time budget: they run the go command, whose time depends
#      on what the build cache holds.
#   5. the mutation check (propertytests TestMutants), on its own time budget:
#      it builds and runs the property tests once per deliberate bug, which
#      takes minutes of CPU. It starts before step 3 and runs alongside
#      steps 3 and 4, its output held back and printed when it ends.
#
# The tests of a module run twice as many packages at once as there are
# CPUs (TEST_PARALLEL): they wait on Redis and on real time more than they
# compute.
#
# A step that runs long says every minute that it is still running.
#
# The tests start their own redis-server processes (standalone and a 3-node
# cluster) on free loopback ports and stop them afterwards; they never touch a
# Redis someone else runs.
#
# Environment: REDIS_SERVER (path of the redis-server to use), TEST_TIMEOUT
# (per test binary, default 15m), TEST_PARALLEL (packages tested at once,
# default twice the CPUs), REPO_TIMEOUT (step 4, default 20m),
# MUTANTS_TIMEOUT (default 30m), RATELIMIT_MUTANTS (a regexp of the mutants
# to run, default all), SKIP_MUTANTS=1 (leave step 5 out, for a quick local
# run; CI never sets it).
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2 # honnef.co/go/tools; bump deliberately
TEST_TIMEOUT=${TEST_TIMEOUT:-15m}
REPO_TIMEOUT=${REPO_TIMEOUT:-20m}
MUTANTS_TIMEOUT=${MUTANTS_TIMEOUT:-30m}
TEST_PARALLEL=${TEST_PARALLEL:-$((2 * $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)))}
start=$(date +%s)
step() { echo "test.sh: [$(($(date +%s) - start))s] $*"; }

# run WHAT CMD...: runs CMD, saying every minute that WHAT is still running,
# so that a long build or test is not taken for a hang.
run() {
  local what=$1
  shift
  (
    trap 'kill "$s" 2>/dev/null; exit 0' TERM
    while :; do
      sleep 60 &
      s=$!
      wait "$s"
      step "still running: $what"
    done
  ) &
  local beat=$!
  local rc=0
  "$@" || rc=$?
  kill "$beat" 2>/dev/null
  wait "$beat" 2>/dev/null || true
  return "$rc"
}

# 1. Redis
if [ -z "${REDIS_SERVER:-}" ] && ! command -v redis-server >/dev/null 2>&1; then
  echo "test.sh: redis-server not found; installing Debian's redis-server package." >&2
  echo "test.sh: note: on a host with systemd that package also starts a system Redis on 127.0.0.1:6379" >&2
  echo "test.sh: (stop it with: systemctl disable --now redis-server). The tests never use it: they start their own." >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "test.sh: cannot install redis-server (not root, no passwordless sudo)." >&2
    echo "test.sh: install Redis 7.0 or newer yourself (apt-get install redis-server, or set REDIS_SERVER=/path/to/redis-server) and run this again; the tests need a real Redis and never skip it." >&2
    exit 1
  fi
  command -v redis-server >/dev/null 2>&1 || { echo "test.sh: redis-server still missing after install" >&2; exit 1; }
fi
redis_bin=${REDIS_SERVER:-$(command -v redis-server)}
redis_version=$("$redis_bin" --version | sed -n 's/.* v=\([0-9][0-9.]*\).*/\1/p')
redis_major=${redis_version%%.*}
if [ -z "$redis_major" ] || [ "$redis_major" -lt 7 ]; then
  echo "test.sh: $redis_bin is Redis ${redis_version:-of unknown version}; the tests need 7.0 or newer" >&2
  echo "test.sh: (the cluster helper uses Redis 7's cluster commands; Debian 11 and Ubuntu 22.04 ship 6.x)." >&2
  echo "test.sh: install 7.x (Debian 12, Ubuntu 24.04, or redis.io's packages) or point REDIS_SERVER at one." >&2
  exit 1
fi
step "using $redis_bin, Redis $redis_version"

# 2. gofmt
gofmt_out=$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$gofmt_out" ]; then
  echo "test.sh: gofmt would change: $gofmt_out" >&2
  exit 1
fi

# staticcheck, pinned: installed into GOBIN (or GOPATH/bin) when missing
gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
staticcheck="$gobin/staticcheck"
if ! "$staticcheck" -version 2>/dev/null | grep -q "(${STATICCHECK_VERSION#v})"; then
  step "installing staticcheck $STATICCHECK_VERSION"
  run "installing staticcheck" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi

# 5, started: the mutation check, in the background
# Its output and exit code go to files of a scratch directory; a subshell
# inherits the EXIT trap's text, so the trap acts in this shell only.
mutants_dir=""
if [ "${SKIP_MUTANTS:-}" != 1 ]; then
  mutants_dir=$(mktemp -d)
  # an early exit stops it, go test included (the subshell's child)
  trap '[ "$BASHPID" != "$$" ] || { [ -z "${mutants_pid:-}" ] || { pkill -P "$mutants_pid" || true; kill "$mutants_pid" || true; } 2>/dev/null; rm -rf "$mutants_dir"; }' EXIT
  step "mutation check: started alongside the module tests (mutants matching '${RATELIMIT_MUTANTS:-.}', budget $MUTANTS_TIMEOUT); its output comes when it ends"
  (
    rc=0
    RATELIMIT_MUTANTS=${RATELIMIT_MUTANTS:-.} go test -count=1 -timeout "$MUTANTS_TIMEOUT" -run '^TestMutants$' ./propertytests >"$mutants_dir/out" 2>&1 || rc=$?
    echo "$rc" >"$mutants_dir/rc"
  ) &
  mutants_pid=$!
fi

# 3. every module: the root, benchmarks/, ratelimitotel/ and any other go.mod.
# Modules are developed together through go.work; a module that go.work does
# not list yet runs on its own go.mod (GOWORK=off), with a warning.
# Every module runs even when an earlier one failed; the exit code says
# whether all passed.
workspace=$(go work edit -json 2>/dev/null | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p' | sed 's|^\./||; s|/$||; s|^$|.|')
failed=""
for mod in $(git ls-files --cached --others --exclude-standard 'go.mod' '*/go.mod' 2>/dev/null || echo go.mod); do
  dir=$(dirname "$mod")
  gowork=""
  if ! printf '%s\n' $workspace | grep -qxF "$dir"; then
    echo "test.sh: warning: ./$dir is not in go.work (add it: go work use ./$dir); testing it on its own go.mod" >&2
    gowork=off
  fi
  (cd "$dir" && if [ -n "$gowork" ]; then export GOWORK=off; fi &&
    step "module ./$dir: go vet" && run "go vet of ./$dir" go vet -race ./... &&
    step "module ./$dir: staticcheck" && GOFLAGS="-race ${GOFLAGS:-}" run "staticcheck of ./$dir" "$staticcheck" ./... &&
    norace=$(go list -race -f '{{$d := .Dir}}{{range .IgnoredGoFiles}}{{$d}}/{{.}} {{end}}' ./... | { xargs -r grep -l '^//go:build.*race' || true; } | xargs -r -n1 dirname | sort -u) &&
    if [ -n "$norace" ]; then
      step "module ./$dir: go vet without -race of the packages with files built only without it" &&
      run "go vet of ./$dir" go vet $norace
    fi &&
    pkgs=$(go list ./... | grep -v '/internal/repotest$') &&
    step "module ./$dir: tests (-race; the first run builds every dependency with the race detector)" &&
    run "tests of ./$dir" go test -race -shuffle=on -count=1 -p "$TEST_PARALLEL" -timeout "$TEST_TIMEOUT" -skip '^TestMutants$' $pkgs) || failed="$failed ./$dir"
done

# 4. the repository checks
step "repository checks: README and docs/ snippets, nested modules from a module proxy (budget $REPO_TIMEOUT)"
run "repository checks" go test -count=1 -timeout "$REPO_TIMEOUT" ./internal/repotest || failed="$failed repository-checks"

# 5. the mutation check
if [ -z "$mutants_dir" ]; then
  step "mutation check left out (SKIP_MUTANTS=1)"
else
  step "mutation check: waiting for it to end"
  run "mutation check" sh -c 'while [ ! -s "$1" ]; do sleep 2; done' sh "$mutants_dir/rc"
  mutants_pid=""
  rc=$(cat "$mutants_dir/rc")
  cat "$mutants_dir/out"
  [ "$rc" = 0 ] || failed="$failed mutation-check"
  step "mutation check: ended (exit code $rc)"
fi

if [ -n "$failed" ]; then
  echo "test.sh: FAILED in:$failed (after $(($(date +%s) - start))s)" >&2
  exit 1
fi
step "all modules passed"
