"""Command line of the Python trainer: ``python -m physics_trainer fit TABLES_DIR...``.

The ``fit`` subcommand takes the flags of Go's ``calibrate fit`` with the same
names and defaults (cmd/calibrate/fit.go), fits the same coefficients and writes
the same coefficient file layout (with ``provenance.tool: physics_trainer``), and
``report.json`` (Go's report structure, see validate.py) in ``--report DIR``
(default ``<output>.report``). Boolean flags accept ``--flag``, ``--flag=true|false`` (as Go's pflag) and
``--no-flag``. Errors go to stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import List, Optional, Sequence

from . import compute_features as cf
from . import export_coeffs
from .extract_traces import TableError, load_trace
from .fit_coefficients import Config, FitError, Options, RidgeError, run
from .validate import summary

__all__ = ["main", "build_parser"]

_BOOL_FLAGS = ("enable-chunked-prefill", "enable-prefix-caching", "cpu-offloading", "alpha-correction",
               "compare-objectives")
_TRUE = {"1", "t", "true", "TRUE", "True", "T"}
_FALSE = {"0", "f", "false", "FALSE", "False", "F"}


class UsageError(Exception):
    pass


def _floats(s: str) -> List[float]:
    try:
        return [float(x) for x in s.split(",") if x.strip() != ""]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{s!r} is not a comma-separated list of numbers") from e


def _normalize_bools(argv: Sequence[str]) -> List[str]:
    """--flag=false -> --no-flag, --flag=true -> --flag (pflag's boolean syntax)."""
    out = []
    for a in argv:
        if a == "--":
            out.extend(argv[len(out):])
            break
        for name in _BOOL_FLAGS:
            pre = "--" + name + "="
            if a.startswith(pre):
                v = a[len(pre):]
                if v in _TRUE:
                    a = "--" + name
                elif v in _FALSE:
                    a = "--no-" + name
                else:
                    raise UsageError(f'--{name}: want true or false, got "{v}"')
                break
        out.append(a)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m physics_trainer",
        description="Python twin of blis's calibration: fit physics-model coefficients to the tables "
                    "'calibrate ingest' wrote, as 'calibrate fit' does (docs/fit.md).")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    d = Options()
    f = sub.add_parser(
        "fit", help="fit coefficients to ingested traces and write a coefficient file",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="""Fit the beta (step time) and alpha (queue delay) coefficients and the request
overheads to one configuration's traces, exactly as Go's 'calibrate fit' does
(docs/fit.md), and write the coefficient file (Go's schema; the simulator and
'calibrate predict' read it).

Each TABLES_DIR is one trace (a 'calibrate ingest' output directory) of the
configuration given by --model, --hardware, --tp and the vLLM flags; the traces
do not record it. --kv-blocks-gpu defaults to the trace's kv.blocks_total_gpu.
--configs FILE lists several configurations instead (same YAML as Go).""",
        epilog="""examples:
  python -m physics_trainer fit tables/ -o coeffs.yaml
  python -m physics_trainer fit tables/ --enable-chunked-prefill=false --lambdas 0.01,1 -o coeffs.yaml""")
    f.add_argument("tables", nargs="*", metavar="TABLES_DIR", help="calibrate ingest output directories")
    f.add_argument("--model", default=None, help="shipped model name or path to a HuggingFace config.json "
                                                 "(default llama-3.1-8b)")
    f.add_argument("--hardware", default=None, help="shipped hardware name or path to a hardware spec JSON "
                                                    "(default h100-sxm)")
    f.add_argument("--tp", type=int, default=None, help="tensor-parallel degree (default 1)")
    k = cf.VLLMKnobs()
    f.add_argument("--max-num-seqs", type=int, default=None, help=f"vLLM --max-num-seqs (default {k.max_num_seqs})")
    f.add_argument("--max-num-batched-tokens", type=int, default=None,
                   help=f"vLLM --max-num-batched-tokens (default {k.max_batched_tokens})")
    f.add_argument("--block-size", type=int, default=None,
                   help=f"vLLM --block-size, tokens per KV block (default {k.block_size_tokens})")
    f.add_argument("--gpu-memory-utilization", type=float, default=k.gpu_memory_utilization,
                   help="vLLM --gpu-memory-utilization (default %(default)s)")
    f.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction,
                   default=k.chunked_prefill_enabled, help="vLLM --enable-chunked-prefill (default on)")
    f.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction,
                   default=k.prefix_caching_enabled, help="vLLM --enable-prefix-caching (default on)")
    f.add_argument("--cpu-offloading", action=argparse.BooleanOptionalAction, default=None,
                   help="deprecated: KV offloading is on exactly when --kv-blocks-cpu > 0, as in blis run")
    f.add_argument("--kv-blocks-gpu", type=int, default=None,
                   help="GPU KV blocks; 0 (default) takes the traces' kv.blocks_total_gpu")
    f.add_argument("--allow-kv-mismatch", action="store_true",
                   help=f"fit even when a trace's GPU KV blocks (kv.blocks_total_gpu) are more than {KV_CAPACITY_FACTOR:g}x "
                        "from what the model, hardware, TP and --gpu-memory-utilization hold (by default a sign of the "
                        "wrong --model or --hardware: refused)")
    f.add_argument("--kv-blocks-cpu", type=int, default=0,
                   help="CPU KV blocks for offload to host memory (0: no CPU tier; > 0 turns KV offloading on, "
                        "as in blis run)")
    f.add_argument("--configs", default="", help="YAML file listing several configurations "
                                                 "(instead of TABLES_DIR and the configuration flags)")
    f.add_argument("-o", "--output", default="coefficients.yaml", help="coefficient file to write "
                                                                        "(default %(default)s)")
    f.add_argument("--report", default="", help="directory for report.json, the validation report (default: the "
                                                "output's name + .report); Go's report.md and plots are not written")
    f.add_argument("--lambdas", type=_floats, default=d.lambdas, help="ridge penalties to search, comma-separated "
                                                                     "(default 0.001,0.01,0.1,1,10,100)")
    f.add_argument("--gammas", type=_floats, default=d.gammas,
                   help="preemption EMA factors to search, each in (0,1] (default 0.1,0.3,0.5)")
    f.add_argument("--folds", type=int, default=d.folds, help="temporal cross-validation folds (default %(default)s)")
    f.add_argument("--holdout", type=float, default=d.holdout,
                   help="share of each trace, at its end, held out for validation (default %(default)s)")
    f.add_argument("--warmup-steps", type=int, default=d.warmup_steps,
                   help="leave out steps with id up to this (engine warm-up) (default %(default)s)")
    f.add_argument("--outlier-factor", type=float, default=d.outlier_factor,
                   help="leave out steps slower than this × the median of steps with as many tokens "
                        "(0: keep all) (default %(default)s)")
    f.add_argument("--preempt-heavy", type=float, default=d.preempt_heavy,
                   help="a step is preemption-heavy above this share of running requests preempted "
                        "(default %(default)s)")
    f.add_argument("--preempt-weight", type=float, default=d.preempt_weight,
                   help="sample weight of preemption-heavy steps and of requests queued behind them "
                        "(default %(default)s)")
    f.add_argument("--beta-target", default=d.beta_target, help="step-time source: auto, step_pairs or journey "
                                                               "(default %(default)s)")
    f.add_argument("--feature-spec", default=d.spec, help="beta feature spec: 1.0, 2.0 or 3.0 (default %(default)s)")
    f.add_argument("--objective", default=d.objective,
                   help="beta fit objective: relative (weights 1/t^2) or absolute (default %(default)s)")
    f.add_argument("--compare-objectives", action=argparse.BooleanOptionalAction, default=d.compare_objectives,
                   help="also fit beta under the other objective and report its hold-out errors beside the chosen "
                        "one's (default on)")
    f.add_argument("--min-pairs", type=int, default=d.min_pairs,
                   help="with --beta-target auto, add journey-reconstructed targets to a trace with fewer "
                        "adjacent sampled steps (default %(default)s)")
    f.add_argument("--alpha-correction", action=argparse.BooleanOptionalAction, default=d.alpha_correction,
                   help="subtract the scheduler overhead from alpha targets before the fit (added back to "
                        "base_bias) (default on)")
    f.add_argument("--notes", default="", help="free text added to the file's provenance notes")
    f.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


