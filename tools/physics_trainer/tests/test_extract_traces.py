"""extract_traces: required columns, types and row filters of the ingest tables.

Tables are written by hand with pyarrow; the expected values follow from the
rules in docs/fit.md and fit/trace.go, not from running the code.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from physics_trainer import cli
from physics_trainer.extract_traces import STEP_INT_COLUMNS, TableError, load_trace


def step_table(rows, drop=None, override=None, meta="steps"):
    """A steps table; rows are dicts of the int columns' short keys (id, running, ...)."""
    cols = {}
    for col, key in STEP_INT_COLUMNS:
        cols[col] = pa.array([r.get(key, 1) for r in rows], pa.int64())
    cols["kv_usage_gpu_ratio"] = pa.array([r.get("kv_usage", 0.5) for r in rows], pa.float64())
    cols["has_rich_snapshots"] = pa.array([r.get("rich", False) for r in rows], pa.bool_())
    cols.update(override or {})
    for c in drop or ():
        del cols[c]
    t = pa.table(cols)
    if meta:
        t = t.replace_schema_metadata({"blis.table": meta})
    return t


def write(dir_, name, table):
    pq.write_table(table, dir_ / (name + ".parquet"))


def test_missing_steps_table_names_the_file(tmp_path):
    with pytest.raises(TableError) as e:
        load_trace(str(tmp_path))
    assert str(tmp_path / "steps.parquet") in str(e.value)
    assert "calibrate ingest output directory" in str(e.value)


@pytest.mark.parametrize("column", ["batch_num_preempted", "kv_usage_gpu_ratio", "has_rich_snapshots", "step_id"])
def test_missing_step_column_names_file_and_column(tmp_path, column):
    write(tmp_path, "steps", step_table([{"id": 1}], drop=[column]))
    with pytest.raises(TableError) as e:
        load_trace(str(tmp_path))
    msg = str(e.value)
    assert str(tmp_path / "steps.parquet") in msg and f"no column {column}" in msg


def test_wrong_column_type_names_file_column_and_types(tmp_path):
    write(tmp_path, "steps", step_table([{"id": 1}], override={"kv_usage_gpu_ratio": pa.array([1], pa.int64())}))
    with pytest.raises(TableError) as e:
        load_trace(str(tmp_path))
    msg = str(e.value)
    assert "steps.parquet" in msg and "kv_usage_gpu_ratio" in msg and "int64" in msg and "double" in msg


def test_optional_table_missing_column_is_an_error(tmp_path):
    write(tmp_path, "steps", step_table([{"id": 1}]))
    write(tmp_path, "requests", pa.table({"engine_request_id": pa.array(["r"]), "prompt_tokens": pa.array([1])}))
    with pytest.raises(TableError) as e:
        load_trace(str(tmp_path))
    assert str(tmp_path / "requests.parquet") in str(e.value)
    assert "output_tokens" in str(e.value)


def test_table_of_another_kind_is_refused(tmp_path):
    write(tmp_path, "steps", step_table([{"id": 1}], meta="requests"))
    with pytest.raises(TableError, match="holds the 'requests' table, want 'steps'"):
        load_trace(str(tmp_path))


def test_step_rows_with_nulls_are_dropped_and_counted(tmp_path):
    rows = [{"id": i} for i in range(1, 6)]
    override = {
        # row 2: no running depth; row 3: no running depth and no waiting depth (counted once, under the first)
        "queue_running_depth": pa.array([1, None, None, 1, 1], pa.int64()),
        "queue_waiting_depth": pa.array([0, 0, None, 0, 0], pa.int64()),
        # row 4: NaN usage; row 5: null usage
        "kv_usage_gpu_ratio": pa.array([0.1, 0.2, 0.3, math.nan, None], pa.float64()),
        "has_rich_snapshots": pa.array([None, True, True, True, True], pa.bool_()),
    }
    write(tmp_path, "steps", step_table(rows, override=override))
    tr = load_trace(str(tmp_path))
    assert tr.steps["id"].tolist() == [1]
    assert tr.steps["rich"].tolist() == [False]  # null: not rich
    assert dict(map(tuple, tr.dropped)) == {
        "step row without queue_running_depth": 2,
        "step row without a finite kv_usage_gpu_ratio": 2,
    }
    assert tr.inputs[0].rows == 5 and len(tr.inputs[0].sha256) == 64
    # optional tables absent: empty columns, not errors
    assert len(tr.requests["prompt"]) == 0 and len(tr.snapshots["step_id"]) == 0 and not tr.has_kv


