#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: Go modules are fetched
# first, then vet, format check, unit/golden/property tests, the Python
# trainer's tests (in a virtualenv with its pinned requirements), and a short
# fixed-count run of each fuzz target. Set FUZZTIME to change the fuzz budget
# and BLIS_VENV to put the virtualenv elsewhere (default build/venv).
set -euo pipefail
cd "$(dirname "$0")/.."

# Budgets are execution counts, not durations: with a duration, Go <= 1.26's
# fuzz coordinator can report "context deadline exceeded" as a failure when
# the deadline races a worker (golang/go#75804, fixed in Go 1.27); a count
# has no deadline. 10000 runs take 1-10 s per target on 2 cores.
FUZZTIME="${FUZZTIME:-10000x}"

command -v go >/dev/null || { echo "test.sh: Go is not installed (need Go >= 1.26, the go line of go.mod; an older go >= 1.21 fetches it)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "test.sh: python3 is not installed (need Python >= 3.11 with venv)" >&2; exit 1; }

echo "== go mod download"
go mod download

echo "== go vet"
go vet ./...

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi

echo "== go test"
go test -count=1 ./...

echo "== shipped coefficients up to date"
scripts/make-shipped-coefficients.sh --check

echo "== Python trainer: pinned requirements and pytest"
venv="${BLIS_VENV:-build/venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
py="$(cd "$venv" && pwd)/bin/python"
"$py" -m pip install -q --disable-pip-version-check -r tools/physics_trainer/requirements.lock
# The package is imported from the source tree (no install step), so the
# tests always see the checked-out code.
(cd tools/physics_trainer && BLIS_REQUIRE_GO=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$py" -m pytest -q -p no:cacheprovider)

echo "== fuzz (${FUZZTIME} each)"
# Each fuzz target: package and name. Keep this list in step with the code.
fuzz_targets=(
  "./physics FuzzParseModelConfig"
  "./features FuzzFeatures"
  "./otlpingest FuzzDecodeJSON"
  "./otlpingest FuzzReadTraces"
  "./otlpingest FuzzDecodeKVLine"
  "./coefficients FuzzParse"
  "./sim/workload FuzzParseDist"
  "./sim/workload FuzzReplayCSV"
  "./sim/workload FuzzParseSpec"
  "./sim/workload/records FuzzReadAzure"
  "./sim/workload/records FuzzParseRunMeta"
  "./sim/workload/records FuzzReadMooncake"
  "./sim/workload/records FuzzReadVLLMBench"
  "./sim/workload/records FuzzReadInferencePerf"
  "./sim/workload/records FuzzReadVLLMRuns"
  "./internal/pqread FuzzRead"
  "./internal/pqread FuzzDamagedFile"
  "./cmd/calibrate FuzzReadManifest"
  "./deploy FuzzParseDeployment"
)
for t in "${fuzz_targets[@]}"; do
  set -- $t
  # A small minimization budget (also a count) bounds the time spent.
  go test "$1" -run '^$' -fuzz "^$2\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 500x
done
echo "== all tests passed"