def _offloading(args) -> bool:
    """Go's applyOffloadRule: offloading is on exactly when --kv-blocks-cpu > 0; the deprecated
    --cpu-offloading must agree."""
    if args.kv_blocks_cpu < 0:
        raise UsageError(f"--kv-blocks-cpu must be >= 0 (0: no CPU tier), got {args.kv_blocks_cpu}")
    on = args.kv_blocks_cpu > 0
    if args.cpu_offloading is not None and bool(args.cpu_offloading) != on:
        raise UsageError(f"--cpu-offloading={str(bool(args.cpu_offloading)).lower()} disagrees with --kv-blocks-cpu "
                         f"{args.kv_blocks_cpu}: KV offloading is on exactly when --kv-blocks-cpu > 0 "
                         "(--cpu-offloading is deprecated)")
    return on


def _knobs(args, kv_gpu: int) -> "cf.VLLMKnobs":
    d = cf.VLLMKnobs()
    return cf.VLLMKnobs(
        max_num_seqs=args.max_num_seqs if args.max_num_seqs is not None else d.max_num_seqs,
        max_batched_tokens=args.max_num_batched_tokens if args.max_num_batched_tokens is not None
        else d.max_batched_tokens,
        chunked_prefill_enabled=bool(args.enable_chunked_prefill),
        cpu_offloading=_offloading(args),
        block_size_tokens=args.block_size if args.block_size is not None else d.block_size_tokens,
        total_kv_blocks_gpu=kv_gpu,
        total_kv_blocks_cpu=args.kv_blocks_cpu,
        gpu_memory_utilization=args.gpu_memory_utilization,
        prefix_caching_enabled=bool(args.enable_prefix_caching),
    )


