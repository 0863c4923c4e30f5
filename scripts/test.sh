#!/usr/bin/env bash
# Runs the whole test suite, real Redis included: installs redis-server from
# Debian's packages when it is missing, then runs vet and the race-enabled
# tests. The tests start their own redis-server processes (standalone and a
# 3-node cluster) on free loopback ports and stop them afterwards; they never
# touch a Redis someone else runs.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  echo "test.sh: redis-server not found; installing Debian's redis-server package" >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "test.sh: cannot install redis-server (not root, no passwordless sudo)." >&2
    echo "test.sh: install it yourself (apt-get install redis-server) and run this again; the tests need a real Redis and never skip it." >&2
    exit 1
  fi
  command -v redis-server >/dev/null 2>&1 || { echo "test.sh: redis-server still missing after install" >&2; exit 1; }
fi
echo "test.sh: using $(redis-server --version | cut -d' ' -f1-3)"

gofmt_out=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$gofmt_out" ]; then
  echo "test.sh: gofmt would change: $gofmt_out" >&2
  exit 1
fi
# the root module, then each nested module (benchmarks/, ratelimitotel/ ...)
# Every module runs even when an earlier one failed; the exit code says
# whether all passed.
failed=""
for mod in $(git ls-files 'go.mod' '*/go.mod' 2>/dev/null || echo go.mod); do
  dir=$(dirname "$mod")
  echo "test.sh: module ./$dir"
  (cd "$dir" && go vet ./... && go test -race -shuffle=on -count=1 ./...) || failed="$failed ./$dir"
done
if [ -n "$failed" ]; then
  echo "test.sh: FAILED in module(s):$failed" >&2
  exit 1
fi
echo "test.sh: all modules passed"
