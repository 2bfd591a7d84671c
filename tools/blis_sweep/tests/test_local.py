"""The local process pool: shards merged in index order equal blis sweep's
own table byte for byte, in CSV and Parquet, for any shard count; jobs carry
files both ways (the interface a policy-search adapter submits through)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO, SMALL, go_sweep

from blis_sweep import Job, LocalBackend, SweepError, merge, plan, run_sweep


def test_plan(blis):
    size = plan(SMALL, blis)
    assert (size["points"], size["seeds"], size["runs"]) == (4, 2, 8)
    assert [c["name"] for c in size["columns"][:4]] == ["point", "deployment.pools[0].replicas", "workload.rate_scale", "seed"]


@pytest.mark.parametrize("shards", [1, 3, 8, 20])
def test_shards_merge_to_the_local_table(blis, tmp_path, shards):
    want = go_sweep(blis, SMALL, tmp_path / "go.csv")
    with LocalBackend(blis, workers=2) as backend:
        res = run_sweep(SMALL, backend, shards=shards, blis=blis, progress=None)
    assert res.table == want
    assert (res.runs, res.failed, res.shards, res.exit_status) == (8, 0, shards, 0)


def test_parquet_and_figure(blis, tmp_path):
    want = go_sweep(blis, SMALL, tmp_path / "go.parquet")
    out, fig = tmp_path / "pool.parquet", tmp_path / "fig.svg"
    run_sweep(SMALL, shards=3, out=str(out), plot=["--plot", str(fig)], blis=blis, progress=None)
    assert out.read_bytes() == want
    assert "slo_attainment against deployment.pools[0].replicas" in fig.read_text()
    csv = tmp_path / "pool.csv"
    run_sweep(SMALL, shards=5, out=str(csv), blis=blis, progress=None)
    assert csv.read_bytes() == go_sweep(blis, SMALL, tmp_path / "go.csv")


def test_points_table(blis, tmp_path):
    """--points (each metric's mean over a point's seeds with its interval)
    from merged shards is blis sweep's own points table, CSV and Parquet."""
    for ext in ("csv", "parquet"):
        want = tmp_path / f"go-points.{ext}"
        subprocess.run([blis, "sweep", *SMALL, "--points", str(want), "-q"], check=True, capture_output=True)
        got = tmp_path / f"pool-points.{ext}"
        run_sweep(SMALL, shards=3, plot=["--points", str(got)], blis=blis, progress=None)
        assert got.read_bytes() == want.read_bytes()
    head = (tmp_path / "pool-points.csv").read_text().splitlines()[0].split(",")
    assert head[:6] == ["point", "deployment.pools[0].replicas", "workload.rate_scale", "seeds", "stability", "arrived"]
    assert "ttft_p99_ms_ci_low" in head
    with pytest.raises(ValueError, match="a table is .csv or .parquet"):
        run_sweep(SMALL, plot=["--points", str(tmp_path / "p.txt")], blis=blis, progress=None)


def test_failed_runs_are_rows(blis, tmp_path):
    args = ["--requests", "20", "--set", "deployment.pools[0].vllm.max_num_seqs=0,8,-1", "--seeds", "2"]
    res = run_sweep(args, shards=4, blis=blis, progress=None)
    assert res.failed == 4
    assert res.exit_status == 104
    assert res.table == go_sweep(blis, args, tmp_path / "go.csv")


def test_bad_input(blis):
    with pytest.raises(SweepError, match="workload.ratescale: no such key; workload takes rate_scale"):
        run_sweep(["--set", "workload.ratescale=1,2"], blis=blis, progress=None)
    with pytest.raises(ValueError, match="--out: the driver sets it"):
        run_sweep([*SMALL, "--out", "x.csv"], blis=blis, progress=None)
    with pytest.raises(SweepError, match="its columns differ from shard 0's"):
        merge([b"a,b\n1,2\n", b"a,c\n"])
    with pytest.raises(SweepError, match="shard 0 of 2: 2 rows, want 1 of 2"):
        merge([b"a\n1\n3\n", b"a\n"])


def test_jobs_carry_files(blis, tmp_path):
    """An adapter's evaluation: a candidate policy file in, the report out."""
    candidate = b"routing: {type: least-loaded}\n"
    job = Job(args=("run", "--num-instances", "2", "--requests", "50", "--policy-config", "{tmp}/p/candidate.yaml", "--window", "5s",
                    "--window-out", "{tmp}/w.csv"), files={"p/candidate.yaml": candidate}, outputs=("w.csv", "missing.csv"))
    with LocalBackend(blis, workers=2) as backend:
        (i, res), = list(backend.map([job]))
    assert (i, res.returncode, res.timed_out) == (0, 0, False)
    report = json.loads(res.stdout)
    assert report["config"]["routing"]["policy"] == "least-loaded"
    assert res.outputs["w.csv"].startswith(b"start_us,end_us,")
    assert "missing.csv" not in res.outputs
    with pytest.raises(ValueError, match="not a relative path"):
        list(LocalBackend(blis).map([Job(args=("run",), files={"../x": b""})]))
    slow = Job(args=("run", "--requests", "100000000", "--rate", "100000"), timeout_s=0.5)
    (_, res), = list(LocalBackend(blis).map([slow]))
    assert res.timed_out and res.returncode == -9


def test_cli(blis, tmp_path):
    out = tmp_path / "t.parquet"
    p = subprocess.run([sys.executable, "-m", "blis_sweep", "--blis", blis, "--workers", "2", "--shards", "3", "--out", str(out), "--", *SMALL],
                       capture_output=True, text=True, cwd=REPO / "tools" / "blis_sweep")
    assert p.returncode == 0, p.stderr
    assert "blis-sweep: 8 runs in 3 shards on local, 0 failed" in p.stderr
    assert out.read_bytes() == go_sweep(blis, SMALL, tmp_path / "go.parquet")