def test_snapshots_requests_journey_and_kv(tmp_path):
    write(tmp_path, "steps", step_table([{"id": 1}]))
    write(tmp_path, "request_snapshots", pa.table({
        "step_id": pa.array([5, 5, 6, 7], pa.int64()),
        "request_id": pa.array(["a", "b", "a", "c"]),
        "request_phase": pa.array(["PREFILL", "DECODE", "WAITING", None]),
        "request_num_prompt_tokens": pa.array([10, 20, 10, 3], pa.int64()),
        "request_num_computed_tokens": pa.array([0, 20, 10, 0], pa.int64()),
        "request_scheduled_tokens_this_step": pa.array([10, 1, 1, 3], pa.int64()),
        "kv_blocks_allocated_gpu": pa.array([1, 2, 1, 1], pa.int64()),
        "kv_blocks_cached_gpu": pa.array([0, None, 0, 0], pa.int64()),
    }))
    write(tmp_path, "requests", pa.table({
        "engine_request_id": pa.array(["a", None]),
        "prompt_tokens": pa.array([10, None], pa.int64()),
        "output_tokens": pa.array([None, 4], pa.int64()),
        "queued_mono_ns": pa.array([None, 7], pa.int64()),
        "first_scheduled_mono_ns": pa.array([9, None], pa.int64()),
        "arrived_mono_s": pa.array([1.0, None], pa.float64()),
        "queued_mono_s": pa.array([1.5, 2.0], pa.float64()),
        "finished_mono_s": pa.array([None, 3.0], pa.float64()),
        "departed_mono_s": pa.array([4.0, None], pa.float64()),
        "first_scheduled_mono_s": pa.array([None, None], pa.float64()),
    }))
    write(tmp_path, "journey_events", pa.table({
        "event": pa.array(["journey.SCHEDULED", "journey.QUEUED", "journey.SCHEDULED", "journey.SCHEDULED",
                           "journey.SCHEDULED"]),
        "scheduler_step": pa.array([8, 8, 3, 8, None], pa.int64()),
        "ts_monotonic_ns": pa.array([300, 1, 100, 200, 5], pa.int64()),
    }))
    write(tmp_path, "kv_events", pa.table({
        "type": pa.array(["TransferCompleted", "CacheStoreCommitted", "CacheLoadCommitted", "TransferCompleted"]),
        "medium": pa.array([None, "CPU", "CPU", None]),
        "block_count": pa.array([4, 9, 2, None], pa.int64()),
        "success": pa.array([True, None, None, False], pa.bool_()),
        "scheduler_step": pa.array([3, 3, 3, 3], pa.int64()),
    }))
    tr = load_trace(str(tmp_path))
    # Only the first two snapshots have a known phase and every count... and the
    # second lacks its cached blocks: one kept.
    assert tr.snapshots["request"].tolist() == ["a"]
    assert tr.snapshots["prefill"].tolist() == [True]
    assert dict(map(tuple, tr.dropped))["snapshot without a phase, token or block count"] == 3
    r = tr.requests
    assert r["engine_id"].tolist() == ["a", ""]
    assert r["prompt"].tolist() == [10, -1] and r["output"].tolist() == [-1, 4]
    assert r["queued_ns"].tolist() == [-1, 7] and r["first_scheduled_ns"].tolist() == [9, -1]
    assert r["arrived_s"][0] == 1.0 and np.isnan(r["arrived_s"][1]) and np.isnan(r["first_scheduled_s"]).all()
    # SCHEDULED with a step and a time, sorted by (step, time)
    assert tr.scheduled["step"].tolist() == [3, 8, 8]
    assert tr.scheduled["ts_ns"].tolist() == [100, 200, 300]
    # TransferCompleted and CacheLoadCommitted only; the one without block_count is dropped
    assert tr.has_kv
    assert tr.kv["type"].tolist() == ["TransferCompleted", "CacheLoadCommitted"]
    assert tr.kv["success"].tolist() == [True, False]
    assert dict(map(tuple, tr.dropped))["TransferCompleted without block_count or scheduler_step"] == 1
    assert [i.path.rsplit("/", 1)[1] for i in tr.inputs] == [
        "steps.parquet", "request_snapshots.parquet", "requests.parquet", "journey_events.parquet",
        "kv_events.parquet"]


