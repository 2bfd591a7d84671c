"""python -m blis_sweep.search gepa ...: GEPA evolves a policy bundle
against blis (docs/policy-search.md). OpenEvolve runs with its own command,
openevolve-run, on tools/blis_sweep/examples/openevolve/."""

from __future__ import annotations

import argparse
import contextlib
import sys

from .core import PolicyEvaluator, assemble_bundle, split_bundle


def main(argv: list[str] | None = None, reflection_lm=None) -> int:
    p = argparse.ArgumentParser(prog="python -m blis_sweep.search",
                                description="Policy search with GEPA over blis (docs/policy-search.md)")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gepa", help="evolve a policy bundle with GEPA")
    g.add_argument("--policy", required=True, help="seed policy file (blis run --policy-config): its sections are the components")
    g.add_argument("--workload", action="append", required=True,
                   help="a built-in scenario name or a workload spec file; repeat for several (the train and validation set)")
    g.add_argument("--experiment", help="experiment file (--config): deployment and run options")
    g.add_argument("--blis-arg", action="append", default=[], help="another blis run flag for every run, e.g. --blis-arg=--num-instances=4")
    g.add_argument("--seeds", default="42", help="comma-separated seeds; a workload's score is their mean")
    g.add_argument("--horizon", type=float, help="simulated seconds per run (default: the experiment's)")
    g.add_argument("--timeout", type=float, default=300, help="seconds before a blis run is killed (it scores 0)")
    g.add_argument("--max-metric-calls", type=int, default=20, help="GEPA's budget: workload evaluations in all")
    g.add_argument("--model", required=True, help="reflection LM: a model name on --api-base")
    g.add_argument("--api-base", help="OpenAI-compatible endpoint (default: OpenAI's); the key is $OPENAI_API_KEY")
    g.add_argument("--run-dir", help="GEPA's state directory (resumes when it exists)")
    g.add_argument("--backend", choices=["local", "ray"], default="local")
    g.add_argument("--ray-address", help="Ray cluster to join (auto inside one); default: start a local one")
    g.add_argument("--workers", type=int, help="local backend: blis processes at once (default: the CPUs)")
    g.add_argument("--blis", help="the blis binary (default: blis on PATH)")
    g.add_argument("--seed", type=int, default=0, help="GEPA's random seed")
    g.add_argument("--out", help="write the best policy file here (default: stdout)")
    a = p.parse_args(argv)

    from ..backends import LocalBackend, RayBackend
    from .gepa_adapter import openai_lm, optimize_policy

    with open(a.policy, encoding="utf-8") as f:
        seed_candidate = split_bundle(f.read())
    if a.backend == "ray":
        backend = RayBackend(a.blis, address=a.ray_address, ship_binary=True)
    else:
        backend = LocalBackend(a.blis, workers=a.workers)
    ev = PolicyEvaluator(a.experiment, args=a.blis_arg, seeds=[int(s) for s in a.seeds.split(",")],
                         horizon_s=a.horizon, timeout_s=a.timeout, backend=backend)
    lm = reflection_lm or openai_lm(a.model, a.api_base)
    try:
        # GEPA reports its iterations on stdout: keep stdout for the bundle.
        with contextlib.redirect_stdout(sys.stderr):
            res = optimize_policy(seed_candidate, a.workload, ev, lm, max_metric_calls=a.max_metric_calls,
                                  run_dir=a.run_dir, seed=a.seed)
    finally:
        ev.close()
    best = res.best_candidate
    scores = res.val_aggregate_scores
    print(f"gepa: {len(res.candidates)} candidates, best validation score {max(scores):.4f} "
          f"(seed candidate {scores[0]:.4f})", file=sys.stderr)
    text = assemble_bundle(best)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
