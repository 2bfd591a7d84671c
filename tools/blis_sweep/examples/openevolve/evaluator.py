"""OpenEvolve's evaluator for blis policy bundles (docs/policy-search.md).

OpenEvolve loads this file and calls evaluate_stage1 (a smoke run) and, for
programs that pass cascade_thresholds[0], evaluate_stage2 (the full one);
evaluate is stage 2 alone. Set in the environment (OpenEvolve's worker
processes inherit it):

  BLIS_BIN                   the blis binary (default: blis on PATH)
  BLIS_SEARCH_WORKLOADS      comma-separated scenario names or workload spec files (mixed-slo)
  BLIS_SEARCH_EXPERIMENT     an experiment file for the deployment and run options (none)
  BLIS_SEARCH_ARGS           more blis run flags, space-separated (--num-instances 2)
  BLIS_SEARCH_SEEDS          comma-separated seeds, a workload's score is their mean (42)
  BLIS_SEARCH_HORIZON        stage 2's simulated seconds (the experiment's)
  BLIS_SEARCH_SMOKE_HORIZON  stage 1's simulated seconds (30)
  BLIS_SEARCH_TIMEOUT        seconds before a blis run is killed and the program scores 0 (60)
  BLIS_SEARCH_BACKEND        local or ray (local); BLIS_SEARCH_RAY_ADDRESS: the cluster (auto)

blis_sweep must be importable: PYTHONPATH=tools/blis_sweep, or pip install
tools/blis_sweep[search].

Loading this file resolves each workload with blis once (no simulation):
when blis refuses the experiment, the flags or a workload, it raises with
blis's error, so openevolve-run stops at once instead of scoring every
program 0. A program that scores 0 is one line on stderr as it happens.

Without an LLM, score programs with the same settings (stage 1, then stage 2):

  python tools/blis_sweep/examples/openevolve/evaluator.py PROGRAM [PROGRAM...]

which prints each stage's metrics as JSON and exits 1 when a program fails.
"""

import json
import os
import shlex
import sys

from blis_sweep.search import OpenEvolveEvaluator


def _env(name, default=None):
    v = os.environ.get(name, "").strip()
    return v if v else default


_horizon = _env("BLIS_SEARCH_HORIZON")
_ev = OpenEvolveEvaluator(
    workloads=_env("BLIS_SEARCH_WORKLOADS", "mixed-slo").split(","),
    experiment=_env("BLIS_SEARCH_EXPERIMENT"),
    args=shlex.split(_env("BLIS_SEARCH_ARGS", "--num-instances 2")),
    seeds=[int(s) for s in _env("BLIS_SEARCH_SEEDS", "42").split(",")],
    horizon_s=float(_horizon) if _horizon else None,
    smoke_horizon_s=float(_env("BLIS_SEARCH_SMOKE_HORIZON", "30")),
    timeout_s=float(_env("BLIS_SEARCH_TIMEOUT", "60")),
    backend=_env("BLIS_SEARCH_BACKEND", "local"),
    ray_address=_env("BLIS_SEARCH_RAY_ADDRESS", "auto") if _env("BLIS_SEARCH_BACKEND") == "ray" else None,
    blis=_env("BLIS_BIN"),
)


def evaluate_stage1(program_path):
    return _ev.evaluate_stage1(program_path)


def evaluate_stage2(program_path):
    return _ev.evaluate_stage2(program_path)


def evaluate(program_path):
    return _ev.evaluate(program_path)

_ev.check()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: evaluator.py PROGRAM [PROGRAM...]: score each program without an LLM")
    _ev.artifacts = False
    failed = 0
    for path in sys.argv[1:]:
        for stage, fn in ((1, evaluate_stage1), (2, evaluate_stage2)):
            metrics = fn(path)
            print(json.dumps({"program": path, "stage": stage, **metrics}))
            if metrics.get("combined_score", 0) == 0 and len(metrics) <= 2:
                failed += 1
                break
    sys.exit(1 if failed else 0)
