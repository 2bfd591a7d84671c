"""python -m blis_sweep: blis sweep's arguments after --, run in shards.

    python -m blis_sweep --backend ray --out table.parquet -- --config exp.yaml --grid grid.yaml

The exit status is blis sweep's: 0, or 100 + the runs that failed (at most
199); 1 when a shard failed as a whole.
"""

from __future__ import annotations

import argparse
import sys

from .backends import LocalBackend, RayBackend
from .sweep import SweepError, prepare, run_sweep


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m blis_sweep", description=__doc__.split("\n\n")[0],
                                 epilog="Everything after -- goes to blis sweep (docs/sweeps.md).")
    ap.add_argument("--backend", choices=["local", "ray"], default="local", help="local: a pool of local processes (default); ray: Ray tasks")
    ap.add_argument("--blis", default=None, help="the blis binary (default: blis on PATH)")
    ap.add_argument("--workers", type=int, default=None, help="local: blis processes at once (default: the CPUs)")
    ap.add_argument("--address", default=None, help="ray: the cluster to join (auto under `ray job submit`; ray://HOST:10001); default: start a local one")
    ap.add_argument("--num-cpus", type=int, default=None, help="ray: the CPUs of a local cluster started here (default: the machine's)")
    ap.add_argument("--ship-binary", action="store_true", help="ray: send this blis binary to the workers through the object store")
    ap.add_argument("--working-dir", default=None, help="ray: upload this folder to every node as the jobs' working directory (Ray's runtime_env working_dir): the binary and the files the sweep reads, by relative paths")
    ap.add_argument("--shards", type=int, default=None, help="shards (default: 4 per CPU of the backend, at most one per run)")
    ap.add_argument("--out", default=None, help="the table, .csv or .parquet (default: CSV on stdout)")
    ap.add_argument("--points", default=None, help="one row per point, .csv or .parquet: each metric's mean over the seeds with its 95 %% interval (blis sweep --points)")
    ap.add_argument("--plot", default=None, help="a figure, .png, .svg or .pdf (blis sweep --plot)")
    ap.add_argument("--plot-metric", default=None)
    ap.add_argument("--plot-x", default=None)
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- then blis sweep's arguments")
    o = ap.parse_args(argv)
    for flag, v in (("--workers", o.workers), ("--num-cpus", o.num_cpus), ("--shards", o.shards)):
        if v is not None and v < 1:
            ap.error(f"{flag} {v}: at least 1")
    args = o.args[1:] if o.args[:1] == ["--"] else o.args
    plot = []
    for flag, v in (("--points", o.points), ("--plot", o.plot), ("--plot-metric", o.plot_metric), ("--plot-x", o.plot_x)):
        if v is not None:
            plot += [flag, v]
    try:
        # The arguments, outputs and grid before any backend starts (a Ray
        # cluster takes seconds to start).
        size = prepare(args, o.out, plot, o.blis)
        if o.backend == "ray":
            # A cluster started here: no dashboard; one joined: as it is.
            init = {"include_dashboard": False} if o.address is None else {}
            if o.num_cpus:
                init["num_cpus"] = o.num_cpus
            if o.working_dir:
                init["runtime_env"] = {"working_dir": o.working_dir}
            backend = RayBackend(o.blis, address=o.address, ship_binary=o.ship_binary, init_kwargs=init)
        else:
            backend = LocalBackend(o.blis, o.workers)
        try:
            res = run_sweep(args, backend, shards=o.shards, out=o.out, plot=plot, blis=o.blis,
                            progress=None if o.quiet else sys.stderr, size=size)
        finally:
            backend.close()
    except (SweepError, ValueError, FileNotFoundError) as e:
        print(f"blis-sweep: {e}", file=sys.stderr)
        return 1
    if o.out is None:
        sys.stdout.buffer.write(res.table)
        sys.stdout.flush()
    if not o.quiet:
        print(f"blis-sweep: {res.runs} runs in {res.shards} shards on {o.backend}, {res.failed} failed, {res.wall_s:.1f} s wall", file=sys.stderr)
    return res.exit_status
