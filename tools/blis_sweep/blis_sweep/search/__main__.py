"""python -m blis_sweep.search gepa ...: GEPA evolves a policy bundle
against blis (docs/policy-search.md). OpenEvolve runs with its own command,
openevolve-run, on tools/blis_sweep/examples/openevolve/.

It cannot fail quietly. Before the reflection LM is called, blis resolves
each workload once (a refused experiment, flag or workload stops here, with
blis's error and, for an experiment file that has a workload of its own,
the lines to delete) and scores the seed bundle (a seed that fails on a
workload stops here). During the search each candidate that fails on a
workload is one line on stderr, and so is each failed LM call; an LM that
never answers, or fails 3 times in a row, ends the search.

Exit status: 0, the best bundle written; 1, the search could not run or
ended without a result (the reason on stderr: blis's first error, or the
LM's); 2, bad arguments. With --dry-run: 0 when every bundle scored on
every workload without an error, else 1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from .core import (MAX_TIMEOUT_S, CandidateError, PolicyEvaluator, SetupError, Workload, assemble_bundle, clip,
                   split_bundle)


def main(argv: list[str] | None = None, reflection_lm=None) -> int:
    p = argparse.ArgumentParser(prog="python -m blis_sweep.search",
                                description="Policy search with GEPA over blis (docs/policy-search.md)")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gepa", help="evolve a policy bundle with GEPA", description=__doc__.split("\n\n", 1)[1],
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("--policy", required=True, help="seed policy file (blis run --policy-config): its sections are the components")
    g.add_argument("--workload", action="append", default=[],
                   help="a built-in scenario name or a workload spec file; repeat for several (the train and validation "
                        "set); none: the experiment's own workload")
    g.add_argument("--experiment", help="experiment file (--config): deployment and run options")
    g.add_argument("--blis-arg", action="append", default=[], help="another blis run flag for every run, e.g. --blis-arg=--num-instances=4")
    g.add_argument("--seeds", default="42", help="comma-separated seeds; a workload's score is their mean")
    g.add_argument("--horizon", type=float, help="simulated seconds per run (default: the experiment's)")
    g.add_argument("--objective", choices=["slo", "fitness"], default="slo",
                   help="slo: the share of arrived requests that met their SLO (default); fitness: blis run's "
                        "--fitness-weights score, for workloads without SLO targets")
    g.add_argument("--fitness-weights", help='with --objective fitness, e.g. "throughput:0.5,p99_ttft:0.5"')
    g.add_argument("--timeout", type=float, default=300, help="seconds before a blis run is killed (it scores 0)")
    g.add_argument("--max-metric-calls", type=int, default=20, help="GEPA's budget: workload evaluations in all")
    g.add_argument("--model", help="reflection LM: a model name on --api-base (required unless --dry-run)")
    g.add_argument("--api-base", help="OpenAI-compatible endpoint (default: OpenAI's); the key is $OPENAI_API_KEY")
    g.add_argument("--run-dir", help="GEPA's state directory (resumes when it exists)")
    g.add_argument("--backend", choices=["local", "ray"], default="local")
    g.add_argument("--ray-address", help="Ray cluster to join (auto inside one); default: start a local one")
    g.add_argument("--workers", type=int, help="local backend: blis processes at once (default: the CPUs)")
    g.add_argument("--blis", help="the blis binary (default: blis on PATH)")
    g.add_argument("--seed", type=int, default=0, help="GEPA's random seed")
    g.add_argument("--out", help="write the best policy file here (default: stdout)")
    g.add_argument("--dry-run", action="store_true",
                   help="no LLM: score the seed bundle (--policy) and each --candidate on the workloads, print a "
                        "table on stdout")
    g.add_argument("--candidate", action="append", default=[],
                   help="with --dry-run: another bundle to score, a policy file or an OpenEvolve program (.yaml, "
                        "or .py run confined); repeat for several")
    a = p.parse_args(argv)

    if not a.dry_run and not a.model and reflection_lm is None:
        p.error("--model is required (or --dry-run to score bundles without an LLM)")
    if a.candidate and not a.dry_run:
        p.error("--candidate needs --dry-run")
    if a.objective == "fitness" and not a.fitness_weights:
        p.error("--objective fitness needs --fitness-weights")
    try:
        seeds = [int(s) for s in a.seeds.split(",")]
    except ValueError:
        p.error(f"--seeds {a.seeds!r}: comma-separated whole numbers")
    if a.max_metric_calls < 1:
        p.error("--max-metric-calls: at least 1")
    if not 0 < a.timeout <= MAX_TIMEOUT_S:
        p.error(f"--timeout {a.timeout:g}: seconds in (0, {MAX_TIMEOUT_S:g}]")
    if a.workers is not None and a.workers < 1:
        p.error(f"--workers {a.workers}: at least 1")
    for flag, path in (("--policy", a.policy), ("--experiment", a.experiment)):
        if path and not os.path.isfile(path):
            print(f"gepa: {flag} {path}: no such file", file=sys.stderr)
            return 1
    if a.out:
        err = _check_output(a.out)
        if err:
            print(f"gepa: --out {a.out}: {err}", file=sys.stderr)
            return 1
    workloads = [Workload.of(w) for w in a.workload] or [Workload("experiment", ())]

    from ..backends import LocalBackend, RayBackend

    try:
        with open(a.policy, encoding="utf-8") as f:
            seed_candidate = split_bundle(f.read())
        assemble_bundle(seed_candidate)
    except (CandidateError, OSError, UnicodeDecodeError, ValueError) as e:
        print(f"gepa: --policy {a.policy}: {clip(' '.join(str(e).split()), 600)}", file=sys.stderr)
        return 1
    except Exception as e:  # yaml.YAMLError
        print(f"gepa: --policy {a.policy}: not a policy file: {clip(' '.join(str(e).split()), 600)}", file=sys.stderr)
        return 1
    try:
        if a.backend == "ray":
            backend = RayBackend(a.blis, address=a.ray_address, ship_binary=True)
        else:
            backend = LocalBackend(a.blis, workers=a.workers)
    except FileNotFoundError as e:
        print(f"gepa: {e}", file=sys.stderr)
        return 1
    ev = PolicyEvaluator(a.experiment, args=a.blis_arg, seeds=seeds, horizon_s=a.horizon, timeout_s=a.timeout,
                         objective=a.objective, fitness_weights=a.fitness_weights, backend=backend)
    try:
        ev.check(workloads)
        if a.dry_run:
            return _dry_run(ev, a, seed_candidate, workloads)
        return _search(ev, a, seed_candidate, workloads, reflection_lm)
    except SetupError as e:
        print(f"gepa: {e}", file=sys.stderr)
        return 1
    finally:
        ev.close()


def _check_output(path: str) -> str | None:
    """Why ``path`` cannot take the result, found before the search runs."""
    if os.path.isdir(path):
        return "is a folder"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"its folder {os.path.dirname(path) or '.'} does not exist"
    if not os.access(folder, os.W_OK):
        return f"its folder {os.path.dirname(path) or '.'} is not writable"
    return None


def _dry_run(ev: PolicyEvaluator, a, seed_candidate, workloads) -> int:
    from .openevolve_eval import load_program

    bundles: list[tuple[str, str | None, str | None]] = [(a.policy, assemble_bundle(seed_candidate), None)]
    for path in a.candidate:
        try:
            bundles.append((path, load_program(path, a.timeout), None))
        except CandidateError as e:
            bundles.append((path, None, str(e)))
    rows = []
    failed = 0
    for name, bundle, err in bundles:
        outcomes = ev.evaluate_bundle(bundle, workloads) if bundle is not None else []
        if err is not None:
            rows += [(name, w.name, 0.0, f"invalid candidate: {err}") for w in workloads]
        else:
            rows += [(name, o.workload, o.score, o.error) for o in outcomes]
    wn = max(len("bundle"), *(len(r[0]) for r in rows))
    ww = max(len("workload"), *(len(r[1]) for r in rows))
    print(f"{'bundle':<{wn}}  {'workload':<{ww}}  score   error")
    for name, wl, score, err in rows:
        failed += err is not None
        line = f"{name:<{wn}}  {wl:<{ww}}  {score:.4f}"
        if err is not None:
            line += "  " + clip(" ".join(err.split()), 300)
        print(line)
    for name, _, _ in bundles:
        scores = [r[2] for r in rows if r[0] == name]
        print(f"gepa --dry-run: {name}: mean score {sum(scores) / len(scores):.4f} on {len(scores)} workload"
              f"{'s' if len(scores) != 1 else ''}", file=sys.stderr)
    if failed:
        print(f"gepa --dry-run: {failed} of {len(rows)} evaluations failed", file=sys.stderr)
    return 1 if failed else 0


def _search(ev: PolicyEvaluator, a, seed_candidate, workloads, reflection_lm) -> int:
    from .gepa_adapter import BlisGEPAAdapter, ConsoleLogger, GuardedLM, openai_lm, optimize_policy

    adapter = BlisGEPAAdapter(ev, report=sys.stderr)
    # The seed first, before any LLM call: a seed that fails on a workload
    # fails every candidate built from it (the adapter keeps its scores, so
    # GEPA does not run it again).
    eb = adapter.evaluate(workloads, dict(seed_candidate))
    bad = [o for o in eb.outputs if o["error"]]
    if bad:
        print(f"gepa: the seed bundle {a.policy} fails on {len(bad)} of {len(workloads)} workload"
              f"{'s' if len(workloads) != 1 else ''}; first: {bad[0]['workload']}: {bad[0]['error']}\n"
              f"  (python -m blis_sweep.search gepa --dry-run ... shows each; no LLM was called)", file=sys.stderr)
        return 1
    where = f" at {a.api_base}" if a.api_base else ""
    lm = GuardedLM(reflection_lm or openai_lm(a.model, a.api_base), where=where, report=sys.stderr)
    logger = ConsoleLogger(sys.stderr, a.run_dir)
    try:
        # GEPA reports its iterations on stdout: keep stdout for the bundle.
        with contextlib.redirect_stdout(sys.stderr):
            res = optimize_policy(seed_candidate, workloads, ev, lm, max_metric_calls=a.max_metric_calls,
                                  run_dir=a.run_dir, seed=a.seed, adapter=adapter, logger=logger,
                                  stop_callbacks=[lm.stop])
    finally:
        logger.close()
    if lm.stopped:
        print(f"gepa: stopped: {lm.stopped}" + (f" (--run-dir {a.run_dir} resumes)" if a.run_dir else ""),
              file=sys.stderr)
        return 1
    if adapter.ok == 0:
        print(f"gepa: every evaluation failed; the first: {adapter.first_error}", file=sys.stderr)
        return 1
    best = res.best_candidate
    scores = res.val_aggregate_scores
    print(f"gepa: {len(res.candidates)} candidates, best validation score {max(scores):.4f} "
          f"(seed candidate {scores[0]:.4f}); {adapter.failed} of {adapter.ok + adapter.failed} workload "
          f"evaluations failed, {lm.calls - lm.ok} of {lm.calls} LM calls", file=sys.stderr)
    text = assemble_bundle(best)
    if a.out:
        from ..sweep import _atomic_write

        _atomic_write(a.out, text.encode())
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
