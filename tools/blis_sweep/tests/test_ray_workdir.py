"""The command line on Ray as on a remote cluster: --working-dir uploads a
folder (the binary and the sweep's files, named by relative paths) to every
node as the jobs' working directory (Ray's runtime_env), as ``ray job submit
--working-dir`` does on KubeRay. A local cluster of 2 CPUs, started by the
command itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, TESTDATA, go_sweep

if os.environ.get("BLIS_REQUIRE_RAY"):
    import ray  # noqa: F401
pytest.importorskip("ray")

pytestmark = pytest.mark.ray


def test_working_dir(blis, tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(blis, job / "blis")
    shutil.copy(TESTDATA / "exp.yaml", job / "exp.yaml")
    shutil.copy(TESTDATA / "grid.yaml", job / "grid.yaml")
    args = ["--config", "exp.yaml", "--grid", "grid.yaml"]
    env = dict(os.environ, PYTHONPATH=str(REPO / "tools" / "blis_sweep"))
    p = subprocess.run([sys.executable, "-m", "blis_sweep", "--backend", "ray", "--num-cpus", "2", "--working-dir", ".", "--blis", "./blis",
                        "--shards", "4", "--out", str(tmp_path / "ray.csv"), "--", *args], cwd=job, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "blis-sweep: 8 runs in 4 shards on ray, 0 failed" in p.stderr
    want = go_sweep(str(job / "blis"), [str(job / a) if a.endswith(".yaml") else a for a in args], tmp_path / "go.csv")
    assert (tmp_path / "ray.csv").read_bytes() == want
