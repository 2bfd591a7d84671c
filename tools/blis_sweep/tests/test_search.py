"""Policy search (blis_sweep.search): the evaluator's score and feedback,
the GEPA adapter's contract, the OpenEvolve cascade and its timeout, and
end-to-end searches with a stub LLM (no network): GEPA with a reflection LM
callable and through its CLI on an OpenAI-compatible stub server, OpenEvolve's
controller on the same stub server for 2 iterations.

gepa and openevolve come from requirements-search.lock (scripts/test.sh
installs it); without them the tests that need them are skipped, unless
BLIS_REQUIRE_SEARCH is set (scripts/test.sh sets it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

if os.environ.get("BLIS_REQUIRE_SEARCH"):
    import gepa  # noqa: F401  (fails loudly when requirements-search.lock is missing)
    import openevolve  # noqa: F401
yaml = pytest.importorskip("yaml")

from blis_sweep import LocalBackend  # noqa: E402
from blis_sweep.search import (  # noqa: E402
    CandidateError,
    OpenEvolveEvaluator,
    PolicyEvaluator,
    assemble_bundle,
    split_bundle,
)

sys.path.insert(0, str(Path(__file__).parent))
from stub_llm import StubLLM  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# Two instances for 30 simulated seconds of mixed-slo (~350 requests) or
# bursty-traffic (~600): ~0.05 s a run.
ARGS = ["--num-instances", "2"]
BAD_ROUTING = {"routing": "{type: always-busiest}", "scheduler": "{type: fcfs}"}


@pytest.fixture()
def evaluator(blis):
    ev = PolicyEvaluator(args=ARGS, horizon_s=30, seeds=(1, 2), backend=LocalBackend(blis, workers=2))
    yield ev
    ev.close()


def test_assemble_bundle_forms_and_errors():
    text = assemble_bundle({
        "routing": "routing: {type: weighted, params: {scorers: {queue-depth: 1}}}",  # under its own key
        "scheduler": "```yaml\ntype: priority-fcfs\n```",  # fenced, block style
        "admission": "always-admit",  # a bare template name
        "priority": "",  # left to the experiment
    })
    assert yaml.safe_load(text) == {"admission": {"type": "always-admit"},
                                    "routing": {"type": "weighted", "params": {"scorers": {"queue-depth": 1}}},
                                    "scheduler": {"type": "priority-fcfs"}}
    assert list(yaml.safe_load(text)) == ["admission", "routing", "scheduler"]  # SECTIONS' order
    for bad, msg in [({"routing": "{type: [x"}, "routing: not valid YAML"),
                     ({"version": "1"}, "component(s) 'version'"),
                     ({"scheduler": "[fcfs, sjf]"}, "scheduler: must be a mapping")]:
        with pytest.raises(CandidateError, match=msg.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
            assemble_bundle(bad)
    # Every section blis has, in its order; a key it lacks goes to blis, whose error names it.
    assert assemble_bundle({"disaggregation": "never", "zz_new": "x", "routing": "least-loaded"}) == (
        "routing:\n  type: least-loaded\ndisaggregation:\n  type: never\nzz_new:\n  type: x\n")
    seed = split_bundle("version: 1\nrouting: {type: least-loaded}\nautoscale:\n  type: none\n")
    assert seed == {"routing": "{type: least-loaded}", "autoscale": "{type: none}"}


def test_score_is_the_slo_met_share_deterministic_and_invalid_scores_zero(evaluator):
    good = {"routing": "{type: least-loaded}"}
    a = evaluator.evaluate(good, ["mixed-slo", "bursty-traffic"])
    b = evaluator.evaluate(good, ["mixed-slo", "bursty-traffic"])
    assert [o.score for o in a] == [o.score for o in b]
    assert [o.feedback() for o in a] == [o.feedback() for o in b]
    for o in a:
        assert o.error is None and 0.5 < o.score <= 1
        assert len(o.per_seed) == 2 and o.score == pytest.approx(sum(o.per_seed) / 2)
        assert o.metrics["score"] == pytest.approx(o.score)
        assert "hol_blocking" in o.anomalies and o.summary.strip()
    # One seed: exactly the share of arrived requests that met their SLO.
    one = PolicyEvaluator(args=ARGS, horizon_s=30, seeds=(1,), backend=evaluator.backend).evaluate(good, ["mixed-slo"])[0]
    assert one.score == one.metrics["slo_met"] / one.metrics["arrived"] == a[0].per_seed[0]
    assert one.metrics["slo_met"] < one.metrics["arrived"]  # requests still running at the horizon count as misses
    bad = evaluator.evaluate(BAD_ROUTING, ["bursty-traffic"])[0]
    assert bad.score < a[1].score and bad.anomalies["hol_blocking"] > 0
    assert "hol_blocking" in bad.feedback()
    # Refusing every request meets no SLO: 0, though the run is valid.
    rej = evaluator.evaluate({"admission": "reject-all"}, ["mixed-slo"])[0]
    assert rej.error is None and rej.score == 0
    # Invalid candidates: 0 with the reason, and the same reason each time.
    for cand, msg in [({"routing": "{type: bogus}"}, 'routing policy "bogus" is not a template'),
                      ({"routing": "{type: weighted, params: {scorers: {foo: 1}}}"}, '"foo" is not one of'),
                      ({"routing": "{type: [x"}, "routing: not valid YAML"),
                      ({"routing": "least-loaded", "router": "x"}, 'unknown key "router" in a policy file')]:
        outs = evaluator.evaluate(cand, ["mixed-slo", "bursty-traffic"])
        assert [o.score for o in outs] == [0, 0]
        assert msg in outs[0].error and "blis-job-" not in outs[0].error, outs[0].error
        assert evaluator.evaluate(cand, ["mixed-slo"])[0].error == outs[0].error


def test_fitness_objective_and_timeout(blis):
    with LocalBackend(blis, workers=2) as backend:
        ev = PolicyEvaluator(args=ARGS, horizon_s=30, objective="fitness", fitness_weights="throughput:1,p99_ttft:1",
                             backend=backend)
        o = ev.evaluate({"routing": "least-loaded"}, ["mixed-slo"])[0]
        assert o.error is None and 0 < o.score < 1
        # A run past its timeout is killed: 0 with the reason, never a raise.
        slow = PolicyEvaluator(args=ARGS, timeout_s=0.001, backend=backend)
        o = slow.evaluate({"routing": "least-loaded"}, ["mixed-slo"])[0]
        assert o.score == 0 and o.error.startswith("timed out: blis run took longer than 0.001 s and was killed")


def test_gepa_adapter_contract(evaluator):
    pytest.importorskip("gepa")
    from gepa.core.adapter import EvaluationBatch

    from blis_sweep.search import BlisGEPAAdapter

    adapter = BlisGEPAAdapter(evaluator, section_help={"routing": "round-robin, least-loaded, weighted, ..."})
    batch = ["mixed-slo", "bursty-traffic"]
    eb = adapter.evaluate(batch, dict(BAD_ROUTING), capture_traces=True)
    assert isinstance(eb, EvaluationBatch)
    assert len(eb.outputs) == len(eb.scores) == len(eb.trajectories) == len(eb.objective_scores) == 2
    assert adapter.evaluate(batch, dict(BAD_ROUTING)).trajectories is None
    ds = adapter.make_reflective_dataset(dict(BAD_ROUTING), eb, ["routing"])
    assert list(ds) == ["routing"] and len(ds["routing"]) == 2
    json.dumps(ds)  # JSON-serializable
    first = ds["routing"][0]  # the lowest score first: bursty-traffic's head-of-line blocking
    assert first["Inputs"]["workload"] == "bursty-traffic"
    assert first["Inputs"]["other sections"] == {"scheduler": "{type: fcfs}"}
    assert first["Inputs"]["reference"].startswith("round-robin")
    assert first["Generated Outputs"]["policy section"] == "{type: always-busiest}"
    assert "hol_blocking" in first["Feedback"] and "Score 0." in first["Feedback"]
    assert ds == adapter.make_reflective_dataset(dict(BAD_ROUTING), adapter.evaluate(batch, dict(BAD_ROUTING), True), ["routing"])
    # An invalid candidate: scores 0, the parse error is the feedback, nothing raises.
    eb = adapter.evaluate(batch, {"routing": "{type: [x"}, capture_traces=True)
    assert eb.scores == [0.0, 0.0] and "not valid YAML" in eb.outputs[0]["error"]
    ds = adapter.make_reflective_dataset({"routing": "{type: [x"}, eb, ["routing"])
    assert "not valid YAML" in ds["routing"][0]["Feedback"]
    # A systemic failure (here: the binary is gone) still returns a batch.
    broken = BlisGEPAAdapter(PolicyEvaluator(backend=_Failing()))
    eb = broken.evaluate(batch, {"routing": "least-loaded"})
    assert eb.scores == [0.0, 0.0] and "evaluation failed" in eb.outputs[0]["error"]


class _Failing:
    slots = 1

    def map(self, jobs):
        raise FileNotFoundError("blis vanished")

    def close(self):
        pass


def _least_loaded_lm(prompt):
    """The stub reflection LM: proposes least-loaded for any section it is
    asked about (a bad scheduler value: GEPA rejects it)."""
    return "Route each request to the least loaded instance.\n```yaml\n{type: least-loaded}\n```"


def test_gepa_end_to_end_with_a_stub_reflection_lm(evaluator):
    pytest.importorskip("gepa")
    from blis_sweep.search.gepa_adapter import optimize_policy

    runs = []
    for _ in range(2):
        res = optimize_policy(dict(BAD_ROUTING), ["mixed-slo", "bursty-traffic"], evaluator, _least_loaded_lm,
                              max_metric_calls=10)
        runs.append((res.candidates, res.val_aggregate_scores))
    assert runs[0] == runs[1]  # deterministic
    candidates, scores = runs[0]
    assert candidates[0] == BAD_ROUTING
    best = max(range(len(scores)), key=scores.__getitem__)
    assert candidates[best]["routing"] == "{type: least-loaded}"
    assert scores[best] > scores[0] + 0.2


def test_gepa_cli_on_a_stub_openai_server(blis, tmp_path, monkeypatch, capsys):
    pytest.importorskip("gepa")
    pytest.importorskip("openai")
    from blis_sweep.search.__main__ import main

    seed = tmp_path / "seed.yaml"
    seed.write_text("routing: {type: always-busiest}\n")
    monkeypatch.setenv("OPENAI_API_KEY", "stub")
    with StubLLM(lambda messages: _least_loaded_lm(messages[-1]["content"])) as llm:
        assert main(["gepa", "--policy", str(seed), "--workload", "bursty-traffic", "--blis-arg=--num-instances=2",
                     "--horizon", "30", "--seeds", "1", "--max-metric-calls", "4", "--model", "stub",
                     "--api-base", llm.url, "--blis", blis, "--workers", "2"]) == 0
        assert len(llm.requests) >= 1 and "always-busiest" in llm.requests[0][-1]["content"]
    cap = capsys.readouterr()
    assert yaml.safe_load(cap.out) == {"routing": {"type": "least-loaded"}}  # stdout: the best bundle alone
    assert "best validation score" in cap.err and "Iteration" in cap.err


def _oe(blis, **kw):
    kw.setdefault("backend", LocalBackend(blis, workers=2))
    return OpenEvolveEvaluator(["mixed-slo", "bursty-traffic"], args=ARGS, horizon_s=60, smoke_horizon_s=20,
                               seeds=(1, 2), artifacts=False, **kw)


def test_openevolve_cascade_and_failures(blis, tmp_path):
    ev = _oe(blis)
    prog = tmp_path / "p.yaml"
    prog.write_text("# EVOLVE-BLOCK-START\nrouting: {type: least-loaded}\n# EVOLVE-BLOCK-END\n")
    s1, s2 = ev.evaluate_stage1(str(prog)), ev.evaluate_stage2(str(prog))
    assert set(s2) == {"combined_score", "slo_attainment", "score_mixed-slo", "score_bursty-traffic"}
    assert 0.5 < s1["combined_score"] <= 1 and 0.5 < s2["combined_score"] <= 1 and s1 != s2
    assert ev.evaluate(str(prog)) == s2 == ev.evaluate_stage2(str(prog))  # deterministic
    m, art = ev.run(str(prog), 1)
    assert "smoke_feedback" in art and "mixed-slo" in art["smoke_feedback"]
    # A Python program printing the bundle scores the same.
    py = tmp_path / "p.py"
    py.write_text("# EVOLVE-BLOCK-START\nprint('routing: {type: least-loaded}')\n# EVOLVE-BLOCK-END\n")
    assert ev.evaluate(str(py)) == s2
    # Bad programs: 0 with the reason.
    for text, msg in [("routing: {type: [x\n", "not a policy file"), ("routing: {type: bogus}\n", "is not a template"),
                      ("rooting: {type: least-loaded}\n", 'unknown key "rooting"')]:
        prog.write_text(text)
        m, art = ev.run(str(prog), 1)
        assert m == {"combined_score": 0.0} and msg in art["error"], art
    # The timeout kills the run: 0, OpenEvolve's timeout flag, and the reason.
    slow = _oe(blis, timeout_s=0.001)
    prog.write_text("routing: {type: least-loaded}\n")
    m, art = slow.run(str(prog), 2)
    assert m == {"combined_score": 0.0, "timeout": True} and "was killed" in art["error"]


def test_openevolve_controller_with_a_stub_llm(blis, tmp_path, monkeypatch):
    pytest.importorskip("openevolve")
    from openevolve.api import run_evolution
    from openevolve.config import Config

    prog = tmp_path / "initial_program.yaml"
    prog.write_text("# EVOLVE-BLOCK-START\nrouting: {type: always-busiest}\nscheduler: {type: fcfs}\n# EVOLVE-BLOCK-END\n")
    for k, v in {"BLIS_BIN": blis, "BLIS_SEARCH_WORKLOADS": "mixed-slo", "BLIS_SEARCH_HORIZON": "30",
                 "BLIS_SEARCH_SMOKE_HORIZON": "10", "OPENAI_API_KEY": "stub",
                 "PYTHONPATH": os.pathsep.join(filter(None, [str(EXAMPLES.parent), os.environ.get("PYTHONPATH")]))}.items():
        monkeypatch.setenv(k, v)  # OpenEvolve's worker processes inherit them

    def respond(messages):
        return ("Route to the least loaded instance.\n<<<<<<< SEARCH\nrouting: {type: always-busiest}\n=======\n"
                "routing: {type: least-loaded}\n>>>>>>> REPLACE\n")

    with StubLLM(respond) as llm:
        cfg = Config.from_yaml(str(EXAMPLES / "openevolve" / "config.yaml"))
        cfg.llm.api_base = llm.url
        for m in cfg.llm.models:
            m.api_base = llm.url
        cfg.evaluator.parallel_evaluations = 1
        res = run_evolution(str(prog), str(EXAMPLES / "openevolve" / "evaluator.py"), cfg, iterations=2,
                            output_dir=str(tmp_path / "out"), cleanup=False)
        assert len(llm.requests) >= 1
        prompt = llm.requests[0][-1]["content"]
        assert "always-busiest" in prompt and "Score 0." in prompt  # the artifacts reach the LLM
    assert "routing: {type: least-loaded}" in res.best_code
    assert res.best_score > 0.85 and res.metrics["combined_score"] == res.best_score
