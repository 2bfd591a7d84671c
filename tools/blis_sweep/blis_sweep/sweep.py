"""A blis sweep in shards on a backend, merged in index order.

``run_sweep(args, backend)`` asks the local binary for the sweep's size
(``blis sweep ARGS --emit plan``), runs shard i of N as the job ``blis sweep
ARGS --shard i/N --workers 1 --quiet`` (its rows, CSV, on stdout), and
concatenates the shards' rows in index order under one header: shards are
contiguous runs in run order, so the table equals what ``blis sweep ARGS``
writes on one machine, byte for byte. For a Parquet table or a figure it
then runs ``blis sweep ARGS --rows MERGED.csv --out ...`` here, which runs
nothing (every row is there) and writes them.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Sequence

from .backends import Backend, Job, LocalBackend, find_blis

# Arguments the driver sets itself for each shard.
_DRIVER_FLAGS = ("--shard", "--out", "--workers", "--resume", "--rows", "--emit", "--points", "--plot", "--plot-metric", "--plot-x", "-q", "--quiet")


class SweepError(RuntimeError):
    """A shard that failed as a whole (not a run that failed: that is a row)."""


@dataclass
class SweepResult:
    table: bytes  # the merged CSV
    runs: int
    failed: int  # rows with status error
    shards: int
    wall_s: float

    @property
    def exit_status(self) -> int:
        """blis sweep's exit status for this table: 0, or 100 + the failed runs (at most 199)."""
        return 0 if self.failed == 0 else 100 + min(self.failed, 99)


def plan(args: Sequence[str], blis: str | None = None) -> dict:
    """The sweep's size and columns (blis sweep --emit plan)."""
    p = subprocess.run([find_blis(blis), "sweep", *args, "--emit", "plan"], capture_output=True, text=True)
    if p.returncode != 0:
        raise SweepError(p.stderr.strip() or f"blis sweep --emit plan exited with {p.returncode}")
    return json.loads(p.stdout)


def _check_args(args: Sequence[str]) -> None:
    for a in args:
        name = a.split("=", 1)[0]
        if name in _DRIVER_FLAGS:
            raise ValueError(f"{name}: the driver sets it for each shard; give the table with out= (and plot= for the figure)")


_TABLE_SUFFIXES = (".csv", ".parquet")
_FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def check_outputs(out: str | None, plot: Sequence[str] = ()) -> None:
    """Raise ValueError, naming the path as given, when the table (``out``)
    or the figure (``plot``'s ``--plot FILE``) cannot be written: checked
    before any shard runs."""
    paths = []
    if out is not None:
        paths.append(("--out", out, _TABLE_SUFFIXES, "a table is .csv or .parquet"))
    plot = list(plot)
    for i, flag in enumerate(plot[:-1]):
        if flag == "--plot":
            paths.append(("--plot", plot[i + 1], _FIGURE_SUFFIXES, "a figure is .png, .svg or .pdf"))
        if flag == "--points":
            paths.append(("--points", plot[i + 1], _TABLE_SUFFIXES, "a table is .csv or .parquet"))
    for flag, path, suffixes, what in paths:
        if not path:
            raise ValueError(f"{flag}: give a file")
        if not path.lower().endswith(suffixes):
            raise ValueError(f"{flag} {path}: {what}")
        if os.path.isdir(path):
            raise ValueError(f"{flag} {path}: is a folder")
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):
            raise ValueError(f"{flag} {path}: its folder {folder} does not exist")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ValueError(f"{flag} {path}: its folder {folder} is not writable")
        if os.path.exists(path) and not os.access(path, os.W_OK):
            raise ValueError(f"{flag} {path}: not writable")


def prepare(args: Sequence[str], out: str | None = None, plot: Sequence[str] = (), blis: str | None = None) -> dict:
    """Everything checked before a shard runs (or a Ray cluster starts):
    the arguments, the outputs, and the sweep itself (its grid file, keys
    and values: ``blis sweep --emit plan``). Returns the plan."""
    _check_args(args)
    check_outputs(out, plot)
    return plan(args, find_blis(blis))