def _from_dir(base: str, ref: str) -> str:
    """Go's fromDir: a relative path of the --configs file, from the file's folder (filepath.Join cleans)."""
    return ref if os.path.isabs(ref) else os.path.normpath(os.path.join(base, ref))


def _read_manifest(path: str):
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            m = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as e:
        raise UsageError(f"--configs {path}: {e}") from e
    if not isinstance(m, dict) or set(m) - {"configs"} or not m.get("configs"):
        raise UsageError(f"--configs {path}: no configs listed (want a top-level 'configs' list)")
    base = os.path.dirname(path)
    out, seen = [], set()
    for i, c in enumerate(m["configs"]):
        where = f"--configs {path}: configs[{i}]"
        if not isinstance(c, dict) or set(c) - {"name", "tables", "model", "hardware", "tp", "vllm"}:
            raise UsageError(f"{where}: unknown keys (want name, tables, model, hardware, tp, vllm)")
        if not c.get("name") or not c.get("model") or not c.get("hardware") or not c.get("tables"):
            raise UsageError(f"{where}: name, tables, model and hardware are required")
        if c["name"] in seen:
            raise UsageError(f"{where}: duplicate name {c['name']!r}")
        seen.add(c["name"])
        base_knobs = cf.VLLMKnobs()
        try:
            knobs = cf.VLLMKnobs.from_dict(c.get("vllm") or {}, base=base_knobs)
        except Exception as e:
            raise UsageError(f"{where}.vllm: {e}") from e
        dirs = [_from_dir(base, t) for t in c["tables"]]
        # A model or hardware value is a path or a shipped name: a file next to the YAML file is read, else the
        # shipped name of its last path element (load_model), never a file relative to the working directory.
        model, hardware = _from_dir(base, c["model"].strip()), _from_dir(base, c["hardware"].strip())
        out.append((c["name"], model, hardware, int(c.get("tp") or 1), knobs, dirs))
    return out


