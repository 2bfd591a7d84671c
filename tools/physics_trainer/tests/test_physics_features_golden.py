"""The Python twin against the Go golden fixture.

testdata/physics_features_golden.json is written by the Go code (features/
golden_test.go). Every case is rebuilt here from its JSON alone and compared,
at the fixture's own tolerances, constant by constant, then the gate and MoE
intermediates, then each feature of the scalar and of the vectorized path, so
that a mismatch points at the first quantity that differs.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from physics_trainer import compute_features as cf

REPO_ROOT = Path(__file__).resolve().parents[3]
FIXTURE = json.loads((REPO_ROOT / "testdata" / "physics_features_golden.json").read_text())
CASES = {c["id"]: c for c in FIXTURE["test_cases"]}
REL = FIXTURE["tolerance_relative"]
ABS_ZERO = FIXTURE["tolerance_absolute_zero"]


def close(want: float, got: float) -> bool:
    """The fixture's rule: relative tolerance, or absolute when the expected value is exactly 0."""
    if want == 0:
        return abs(got) <= ABS_ZERO
    return abs(got - want) <= REL * abs(want)


def assert_all_close(what: str, names, want, got) -> None:
    bad = [f"{what}.{n}: want {w!r}, got {g!r}" for n, w, g in zip(names, want, got, strict=True) if not close(w, g)]
    assert not bad, "\n".join(bad)


@functools.cache
def config_of(case_id: str) -> cf.PhysicsConfig:
    cfg = CASES[case_id]["config"]
    model = cf.ModelSpec.from_dict(cfg["model"], case_id + ".config.model")
    hardware = cf.HardwareSpec.from_dict(cfg["hardware"], case_id + ".config.hardware")
    return cf.new_physics_config(model, hardware, cfg["tp"], cf.VLLMKnobs.from_dict(cfg["vllm"]))


def config_key(case: dict) -> str:
    return json.dumps(case["config"], sort_keys=True)


GROUPS: dict[str, list[str]] = {}
for _id, _case in CASES.items():
    GROUPS.setdefault(config_key(_case), []).append(_id)