def run_sweep(args: Sequence[str], backend: Backend | None = None, *, shards: int | None = None, out: str | None = None,
              plot: Sequence[str] = (), blis: str | None = None, progress=sys.stderr, size: dict | None = None) -> SweepResult:
    """Run ``blis sweep ARGS`` in shards on ``backend`` (default: a local
    process pool) and merge them.

    ``shards`` defaults to four per slot of the backend, at most one per run.
    ``out`` writes the table (``.csv``, or ``.parquet`` through the local
    binary); ``plot`` are blis sweep's figure flags (``["--plot", "f.png"]``).
    ``progress`` (a text stream, or None) gets a line per shard done.
    The arguments, the outputs and the plan are checked first
    (:func:`prepare`; ``size``: its result, when the caller checked already).
    """
    start = time.monotonic()
    local = find_blis(blis)
    if size is None:
        size = prepare(args, out, plot, local)
    runs = size["runs"]
    own = backend is None
    backend = backend or LocalBackend(local)
    try:
        n = shards or max(1, min(runs, 4 * backend.slots))
        jobs = [Job(args=("sweep", *args, "--shard", f"{i}/{n}", "--workers", "1", "--quiet")) for i in range(n)]
        parts: list[bytes | None] = [None] * n
        done = 0
        for i, res in backend.map(jobs):
            if res.returncode != 0 and not 101 <= res.returncode <= 199:
                raise SweepError(f"shard {i}/{n} exited with {res.returncode}: {res.stderr.decode(errors='replace').strip()}")
            parts[i] = res.stdout
            done += 1
            if progress is not None:
                el = time.monotonic() - start
                print(f"blis-sweep: {done}/{n} shards, {el:.1f} s, ETA {el / done * (n - done):.1f} s", file=progress, flush=True)
    finally:
        if own:
            backend.close()
    table = merge(parts)
    failed = _failed(table)
    result = SweepResult(table, runs, failed, n, 0.0)
    if out is not None or plot:
        _write(table, args, local, out, plot)
    result.wall_s = time.monotonic() - start
    return result


def merge(parts: Sequence[bytes]) -> bytes:
    """Shards' CSV tables (each a header line and its rows), in index order,
    as one table: shard i of n holds the runs r with r mod n = i, one line
    each (blis writes a row on one line), so the table is the first header,
    then the shards' rows taken in turn."""
    header = None
    rows: list[list[bytes]] = []
    for i, p in enumerate(parts):
        head, sep, body = p.partition(b"\n")
        if not sep:
            raise SweepError(f"shard {i}: no header line in its output")
        if header is None:
            header = head
        elif head != header:
            raise SweepError(f"shard {i}: its columns differ from shard 0's")
        rows.append(body.splitlines(keepends=True))
    if header is None:
        raise SweepError("no shard")
    n, total = len(rows), sum(len(r) for r in rows)
    for i, r in enumerate(rows):
        want = 0 if i >= total else (total - 1 - i) // n + 1
        if len(r) != want:
            raise SweepError(f"shard {i} of {n}: {len(r)} rows, want {want} of {total}")
    return header + b"\n" + b"".join(rows[r % n][r // n] for r in range(total))


def _failed(table: bytes) -> int:
    rows = csv.DictReader(io.StringIO(table.decode()))
    return sum(1 for r in rows if r["status"] != "ok")


def _write(table: bytes, args: Sequence[str], blis: str, out: str | None, plot: Sequence[str]) -> None:
    if out is not None and out.lower().endswith(".csv") and not plot:
        _atomic_write(out, table)
        return
    with tempfile.TemporaryDirectory(prefix="blis-sweep-") as d:
        rows = os.path.join(d, "merged.csv")
        with open(rows, "wb") as f:
            f.write(table)
        # Without --out, blis prints the table on stdout (dropped here).
        dest = ["--out", out] if out is not None else []
        p = subprocess.run([blis, "sweep", *args, "--rows", rows, *dest, *plot, "--quiet"], capture_output=True, text=True)
        if p.returncode != 0 and not 101 <= p.returncode <= 199:
            what = " and ".join(x for x in (out, plot[plot.index("--plot") + 1] if "--plot" in plot else None) if x)
            err = p.stderr.strip().replace(rows, "(the merged shards)").replace(d + os.sep, "")
            raise SweepError(f"writing {what}: {err}")


def _atomic_write(path: str, data: bytes) -> None:
    if os.path.exists(path) and not os.path.isfile(path):  # a FIFO or a device: write into it, never replace it
        with open(path, "wb") as f:
            f.write(data)
        return
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tmp-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
