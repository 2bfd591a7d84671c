#!/usr/bin/env bash
# The Ray backend's tests on a real local Ray cluster (ray.init(num_cpus=2,
# include_dashboard=False)), in a virtualenv of their own with
# requirements-ray.lock (ray==2.60.0 and its pinned dependencies, and gepa
# for the policy-search adapters' test; ~1 min to install on a fresh
# machine, ~25 s to run: each test module starts its own cluster, ~8 s on a
# loaded machine). .ci/run calls it after
# scripts/test.sh, which runs the rest of this package's tests. Set
# BLIS_RAY_VENV to put the virtualenv elsewhere (default build/venv-ray).
set -euo pipefail
cd "$(dirname "$0")/../.."

venv="${BLIS_RAY_VENV:-build/venv-ray}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
py="$(cd "$venv" && pwd)/bin/python"
"$py" -m pip install -q --disable-pip-version-check -r tools/blis_sweep/requirements-ray.lock
# Ray's workers and GCS live under a temporary directory of this run.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd tools/blis_sweep && RAY_TMPDIR="$tmp" BLIS_REQUIRE_GO=1 BLIS_REQUIRE_RAY=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" \
  "$py" -m pytest -q -p no:cacheprovider -m ray)