def columns(rows: list[dict], keys: tuple[str, ...], float_keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Input columns with Go's types: int64 counts, float64 ratios."""
    return {k: np.array([r[k] for r in rows], dtype=np.float64 if k in float_keys else np.int64) for k in keys}


@functools.cache
def batch_of(key: str, container: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Features of every case sharing one config, computed in one vectorized call per vector."""
    ids = GROUPS[key]
    cfg = config_of(ids[0])
    a_cols = columns([CASES[i]["alpha_input"] for i in ids], cf.ALPHA_INPUT_KEYS, cf.ALPHA_FLOAT_INPUT_KEYS)
    b_cols = columns([CASES[i]["beta_input"] for i in ids], cf.BETA_INPUT_KEYS, cf.BETA_FLOAT_INPUT_KEYS)
    if container == "arrow":
        a_cols, b_cols = pa.table(a_cols), pa.RecordBatch.from_pydict(b_cols)
    return ids, cf.alpha_features_batch(cfg, a_cols), cf.beta_features_batch(cfg, b_cols)


def test_fixture_header_matches_the_code():
    assert len(CASES) == len(FIXTURE["test_cases"]) >= 50, "case ids must be unique"
    assert tuple(FIXTURE["alpha_feature_names"]) == cf.ALPHA_NAMES
    assert tuple(FIXTURE["beta_feature_names"]) == cf.BETA_NAMES
    assert (cf.NUM_ALPHA, cf.NUM_BETA) == (len(cf.ALPHA_NAMES), len(cf.BETA_NAMES))
    assert FIXTURE["epsilon"] == cf.EPSILON
    assert FIXTURE["feature_max"] == cf.FEATURE_MAX
    assert (REL, ABS_ZERO) == (1e-10, 1e-15)
    some = FIXTURE["test_cases"][0]
    assert tuple(some["alpha_input"]) == cf.ALPHA_INPUT_KEYS
    assert tuple(some["beta_input"]) == cf.BETA_INPUT_KEYS


@pytest.mark.parametrize("case_id", CASES)
def test_physics_config(case_id):
    want = CASES[case_id]["expected_physics_config"]
    got = config_of(case_id).to_dict()
    assert set(got) == set(want)
    assert_all_close("expected_physics_config", want, want.values(), [got[k] for k in want])


@pytest.mark.parametrize("case_id", CASES)
def test_intermediates(case_id):
    case, cfg = CASES[case_id], config_of(case_id)
    a, sched = case["alpha_input"], case["beta_input"]["scheduled_tokens"]
    want = case["expected_intermediates"]
    got = dict(zip(("gate_s", "gate_m", "gate_g"), cf.gate(cfg, a["running_depth"], a["kv_usage_ratio"]), strict=True))
    got["effective_weight_bytes_step"] = cfg.effective_weight_bytes(sched)
    got["moe_activation_step"] = cfg.moe_activation(sched)
    assert set(got) == set(want)
    assert_all_close("expected_intermediates", want, want.values(), [got[k] for k in want])


@pytest.mark.parametrize("case_id", CASES)
def test_features_scalar(case_id):
    case, cfg = CASES[case_id], config_of(case_id)
    alpha = cf.alpha_features(cfg, case["alpha_input"])
    beta = cf.beta_features(cfg, case["beta_input"])
    assert len(alpha) == cf.NUM_ALPHA and len(beta) == cf.NUM_BETA
    assert_all_close("alpha", cf.ALPHA_NAMES, case["expected_alpha_features"], alpha)
    assert_all_close("beta", cf.BETA_NAMES, case["expected_beta_features"], beta)


@pytest.mark.parametrize("container", ["numpy", "arrow"])
@pytest.mark.parametrize("case_id", CASES)
def test_features_vectorized(case_id, container):
    case = CASES[case_id]
    ids, alpha, beta = batch_of(config_key(case), container)
    assert alpha.shape == (len(ids), cf.NUM_ALPHA) and alpha.dtype == np.float64
    assert beta.shape == (len(ids), cf.NUM_BETA) and beta.dtype == np.float64
    row = ids.index(case_id)
    assert_all_close("alpha", cf.ALPHA_NAMES, case["expected_alpha_features"], alpha[row].tolist())
    assert_all_close("beta", cf.BETA_NAMES, case["expected_beta_features"], beta[row].tolist())


SHIPPED = sorted({
    (c["config"]["model"]["name"], c["config"]["hardware"]["name"])
    for c in FIXTURE["test_cases"]
    if c["id"] != "seed_llama8b_h100_tp1_worked_case"
})


@pytest.mark.parametrize(("model", "hardware"), SHIPPED)
def test_shipped_specs_load_as_in_go(model, hardware):
    """The fixture carries Go's resolution of the shipped config.json files; the loader must agree."""
    case = next(c for c in FIXTURE["test_cases"]
                if (c["config"]["model"].get("name"), c["config"]["hardware"].get("name")) == (model, hardware))
    assert cf.load_model(model).to_dict() == case["config"]["model"]
    h = cf.load_hardware(hardware).to_dict()
    assert h.pop("sources")  # the fixture drops them; they enter no formula
    assert h == case["config"]["hardware"]


# --- feature spec 2.0 --------------------------------------------------------------


def test_fixture_v2_names_match_the_code():
    assert tuple(FIXTURE["beta_v2_feature_names"]) == cf.BETA_V2_NAMES
    assert cf.NUM_BETA_V2 == len(cf.BETA_V2_NAMES)


@pytest.mark.parametrize("case_id", CASES)
def test_features_v2_scalar(case_id):
    case, cfg = CASES[case_id], config_of(case_id)
    want = case["expected_beta_v2_features"]
    if want is None:
        with pytest.raises(ValueError, match="boost_clock_mhz"):
            cf.check_spec(cfg, cf.SPEC_V2)
        return
    cf.check_spec(cfg, cf.SPEC_V2)
    assert_all_close("beta_v2", cf.BETA_V2_NAMES, want, cf.beta_features_v2(cfg, case["beta_input"]))


@pytest.mark.parametrize("case_id", CASES)
def test_features_v2_vectorized(case_id):
    case, cfg = CASES[case_id], config_of(case_id)
    want = case["expected_beta_v2_features"]
    if want is None:
        return
    cols = {k: np.asarray([case["beta_input"][k]], dtype=np.float64) for k in cf.BETA_INPUT_KEYS}
    got = cf.beta_features_v2_batch(cfg, cols)
    assert got.shape == (1, cf.NUM_BETA_V2)
    assert_all_close("beta_v2", cf.BETA_V2_NAMES, want, got[0].tolist())
    # The vectorized path is the scalar one, bit for bit.
    assert got[0].tolist() == cf.beta_features_v2(cfg, case["beta_input"])


# --- feature spec 3.0 --------------------------------------------------------------


def test_fixture_v3_names_match_the_code():
    assert tuple(FIXTURE["beta_v3_feature_names"]) == cf.BETA_V3_NAMES
    assert cf.NUM_BETA_V3 == len(cf.BETA_V3_NAMES)
    assert cf.DEFAULT_SPEC == cf.SPEC_V3


@pytest.mark.parametrize("case_id", CASES)
def test_features_v3_scalar(case_id):
    case, cfg = CASES[case_id], config_of(case_id)
    want = case["expected_beta_v3_features"]
    if want is None:
        with pytest.raises(ValueError, match="boost_clock_mhz"):
            cf.check_spec(cfg, cf.SPEC_V3)
        return
    cf.check_spec(cfg, cf.SPEC_V3)
    assert_all_close("beta_v3", cf.BETA_V3_NAMES, want, cf.beta_features_v3(cfg, case["beta_input"]))
    assert cf.beta_features_of(cf.SPEC_V3, cfg, case["beta_input"]) == cf.beta_features_v3(cfg, case["beta_input"])


@pytest.mark.parametrize("case_id", CASES)
def test_features_v3_vectorized(case_id):
    case, cfg = CASES[case_id], config_of(case_id)
    want = case["expected_beta_v3_features"]
    if want is None:
        return
    cols = {k: np.asarray([case["beta_input"][k]], dtype=np.float64) for k in cf.BETA_INPUT_KEYS}
    got = cf.beta_features_v3_batch(cfg, cols)
    assert got.shape == (1, cf.NUM_BETA_V3)
    assert_all_close("beta_v3", cf.BETA_V3_NAMES, want, got[0].tolist())
    # The vectorized path is the scalar one, bit for bit.
    assert got[0].tolist() == cf.beta_features_v3(cfg, case["beta_input"])
