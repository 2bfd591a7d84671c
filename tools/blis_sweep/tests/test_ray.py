"""The Ray backend on a real local Ray cluster (ray.init(num_cpus=2,
include_dashboard=False); Ray's local mode no longer exists): shards run as
Ray tasks merge to blis sweep's own table byte for byte, with the binary on
the workers' path or shipped through the object store.

Ray is the optional extra (requirements-ray.lock): without it these tests
are skipped, unless BLIS_REQUIRE_RAY is set (.ci/run sets it).
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import SMALL, go_sweep

if os.environ.get("BLIS_REQUIRE_RAY"):
    import ray  # noqa: F401  (fails loudly when the extra is missing)
ray = pytest.importorskip("ray")

from blis_sweep import Job, LocalBackend, RayBackend, run_sweep  # noqa: E402

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.parametrize("ship", [False, True])
def test_ray_shards_equal_the_local_table(blis, tmp_path, cluster, ship):
    want = go_sweep(blis, SMALL, tmp_path / "go.csv")
    backend = RayBackend(blis, ship_binary=ship)
    assert backend.slots == 2
    res = run_sweep(SMALL, backend, shards=5, blis=blis, progress=None)
    assert res.table == want
    with LocalBackend(blis, workers=2) as local:
        assert run_sweep(SMALL, local, shards=3, blis=blis, progress=None).table == want
    out = tmp_path / "ray.parquet"
    run_sweep(SMALL, backend, shards=8, out=str(out), blis=blis, progress=None)
    assert out.read_bytes() == go_sweep(blis, SMALL, tmp_path / "go.parquet")
    backend.close()  # joined a cluster it did not start: leaves it up
    assert ray.is_initialized()


def test_ray_jobs_carry_files(blis, cluster):
    job = Job(args=("run", "--num-instances", "2", "--requests", "50", "--policy-config", "{tmp}/candidate.yaml"),
              files={"candidate.yaml": b"routing: {type: least-loaded}\n"})
    results = dict(RayBackend(blis).map([job, job]))
    assert sorted(results) == [0, 1]
    assert results[0].stdout == results[1].stdout
    assert json.loads(results[0].stdout)["config"]["routing"]["policy"] == "least-loaded"
