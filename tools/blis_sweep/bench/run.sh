#!/usr/bin/env bash
# The README's measurement: the 200-run sweep (experiment.yaml, grid.yaml:
# 10,000 requests a run) sequentially (blis sweep --workers 1), on blis
# sweep's own pool (--workers 2), on the Python process pool and on a local
# Ray cluster (python -m blis_sweep, 2 workers / 2 CPUs, 8 shards), ROUNDS
# times in rotated order (paired), wall time by /usr/bin/time; every table
# must equal the sequential one byte for byte. Needs the Ray virtualenv
# (tools/blis_sweep/test-ray.sh makes build/venv-ray).
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds="${ROUNDS:-3}"
py="${BLIS_RAY_VENV:-build/venv-ray}/bin/python"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go build -o "$out/blis" ./cmd/blis
args=(--config tools/blis_sweep/bench/experiment.yaml --grid tools/blis_sweep/bench/grid.yaml)
export PYTHONPATH="$PWD/tools/blis_sweep" RAY_TMPDIR="$out"
run() { # name command...
  local name=$1
  shift
  /usr/bin/time -f "%e" -o "$out/time" "$@" >/dev/null 2>"$out/$name.err" || { cat "$out/$name.err" >&2; exit 1; }
  echo "$name $(cat "$out/time")" >>"$out/times"
}
names=(sequential go-pool python-pool ray)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
for r in $(seq 1 "$rounds"); do
  for k in 0 1 2 3; do
    name=${names[$(((k + r) % 4))]}
    case $name in
      sequential) run "$name" "$out/blis" sweep "${args[@]}" --workers 1 --out "$out/$name.csv" ;;
      go-pool) run "$name" "$out/blis" sweep "${args[@]}" --workers 2 --out "$out/$name.csv" ;;
      python-pool) run "$name" "$py" -m blis_sweep --backend local --blis "$out/blis" --workers 2 --out "$out/$name.csv" -- "${args[@]}" ;;
      ray) run "$name" "$py" -m blis_sweep --backend ray --num-cpus 2 --blis "$out/blis" --out "$out/$name.csv" -- "${args[@]}" ;;
    esac
    cmp "$out/$name.csv" "$out/sequential.csv" 2>/dev/null || [ ! -e "$out/sequential.csv" ] || { echo "$name: the table differs from the sequential one" >&2; exit 1; }
  done
done
for n in "${names[@]}"; do cmp "$out/$n.csv" "$out/sequential.csv"; done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "all four tables are byte-identical ($(wc -l <"$out/sequential.csv") lines, sha256 $(sha256sum "$out/sequential.csv" | cut -c1-16))"
echo "| how | wall time, s (each round) | median |"
echo "|---|---|---|"
for n in "${names[@]}"; do
  each=$(awk -v n="$n" '$1 == n { printf "%s%s", (k++ ? ", " : ""), $2 }' "$out/times")
  median=$(awk -v n="$n" '$1 == n { print $2 }' "$out/times" | sort -n | awk '{ t[NR] = $1 } END { print (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2 }')
  echo "| $n | $each | $median |"
done
