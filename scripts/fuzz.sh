#!/usr/bin/env bash
# Fuzzes every parser family for at least FUZZ_FAMILY_SECONDS of wall time
# (default 60: a minute per family in CI), in rounds of a
# fixed number of executions. scripts/test.sh calls it; run it alone to
# fuzz without the other tests, e.g. FUZZ_FAMILY_SECONDS=5 scripts/fuzz.sh,
# or scripts/fuzz.sh blis-run workload to fuzz only those families.
#
# Budgets are execution counts, not durations: with a duration, Go <= 1.26's
# fuzz coordinator can report "context deadline exceeded" as a failure when
# the deadline races a worker (golang/go#75804, fixed in Go 1.27); a count
# has no deadline. So each target runs in rounds of `-fuzztime Nx`: a first
# round of FUZZ_FIRST_ROUND executions (default 1000) measures the target's
# rate, and each further round is sized from it to fill what is left of the
# target's share of the family's time (the family's time left over its
# targets left), until that share is spent. A family thus takes its budget
# plus at most one round's misestimate; the wall time counted includes
# building the fuzz binary and loading the corpus, which `go test` does on
# every round (the fuzz engine's own elapsed time is printed beside it).
#
# Failing inputs land in the package's testdata/fuzz/ (keep them as
# regression cases); the script stops at the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_FAMILY_SECONDS="${FUZZ_FAMILY_SECONDS:-60}"
FUZZ_FIRST_ROUND="${FUZZ_FIRST_ROUND:-1000}"
FUZZ_PARALLEL="${FUZZ_PARALLEL:-}" # -parallel for the fuzz workers (default GOMAXPROCS)

# The parser families and their targets, package:Target. Keep this list in
# step with the code: the check below fails on a Fuzz function not in it.
families=(
  "model-config ./physics:FuzzParseModelConfig ./physics:FuzzParseHardwareSpec ./physics:FuzzParseGEMMShapes"
  "features ./features:FuzzFeatures"
  "otlp-ingest ./otlpingest:FuzzDecodeJSON ./otlpingest:FuzzReadTraces"
  "kv-events ./otlpingest:FuzzDecodeKVLine"
  "otlp-receive ./otlpreceive:FuzzServeHTTP"
  "coefficients ./coefficients:FuzzParse"
  "workload ./sim/workload:FuzzParseDist ./sim/workload:FuzzParseSpec ./sim/workload:FuzzReplayCSV"
  "records ./sim/workload/records:FuzzReadAzure ./sim/workload/records:FuzzParseRunMeta ./sim/workload/records:FuzzReadMooncake ./sim/workload/records:FuzzReadVLLMBench ./sim/workload/records:FuzzReadInferencePerf ./sim/workload/records:FuzzReadVLLMRuns ./sim/workload/records:FuzzReadCounters"
  "parquet ./internal/pqread:FuzzRead ./internal/pqread:FuzzDamagedFile"
  "manifest ./cmd/calibrate:FuzzReadManifest"
  "experiment ./experiment:FuzzParseExperiment ./experiment:FuzzParseDeployment ./policy:FuzzParsePolicyFile ./deploy:FuzzParseHostProfile"
  "blis-run ./cmd/blis:FuzzRunCommand"
  "whole-experiment ./experiment:FuzzWholeExperiment"
  "sweep ./sweep:FuzzParseGrid ./sweep:FuzzParseSet ./sweep:FuzzReadCSV"
  "analysis ./cluster:FuzzParseSample ./summary:FuzzTokens"
)

# Every Fuzz function of the repository must be in a family.
listed=" ${families[*]} "
missing=""
while IFS=: read -r file _ decl; do
  name=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$decl")
  pkg="./$(dirname "${file#./}")"
  [[ "$listed" == *" $pkg:$name "* ]] || missing+=" $pkg:$name"
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | grep -v '^./build/')
if [ -n "$missing" ]; then
  echo "fuzz.sh: fuzz targets in no family (add them to scripts/fuzz.sh):$missing" >&2
  exit 1
fi

now() { date +%s.%N; }
# calc EXPR: floating-point arithmetic.
calc() { awk "BEGIN { print $1 }"; }