def test_cli_reports_table_errors_with_exit_status_2(tmp_path, capsys):
    write(tmp_path, "steps", step_table([{"id": 1}], drop=["batch_prefill_tokens"]))
    rc = cli.main(["fit", str(tmp_path), "-q", "-o", str(tmp_path / "c.yaml")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "steps.parquet" in err and "batch_prefill_tokens" in err
    assert not (tmp_path / "c.yaml").exists()


def test_cli_usage_errors_exit_2(tmp_path, capsys):
    assert cli.main(["fit"]) == 2
    assert "no TABLES_DIR" in capsys.readouterr().err
    assert cli.main(["fit", str(tmp_path), "--folds", "1"]) == 2
    assert "folds" in capsys.readouterr().err
    assert cli.main(["fit", str(tmp_path), "--enable-chunked-prefill=maybe"]) == 2
    assert "enable-chunked-prefill" in capsys.readouterr().err


def test_instance_columns(tmp_path):
    # Two engines; only kept rows name instances; journey SCHEDULED sorted by (instance, step, time).
    write(tmp_path, "steps", step_table([{"id": 1}, {"id": 1}, {"id": 2}, {"id": 2}],
                                        override={"instance": pa.array(["b", "a", "b", "a"]),
                                                  "queue_running_depth": pa.array([1, 1, 1, None], pa.int64())}))
    write(tmp_path, "journey_events", pa.table({
        "event": pa.array(["journey.SCHEDULED", "journey.SCHEDULED", "journey.SCHEDULED", "api.ARRIVED"]),
        "scheduler_step": pa.array([2, 1, 3, None], pa.int64()),
        "ts_monotonic_ns": pa.array([20, 10, 30, None], pa.int64()),
        "instance": pa.array(["a", "b", "a", "c"]),
    }))
    tr = load_trace(str(tmp_path))
    assert tr.instances == ["a", "b"]  # "c" is only on an API event, which is not kept
    assert tr.steps["id"].tolist() == [1, 1, 2]
    assert tr.inst["steps"].tolist() == [1, 0, 1]
    assert tr.scheduled["step"].tolist() == [2, 3, 1] and tr.scheduled["ts_ns"].tolist() == [20, 30, 10]
    assert tr.inst["scheduled"].tolist() == [0, 0, 1]
    assert tr.inst["requests"].tolist() == [] and tr.inst["snapshots"].tolist() == []


def test_no_instance_column_is_one_engine(tmp_path):
    write(tmp_path, "steps", step_table([{"id": 1}, {"id": 2}]))
    tr = load_trace(str(tmp_path))
    assert tr.instances == [""] and tr.inst["steps"].tolist() == [0, 0]


def test_wrong_instance_type_names_file_and_column(tmp_path):
    write(tmp_path, "steps", step_table([{"id": 1}], override={"instance": pa.array([3], pa.int64())}))
    with pytest.raises(TableError) as e:
        load_trace(str(tmp_path))
    assert "steps.parquet" in str(e.value) and "instance" in str(e.value)
