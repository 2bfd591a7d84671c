#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: Go modules are fetched
# first and the virtualenv with the Python packages' pinned requirements
# made, then the format check, unit/golden/property tests (every fuzz
# target's seed corpus included, and the README's and docs' commands run
# as written: internal/docs), vet, and the Python trainer's, sweep
# driver's and policy-search adapters' tests (the adapters run GEPA and
# OpenEvolve end to end with a stub LLM, no network). Quick
# enough to run before a commit; the sweep driver's Ray tests
# (tools/blis_sweep/test-ray.sh, which installs Ray) and the minute of
# fuzzing per parser family (scripts/fuzz.sh) run in .ci/run after it.
# Set BLIS_VENV to put the virtualenv elsewhere (default build/venv).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null || { echo "test.sh: Go is not installed (need Go >= 1.26, the go line of go.mod; an older go >= 1.21 fetches it)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "test.sh: python3 is not installed (need Python >= 3.11 with venv)" >&2; exit 1; }

# Each section says how long it took, so a slow one is seen.
start=$SECONDS
section_name=""
section_start=$SECONDS
section() {
  if [ -n "$section_name" ]; then
    echo "   ($section_name: $((SECONDS - section_start)) s)"
  fi
  section_name="$1"
  section_start=$SECONDS
  if [ -n "$1" ]; then echo "== $1"; fi
}

section "go mod download"
go mod download

section "Python virtualenv: the pinned requirements of the trainer, the sweep driver and policy search (the docs' commands use it too)"
venv="${BLIS_VENV:-build/venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
py="$(cd "$venv" && pwd)/bin/python"
export BLIS_VENV="$(cd "$venv" && pwd)"
"$py" -m pip install -q --disable-pip-version-check -r tools/physics_trainer/requirements.lock
"$py" -m pip install -q --disable-pip-version-check -r tools/blis_sweep/requirements.lock
# gepa and openevolve (no torch; ~10 s to install from a warm pip cache, 35 s cold).
"$py" -m pip install -q --disable-pip-version-check -r tools/blis_sweep/requirements-search.lock

section "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi

section "go test (the docs' commands among them: internal/docs)"
# A package may take several minutes on a loaded machine (experiment: 328 s
# at load 10-12); the default 10-minute limit per package is too tight there.
go test -count=1 -timeout 30m ./...

# After go test, vet finds every package compiled and only analyzes; before
# it, on an empty build cache, it compiled everything first, silently.
section "go vet"
scripts/vet.sh

section "shipped coefficients up to date"
scripts/make-shipped-coefficients.sh --check

section "Python trainer: pytest"
# The package is imported from the source tree (no install step), so the
# tests always see the checked-out code.
(cd tools/physics_trainer && BLIS_REQUIRE_GO=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$py" -m pytest -q -p no:cacheprovider)

section "Python sweep driver and policy search (tools/blis_sweep): the process pool, GEPA and OpenEvolve with a stub LLM; its Ray tests run in .ci/run"
(cd tools/blis_sweep && BLIS_REQUIRE_GO=1 BLIS_REQUIRE_SEARCH=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$py" -m pytest -q -p no:cacheprovider -m "not ray")

section ""
echo "== all tests passed in $((SECONDS - start)) s (the Ray backend's tests and the fuzzing: .ci/run runs them after this)"