def _fit(args, argv: Sequence[str]) -> int:
    start = time.monotonic()

    def log(msg: str) -> None:
        if not args.quiet:
            print(f"[{time.monotonic() - start:5.1f}s] {msg}", file=sys.stderr)

    opt = Options(lambdas=args.lambdas, gammas=args.gammas, folds=args.folds, holdout=args.holdout,
                  warmup_steps=args.warmup_steps, outlier_factor=args.outlier_factor,
                  preempt_heavy=args.preempt_heavy, preempt_weight=args.preempt_weight,
                  beta_target=args.beta_target, min_pairs=args.min_pairs, alpha_correction=args.alpha_correction,
                  spec=args.feature_spec, objective=args.objective,
                  compare_objectives=args.compare_objectives, progress=log)
    try:
        opt.validate()
    except FitError as e:
        raise UsageError("--" + str(e)) from e
    if args.configs and args.tables:
        raise UsageError("give either TABLES_DIR arguments or --configs, not both")
    if args.configs:
        for name in ("model", "hardware", "tp", "max_num_seqs", "max_num_batched_tokens", "block_size",
                     "kv_blocks_gpu"):
            if getattr(args, name) is not None:
                raise UsageError(f"--{name.replace('_', '-')}: with --configs, each configuration's settings "
                                 "come from the file")
        specs = _read_manifest(args.configs)
    elif not args.tables:
        raise UsageError("no TABLES_DIR given (the output directory of calibrate ingest), and no --configs")
    else:
        model = args.model or "llama-3.1-8b"
        specs = [(model, model, args.hardware or "h100-sxm", args.tp if args.tp is not None else 1,
                  None, list(args.tables))]
    cfgs = []
    for name, model, hardware, tp, knobs, dirs in specs:
        traces = []
        for d in dirs:
            log(f"reading {d}")
            tr = load_trace(d)
            log(f"  {tr.n_steps} steps, {len(tr.snapshots['step_id'])} snapshots, {len(tr.requests['prompt'])} "
                f"requests, {len(tr.scheduled['step'])} journey SCHEDULED, {len(tr.kv['step'])} KV events")
            if len(tr.instances) > 1:
                log(f"  {len(tr.instances)} engines (instances {', '.join(tr.instances)}), each fitted as a trace of "
                    "its own")
            traces.append(tr)
        if knobs is None:
            knobs = _knobs(args, args.kv_blocks_gpu or 0)
        given = knobs
        trace_kv = next((int(tr.steps["kv_total"][0]) for tr in traces if tr.n_steps > 0), 0)
        if knobs.total_kv_blocks_gpu == 0 and trace_kv:
            knobs = cf.VLLMKnobs(**{**knobs.to_dict(), "total_kv_blocks_gpu": trace_kv})
        try:
            m = cf.load_model(model)
        except Exception as e:
            raise UsageError(f"{name}: model: {e}") from e
        for note in m.notes:  # warnings, shown even with --quiet
            print(f"note: {note}", file=sys.stderr)
        try:
            h = cf.load_hardware(hardware)
        except Exception as e:
            raise UsageError(f"{name}: hardware: {e}") from e
        try:
            pc = cf.new_physics_config(m, h, tp, knobs)
        except Exception as e:
            raise UsageError(f"{name}: {e}") from e
        if trace_kv > 0 and not args.allow_kv_mismatch:
            _check_kv_capacity(name, m, h, tp, given, trace_kv)
        cfgs.append(Config(name=name, phys=pc, traces=traces))
    command = "python -m physics_trainer " + " ".join(argv)
    res = run(cfgs, opt, command=command, notes=args.notes)
    export_coeffs.write(res.file, args.output)
    report_dir = args.report or os.path.splitext(args.output)[0] + ".report"
    os.makedirs(report_dir, exist_ok=True)
    report = os.path.join(report_dir, "report.json")
    with open(report, "w", encoding="utf-8") as fh:
        json.dump(res.report, fh, indent=2, default=float)
        fh.write("\n")
    print(f"wrote {args.output} and {report}")
    print(summary(res.report))
    log("done")
    return 0


# How far (either way) a trace's GPU KV blocks may be from what the
# configuration holds before fit refuses it as another configuration's
# (Go: cmd/calibrate KVCapacityFactor).
KV_CAPACITY_FACTOR = 2.0


def _check_kv_capacity(name, m, h, tp, knobs, trace_kv):
    """Refuses traces whose kv.blocks_total_gpu is more than KV_CAPACITY_FACTOR
    from the blocks the model, hardware, TP and memory utilization hold (Go's
    checkKVCapacity, same message)."""
    k = cf.VLLMKnobs(**{**knobs.to_dict(), "total_kv_blocks_gpu": 0})
    what = f"model {m.name} on {h.name} at TP {tp} with gpu_memory_utilization {k.gpu_memory_utilization:g}"
    try:
        implied = int(cf.new_physics_config(m, h, tp, k).knobs.total_kv_blocks_gpu)
        why = None
    except Exception as e:  # the model does not fit the GPU
        implied, why = 0, e
    if implied <= 0:
        raise UsageError(f"configuration {name}: the traces report {trace_kv} GPU KV blocks (kv.blocks_total_gpu), "
                         f"but {what} holds none ({why}): give the server's --model, --hardware, --tp and "
                         "--gpu-memory-utilization, or --allow-kv-mismatch to fit anyway")
    r = trace_kv / implied
    if r > KV_CAPACITY_FACTOR or r < 1 / KV_CAPACITY_FACTOR:
        raise UsageError(f"configuration {name}: the traces report {trace_kv} GPU KV blocks (kv.blocks_total_gpu), "
                         f"but {what} holds {implied} ({1 / r:.2f}× the traces' figure): more than "
                         f"{KV_CAPACITY_FACTOR:g}× apart, so the traces are another configuration's; give the server's "
                         "--model, --hardware, --tp and --gpu-memory-utilization, or --allow-kv-mismatch to fit anyway")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status (0, or 2 on any error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(_normalize_bools(argv))
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code or 0)
    try:
        if args.command == "fit":
            return _fit(args, argv)
    except (UsageError, TableError, FitError, RidgeError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    parser.print_usage(sys.stderr)
    return 2
