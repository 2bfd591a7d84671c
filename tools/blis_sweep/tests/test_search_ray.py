"""Policy search on a real local Ray cluster (ray.init(num_cpus=2,
include_dashboard=False)): the evaluator, the GEPA adapter and the
OpenEvolve cascade score the same on Ray tasks as on the local process
pool, the binary shipped through the object store.

Runs in tools/blis_sweep/test-ray.sh (requirements-ray.lock: ray, PyYAML
and gepa; openevolve is not needed by the evaluator).
"""

from __future__ import annotations

import os

import pytest

if os.environ.get("BLIS_REQUIRE_RAY"):
    import gepa  # noqa: F401
    import ray  # noqa: F401
ray = pytest.importorskip("ray")
pytest.importorskip("yaml")

from blis_sweep import LocalBackend, RayBackend  # noqa: E402
from blis_sweep.search import OpenEvolveEvaluator, PolicyEvaluator  # noqa: E402

pytestmark = pytest.mark.ray

ARGS = ["--num-instances", "2"]
WORKLOADS = ["mixed-slo", "bursty-traffic"]


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _outcomes(ev, cand):
    return [(o.workload, o.score, o.metrics, o.anomalies, o.error, o.feedback()) for o in ev.evaluate(cand, WORKLOADS)]


def test_search_on_ray_equals_local(blis, cluster, tmp_path):
    from blis_sweep.search import BlisGEPAAdapter

    on_ray = PolicyEvaluator(args=ARGS, horizon_s=30, seeds=(1, 2), backend=RayBackend(blis, ship_binary=True))
    with LocalBackend(blis, workers=2) as local_backend:
        local = PolicyEvaluator(args=ARGS, horizon_s=30, seeds=(1, 2), backend=local_backend)
        for cand in [{"routing": "least-loaded"}, {"routing": "{type: always-busiest}"}, {"routing": "{type: bogus}"}]:
            assert _outcomes(on_ray, cand) == _outcomes(local, cand)
        eb_ray = BlisGEPAAdapter(on_ray).evaluate(WORKLOADS, {"routing": "least-loaded"}, capture_traces=True)
        eb_local = BlisGEPAAdapter(local).evaluate(WORKLOADS, {"routing": "least-loaded"}, capture_traces=True)
        assert eb_ray.scores == eb_local.scores and eb_ray.outputs == eb_local.outputs
        assert 0.5 < min(eb_ray.scores)
        prog = tmp_path / "p.yaml"
        prog.write_text("# EVOLVE-BLOCK-START\nrouting: {type: least-loaded}\n# EVOLVE-BLOCK-END\n")
        kw = dict(args=ARGS, horizon_s=60, smoke_horizon_s=20, seeds=(1, 2), artifacts=False, blis=blis)
        oe_ray = OpenEvolveEvaluator(WORKLOADS, backend="ray", **kw)  # joins the running cluster
        oe_local = OpenEvolveEvaluator(WORKLOADS, backend=local_backend, **kw)
        for stage in (1, 2):
            assert oe_ray.run(str(prog), stage) == oe_local.run(str(prog), stage)
        assert oe_ray.evaluate(str(prog))["combined_score"] > 0.5
    assert ray.is_initialized()  # the backends joined a cluster they did not start