# fuzz_target PKG NAME SECONDS: rounds of PKG's NAME until SECONDS of wall
# time are spent; adds to the family's totals.
fuzz_target() {
  local pkg=$1 name=$2 budget=$3
  local spent=0 count=$FUZZ_FIRST_ROUND rounds=0 log
  log=$(mktemp)
  while :; do
    local t0 t1 wall execs elapsed
    t0=$(now)
    if ! go test "$pkg" -run '^$' -fuzz "^$name\$" -fuzztime "${count}x" -fuzzminimizetime 500x \
      ${FUZZ_PARALLEL:+-parallel "$FUZZ_PARALLEL"} >"$log" 2>&1; then
      cat "$log"
      rm -f "$log"
      echo "fuzz.sh: $pkg $name failed (the failing input is in $pkg/testdata/fuzz/$name/)" >&2
      return 1
    fi
    t1=$(now)
    rounds=$((rounds + 1))
    wall=$(calc "$t1 - $t0")
    # The engine's last report, "fuzz: elapsed: 1m12s, execs: 3000 (...)"
    # (none when the round ended while loading the corpus; elapsed is in
    # whole seconds, as [Nh][Nm]Ns).
    elapsed=0 execs=0
    read -r elapsed execs < <(sed -nE 's/^fuzz: elapsed: ([0-9hms]+), execs: ([0-9]+).*/\1 \2/p' "$log" | tail -n 1 |
      awk '{ d = $1; s = 0; while (match(d, /^[0-9]+[hms]/)) { n = substr(d, 1, RLENGTH - 1); u = substr(d, RLENGTH, 1)
        s += n * (u == "h" ? 3600 : u == "m" ? 60 : 1); d = substr(d, RLENGTH + 1) } print s, $2 }') || true
    elapsed=${elapsed:-0} execs=${execs:-0}
    printf '    round %d: %dx, %.1f s wall, %d s in the fuzz engine, %d executions\n' "$rounds" "$count" "$wall" "$elapsed" "$execs"
    spent=$(calc "$spent + $wall")
    fam_execs=$((fam_execs + execs))
    fam_engine=$((fam_engine + elapsed))
    local left
    left=$(calc "$budget - $spent")
    if awk "BEGIN { exit !($left <= 0) }"; then
      break
    fi
    # Size the next round to fill what is left, less this round's overhead
    # (building, starting), at this round's rate; when the overhead takes
    # most of what is left, to fuzz for half of it anyway (rather than
    # spend it on rounds too short to fuzz); at least 100 executions.
    count=$(awk -v n="$execs" -v e="$elapsed" -v w="$wall" -v l="$left" 'BEGIN {
      e = (e < 1) ? 1 : e; rate = n / e; ovh = w - e; if (ovh < 0) ovh = 0
      f = l - ovh; if (f < l / 2) f = l / 2
      c = int(rate * f); if (c < 100) c = 100; print c }')
  done
  rm -f "$log"
  printf '  %-45s %3d rounds, %6.1f s\n' "$pkg $name" "$rounds" "$spent"
}

want=" $* "
for w in "$@"; do
  [[ " ${families[*]%% *} " == *" $w "* ]] || { echo "fuzz.sh: no family $w; the families: ${families[*]%% *}" >&2; exit 2; }
done
total_t0=$(now)
for fam in "${families[@]}"; do
  set -- $fam
  family=$1
  shift
  if [ "$want" != "  " ] && [[ "$want" != *" $family "* ]]; then
    continue
  fi
  echo "-- fuzz family $family (${FUZZ_FAMILY_SECONDS} s)"
  fam_t0=$(now)
  fam_execs=0
  fam_engine=0
  n=$#
  for t in "$@"; do
    # This target's share: the family's time left over the targets left.
    left=$(calc "$FUZZ_FAMILY_SECONDS - ($(now) - $fam_t0)")
    share=$(calc "($left > 0 ? $left : 0) / $n")
    fuzz_target "${t%%:*}" "${t#*:}" "$share"
    n=$((n - 1))
  done
  printf -- '-- fuzz family %s: %.1f s wall (%d s in the fuzz engine), %d executions\n' "$family" "$(calc "$(now) - $fam_t0")" "$fam_engine" "$fam_execs"
done
printf -- '-- fuzz total: %.1f s\n' "$(calc "$(now) - $total_t0")"
