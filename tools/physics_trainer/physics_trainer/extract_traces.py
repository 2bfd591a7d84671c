"""Read the Parquet tables that ``calibrate ingest`` writes, as Go's ``fit.LoadTrace`` does.

One *trace* is one ingest output directory (docs/ingest-tables.md). ``load_trace``
reads ``steps`` (required), ``request_snapshots``, ``requests``, ``journey_events``
and ``kv_events`` (each optional) and returns their columns as numpy arrays, with
the same row filters and drop counts as ``fit/trace.go``:

* steps: a row with a null in any of the integer columns, or a null / NaN / Inf
  ``kv_usage_gpu_ratio``, is dropped and counted under the first such column
  ("step row without <column>"); ``has_rich_snapshots`` null counts as false.
* request_snapshots: a row without a phase, token or block count, or with a phase
  other than PREFILL / DECODE, is dropped (its step is then treated as non-rich).
* requests: nulls become NaN (times in seconds) or -1 (counts, nanosecond times);
  a null engine id becomes "".
* journey_events: only ``journey.SCHEDULED`` rows with a step and a monotonic
  nanosecond time, sorted by (step, time).
* kv_events: only ``TransferCompleted`` and ``CacheLoadCommitted`` rows; those
  without ``block_count`` or ``scheduler_step`` are dropped and counted.
* instance (steps, request_snapshots, requests, journey_events; optional, absent
  before schema version 2): the engine of a cluster's trace. ``Trace.instances``
  are the distinct values, sorted (``[""]`` without the column); ``Trace.inst``
  holds, per table, each kept row's index into them. ``journey_events`` rows are
  then sorted by (instance, step, time).

Columns are checked before they are read: a missing column or one of the wrong
Arrow type is a :class:`TableError` naming the file and the column, as Go's
``internal/pqread`` does (Go wants int64, double, bool and string exactly).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "TableError",
    "Trace",
    "InputFile",
    "load_trace",
    "add_count",
    "STEP_INT_COLUMNS",
]


class TableError(ValueError):
    """A table cannot be read: missing file, missing column, wrong type, wrong table."""


@dataclass(frozen=True)
class InputFile:
    """One table file read: its path (as Go writes it), SHA-256 and row count."""

    path: str
    sha256: str
    rows: int


# (Parquet column, key in Trace.steps), in the order Go reads and counts them.
STEP_INT_COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("step_id", "id"),
    ("step_ts_start_ns", "ts_start_ns"),
    ("queue_running_depth", "running"),
    ("queue_waiting_depth", "waiting"),
    ("batch_num_prefill_reqs", "num_prefill"),
    ("batch_num_decode_reqs", "num_decode"),
    ("batch_scheduled_tokens", "scheduled"),
    ("batch_prefill_tokens", "prefill_tok"),
    ("batch_decode_tokens", "decode_tok"),
    ("batch_num_finished", "num_finished"),
    ("batch_num_preempted", "num_preempted"),
    ("kv_blocks_total_gpu", "kv_total"),
    ("kv_blocks_free_gpu", "kv_free"),
)

_ARROW_TYPES = {
    "int64": pa.int64(),
    "double": pa.float64(),
    "bool": pa.bool_(),
    "string": pa.string(),
}


def add_count(counts: List[List], reason: str, n: int) -> None:
    """Add n to reason in an ordered list of [reason, count] (Go's addCount)."""
    n = int(n)
    if n == 0:
        return
    for c in counts:
        if c[0] == reason:
            c[1] += n
            return
    counts.append([reason, n])


@dataclass
class Trace:
    """What the fit reads from one ``calibrate ingest`` output directory.

    Every table is a dict of equal-length numpy arrays:

    steps
        id, ts_start_ns, running, waiting, num_prefill, num_decode, scheduled,
        prefill_tok, decode_tok, num_finished, num_preempted, kv_total, kv_free
        (int64), kv_usage (float64), rich (bool). Table order, filtered.
    snapshots
        step_id (int64), request (object: str), prefill (bool), prompt, computed,
        scheduled, blocks_allocated, blocks_cached (int64). Table order, filtered.
    requests
        engine_id (object: str, "" when null), prompt, output, queued_ns,
        first_scheduled_ns (int64, -1 when null), arrived_s, queued_s,
        finished_s, departed_s, first_scheduled_s (float64, NaN when null).
    scheduled
        step, ts_ns (int64): journey.SCHEDULED events sorted by (step, ts_ns).
    kv
        type, medium (object: str, medium "" when null), blocks, step (int64),
        success (bool).

    A cluster's trace holds several engines (``instances``); ``inst`` maps
    "steps", "snapshots", "requests" and "scheduled" to each row's index into
    ``instances`` (int64). Steps are ordered, paired and joined within one
    engine only: ``fit_coefficients.trace_engines`` splits the trace.
    """

    dir: str
    steps: Dict[str, np.ndarray]
    snapshots: Dict[str, np.ndarray]
    requests: Dict[str, np.ndarray]
    scheduled: Dict[str, np.ndarray]
    kv: Dict[str, np.ndarray]
    has_kv: bool = False
    inputs: List[InputFile] = field(default_factory=list)
    dropped: List[List] = field(default_factory=list)  # [reason, count], in first-seen order
    instances: List[str] = field(default_factory=lambda: [""])
    inst: Dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_steps(self) -> int:
        return len(self.steps["id"])


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class _Table:
    """One Parquet table file, its schema checked column by column."""

    def __init__(self, path: str, name: str):
        self.path = path
        try:
            self.file = pq.ParquetFile(path)
        except Exception as e:  # pyarrow raises several types for a bad file
            raise TableError(f"{path}: not a readable Parquet file: {e}") from e
        self.schema = self.file.schema_arrow
        meta = self.schema.metadata or {}
        got = meta.get(b"blis.table", b"").decode("utf-8", "replace")
        if got and got != name:
            raise TableError(f"{path} holds the {got!r} table, want {name!r}")
        self.rows = self.file.metadata.num_rows

    def read(self, columns: Dict[str, str]) -> Dict[str, pa.ChunkedArray]:
        """Read the named columns (name -> 'int64'|'double'|'bool'|'string'),
        checking that each exists with exactly that type."""
        for col, typ in columns.items():
            idx = self.schema.get_all_field_indices(col)
            if not idx:
                raise TableError(f"{self.path}: no column {col} (required, type {typ})")
            got = self.schema.field(idx[0]).type
            if len(idx) > 1 or got != _ARROW_TYPES[typ]:
                raise TableError(f"{self.path}: column {col} has type {got}, want {typ}")
        try:
            t = self.file.read(columns=list(columns))
        except Exception as e:
            raise TableError(f"{self.path}: corrupt Parquet file: {e}") from e
        return {c: t.column(c) for c in columns}


def _valid(col: pa.ChunkedArray) -> np.ndarray:
    if col.null_count == 0:
        return np.ones(len(col), dtype=bool)
    return np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _values(col: pa.ChunkedArray, fill) -> np.ndarray:
    if col.null_count:
        col = col.fill_null(fill)
    out = col.to_numpy()
    if out.dtype == object or out.dtype.kind in "US":
        return np.asarray(out, dtype=object)
    return np.ascontiguousarray(out)


def _open(dir_: str, name: str, required: bool) -> Tuple[Optional[_Table], Optional[InputFile]]:
    path = os.path.normpath(os.path.join(dir_, name + ".parquet"))
    if not os.path.exists(path):
        if not required:
            return None, None
        raise TableError(f"{path}: no such file (is {dir_} a calibrate ingest output directory?)")
    if not os.path.isfile(path):
        raise TableError(f"{path}: not a file (is {dir_} a calibrate ingest output directory?)")
    t = _Table(path, name)
    return t, InputFile(path=path, sha256=_sha256(path), rows=int(t.rows))


def _instance(t: "_Table", names: Dict[str, np.ndarray], key: str, ok: np.ndarray) -> None:
    """The instance ids of the kept rows (``ok``) of table t, or "" without the column."""
    if t.schema.get_all_field_indices("instance"):
        v = _values(t.read({"instance": "string"})["instance"], "")
    else:
        v = np.full(t.rows, "", dtype=object)
    names[key] = np.asarray(v, dtype=object)[ok]


def _set_instances(tr: Trace, names: Dict[str, np.ndarray]) -> None:
    """Go's Trace.setInstances: sorted distinct ids, per-row indices."""
    found = set()
    for v in names.values():
        found.update(v.tolist())
    tr.instances = sorted(found) or [""]
    index = {name: i for i, name in enumerate(tr.instances)}
    tr.inst = {}
    for key, length in (("steps", len(tr.steps["id"])), ("snapshots", len(tr.snapshots["step_id"])),
                        ("requests", len(tr.requests["prompt"])), ("scheduled", len(tr.scheduled["step"]))):
        v = names.get(key)
        if v is None:
            tr.inst[key] = np.zeros(length, dtype=np.int64)
        else:
            tr.inst[key] = np.asarray([index[x] for x in v.tolist()], dtype=np.int64).reshape(length)
    if len(tr.instances) > 1:
        # (step, time) order within each engine: Go sorts by (instance, step, time).
        order = np.argsort(tr.inst["scheduled"], kind="stable")
        tr.scheduled = {k: v[order] for k, v in tr.scheduled.items()}
        tr.inst["scheduled"] = tr.inst["scheduled"][order]


def _load_steps(tr: Trace, names: Dict[str, np.ndarray]) -> None:
    t, inp = _open(tr.dir, "steps", True)
    tr.inputs.append(inp)
    cols = {c: "int64" for c, _ in STEP_INT_COLUMNS}
    cols["kv_usage_gpu_ratio"] = "double"
    cols["has_rich_snapshots"] = "bool"
    data = t.read(cols)
    n = t.rows
    ok = np.ones(n, dtype=bool)
    missing: List[List] = []
    out: Dict[str, np.ndarray] = {}
    for col, key in STEP_INT_COLUMNS:
        v = _valid(data[col])
        add_count(missing, "step row without " + col, int(np.count_nonzero(ok & ~v)))
        ok &= v
        out[key] = _values(data[col], 0).astype(np.int64, copy=False)
    usage = _values(data["kv_usage_gpu_ratio"], np.nan).astype(np.float64, copy=False)
    uv = _valid(data["kv_usage_gpu_ratio"]) & np.isfinite(usage)
    add_count(missing, "step row without a finite kv_usage_gpu_ratio", int(np.count_nonzero(ok & ~uv)))
    ok &= uv
    rich = _valid(data["has_rich_snapshots"]) & _values(data["has_rich_snapshots"], False).astype(bool)
    out["kv_usage"] = usage
    out["rich"] = rich
    tr.steps = {k: v[ok] for k, v in out.items()}
    _instance(t, names, "steps", ok)
    for reason, c in missing:
        add_count(tr.dropped, reason, c)


def _load_snapshots(tr: Trace, names: Dict[str, np.ndarray]) -> None:
    t, inp = _open(tr.dir, "request_snapshots", False)
    empty = {
        "step_id": np.zeros(0, np.int64), "request": np.zeros(0, object), "prefill": np.zeros(0, bool),
        "prompt": np.zeros(0, np.int64), "computed": np.zeros(0, np.int64), "scheduled": np.zeros(0, np.int64),
        "blocks_allocated": np.zeros(0, np.int64), "blocks_cached": np.zeros(0, np.int64),
    }
    if t is None:
        tr.snapshots = empty
        return
    tr.inputs.append(inp)
    d = t.read({
        "step_id": "int64", "request_id": "string", "request_phase": "string",
        "request_num_prompt_tokens": "int64", "request_num_computed_tokens": "int64",
        "request_scheduled_tokens_this_step": "int64",
        "kv_blocks_allocated_gpu": "int64", "kv_blocks_cached_gpu": "int64",
    })
    phase = _values(d["request_phase"], "")
    ok = _valid(d["request_phase"])
    for c in ("request_num_prompt_tokens", "request_num_computed_tokens", "request_scheduled_tokens_this_step",
              "kv_blocks_allocated_gpu", "kv_blocks_cached_gpu"):
        ok &= _valid(d[c])
    is_prefill = phase == "PREFILL"
    ok &= is_prefill | (phase == "DECODE")
    add_count(tr.dropped, "snapshot without a phase, token or block count", int(np.count_nonzero(~ok)))
    tr.snapshots = {
        "step_id": _values(d["step_id"], 0)[ok],
        "request": _values(d["request_id"], "")[ok],
        "prefill": np.asarray(is_prefill, dtype=bool)[ok],
        "prompt": _values(d["request_num_prompt_tokens"], 0)[ok],
        "computed": _values(d["request_num_computed_tokens"], 0)[ok],
        "scheduled": _values(d["request_scheduled_tokens_this_step"], 0)[ok],
        "blocks_allocated": _values(d["kv_blocks_allocated_gpu"], 0)[ok],
        "blocks_cached": _values(d["kv_blocks_cached_gpu"], 0)[ok],
    }
    _instance(t, names, "snapshots", ok)


def _load_requests(tr: Trace, names: Dict[str, np.ndarray]) -> None:
    t, inp = _open(tr.dir, "requests", False)
    floats = {"arrived_s": "arrived_mono_s", "queued_s": "queued_mono_s", "finished_s": "finished_mono_s",
              "departed_s": "departed_mono_s", "first_scheduled_s": "first_scheduled_mono_s"}
    ints = {"prompt": "prompt_tokens", "output": "output_tokens", "queued_ns": "queued_mono_ns",
            "first_scheduled_ns": "first_scheduled_mono_ns"}
    if t is None:
        tr.requests = {"engine_id": np.zeros(0, object)}
        tr.requests.update({k: np.zeros(0, np.float64) for k in floats})
        tr.requests.update({k: np.zeros(0, np.int64) for k in ints})
        return
    tr.inputs.append(inp)
    cols = {"engine_request_id": "string"}
    cols.update({c: "int64" for c in ints.values()})
    cols.update({c: "double" for c in floats.values()})
    d = t.read(cols)
    req = {"engine_id": _values(d["engine_request_id"], "")}
    for k, c in floats.items():
        v = _values(d[c], np.nan).astype(np.float64, copy=True)
        v[~_valid(d[c])] = np.nan
        req[k] = v
    for k, c in ints.items():
        v = _values(d[c], 0).astype(np.int64, copy=True)
        v[~_valid(d[c])] = -1
        req[k] = v
    tr.requests = req
    _instance(t, names, "requests", np.ones(t.rows, dtype=bool))


def _load_scheduled(tr: Trace, names: Dict[str, np.ndarray]) -> None:
    t, inp = _open(tr.dir, "journey_events", False)
    if t is None:
        tr.scheduled = {"step": np.zeros(0, np.int64), "ts_ns": np.zeros(0, np.int64)}
        return
    tr.inputs.append(inp)
    d = t.read({"event": "string", "scheduler_step": "int64", "ts_monotonic_ns": "int64"})
    ev = _values(d["event"], "")
    ok = (ev == "journey.SCHEDULED") & _valid(d["scheduler_step"]) & _valid(d["ts_monotonic_ns"])
    step = _values(d["scheduler_step"], 0)[ok]
    ts = _values(d["ts_monotonic_ns"], 0)[ok]
    order = np.lexsort((ts, step))
    tr.scheduled = {"step": step[order], "ts_ns": ts[order]}
    _instance(t, names, "scheduled", ok)
    names["scheduled"] = names["scheduled"][order]


def _load_kv(tr: Trace, names: Dict[str, np.ndarray]) -> None:
    t, inp = _open(tr.dir, "kv_events", False)
    empty = {"type": np.zeros(0, object), "medium": np.zeros(0, object), "blocks": np.zeros(0, np.int64),
             "step": np.zeros(0, np.int64), "success": np.zeros(0, bool)}
    if t is None:
        tr.kv = empty
        return
    tr.inputs.append(inp)
    d = t.read({"type": "string", "medium": "string", "block_count": "int64", "success": "bool",
                "scheduler_step": "int64"})
    typ = _values(d["type"], "")
    tr.has_kv = len(typ) > 0
    wanted = (typ == "TransferCompleted") | (typ == "CacheLoadCommitted")
    full = _valid(d["block_count"]) & _valid(d["scheduler_step"])
    for name in ("TransferCompleted", "CacheLoadCommitted"):
        add_count(tr.dropped, name + " without block_count or scheduler_step",
                  int(np.count_nonzero((typ == name) & ~full)))
    ok = wanted & full
    succ = _valid(d["success"]) & _values(d["success"], False).astype(bool)
    tr.kv = {
        "type": typ[ok],
        "medium": _values(d["medium"], "")[ok],
        "blocks": _values(d["block_count"], 0)[ok],
        "step": _values(d["scheduler_step"], 0)[ok],
        "success": succ[ok],
    }


def load_trace(dir_: str) -> Trace:
    """Read one ``calibrate ingest`` output directory (see the module docstring).

    Raises :class:`TableError` naming the file (and column) when a table is
    missing, unreadable, of another table, or lacks a column the fit reads.
    """
    tr = Trace(dir=dir_, steps={}, snapshots={}, requests={}, scheduled={}, kv={})
    names: Dict[str, np.ndarray] = {}  # instance ids of the kept rows, per table
    for load in (_load_steps, _load_snapshots, _load_requests, _load_scheduled, _load_kv):
        load(tr, names)
    _set_instances(tr, names)
    return tr
