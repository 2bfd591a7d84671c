"""Edge cases of the feature formulas that the golden fixture only samples.

Expected values come from docs/physics-spec.md, restated in each test, not
from the code's own output: the ε floor, the empty step, MoE saturation, the
gate's clamping, the [0, 100] clamp with −0 and NaN, the loaders' errors, and
the vectorized path agreeing with the scalar one.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from physics_trainer import compute_features as cf
from physics_trainer.compute_features import EPSILON, FieldError, VLLMKnobs

LLAMA = cf.load_model("llama-3.1-8b")
MIXTRAL = cf.load_model("mixtral-8x7b")
H100 = cf.load_hardware("h100-sxm")


@pytest.fixture(scope="module")
def dense():
    return cf.new_physics_config(LLAMA, H100, 1, VLLMKnobs(total_kv_blocks_gpu=4000))


@pytest.fixture(scope="module")
def moe():
    return cf.new_physics_config(MIXTRAL, H100, 2, VLLMKnobs(total_kv_blocks_gpu=15000))


@pytest.fixture(scope="module")
def offload():
    return cf.new_physics_config(LLAMA, H100, 2, VLLMKnobs(total_kv_blocks_gpu=20000, cpu_offloading=True,
                                                           total_kv_blocks_cpu=80000))


def alpha_in(**kw) -> dict[str, float]:
    return {k: 0 for k in cf.ALPHA_INPUT_KEYS} | kw


def beta_in(**kw) -> dict[str, float]:
    return {k: 0 for k in cf.BETA_INPUT_KEYS} | kw


def both_alpha(cfg, inp) -> tuple[list[float], list[float]]:
    """Scalar and vectorized (one-row) alpha features."""
    return cf.alpha_features(cfg, inp), cf.alpha_features_batch(cfg, {k: [v] for k, v in inp.items()})[0].tolist()


def both_beta(cfg, inp) -> tuple[list[float], list[float]]:
    return cf.beta_features(cfg, inp), cf.beta_features_batch(cfg, {k: [v] for k, v in inp.items()})[0].tolist()


def same(a: float, b: float) -> bool:
    """Equal including the sign of zero, NaN equal to NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


# --- empty step, ε floor ----------------------------------------------------------


@pytest.mark.parametrize("name", ["dense", "moe", "offload"])
def test_empty_step_and_idle_engine(name, request):
    cfg = request.getfixturevalue(name)
    # Spec §5/§6: every gated or count-driven feature is 0, the biases are 1,
    # b10 is kv_heads/heads (8/32 for both models) and b11 = 1/max(1, 0) = 1.
    want_alpha = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    want_beta = [0.0] * 9 + [8 / 32, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    for got in both_alpha(cfg, alpha_in()):
        assert all(same(w, g) for w, g in zip(want_alpha, got, strict=True)), got
    for got in both_beta(cfg, beta_in()):
        assert all(same(w, g) for w, g in zip(want_beta, got, strict=True)), got


@pytest.mark.parametrize(("kv_free", "denominator"), [
    (0.0, EPSILON), (1e-9, EPSILON), (EPSILON, EPSILON), (-3.0, EPSILON), (2e-6, 2e-6), (0.5, 0.5),
])
def test_epsilon_floors_the_denominator(dense, kv_free, denominator):
    # a8 = g × prompt × kv_bytes_per_token / max(ε, kv_free_bytes). With no running
    # requests s = 0, so g = m = kv_usage_ratio, small enough to keep a8 unclamped.
    m = 1e-12
    want = m * 1 * dense.kv_bytes_per_token / denominator
    assert 0 < want < 100
    for got in both_alpha(dense, alpha_in(kv_usage_ratio=m, prompt_tokens=1, kv_free_bytes=kv_free)):
        assert got[7] == want


def test_epsilon_keeps_zero_over_zero_at_zero(dense):
    # b7 = prefill / max(ε, prefill + decode) is 0, not NaN, for a step without tokens.
    for got in both_beta(dense, beta_in(num_prefill_reqs=1)):
        assert same(got[6], 0.0)


# --- MoE -------------------------------------------------------------------------------


def test_moe_activation_saturates(moe):
    frac = 2 / 8  # Mixtral: top_k / num_experts
    assert moe.moe_topk_fraction == frac
    assert moe.moe_activation(1) == frac
    assert moe.moe_activation(8) == 1 - (1 - frac) ** 8  # exact: 0.75^8 = 6561/65536
    assert moe.moe_activation(50) == pytest.approx(0.99999943, abs=1e-8)  # spec E15
    assert moe.moe_activation(130) < 1.0  # spec E15: first exactly 1 at B = 131
    assert moe.moe_activation(131) == 1.0
    assert moe.moe_activation(3000) == 1.0
    assert moe.moe_activation(0) == 0.0 and moe.moe_activation(-4) == 0.0


def test_moe_activation_is_zero_for_dense(dense):
    for b in (0, 1, 131, 10**6):
        assert dense.moe_activation(b) == 0.0
        assert dense.effective_weight_bytes(b) == dense.weight_bytes_total


def test_effective_weight_bytes_limits(moe):
    m = MIXTRAL
    assert moe.effective_weight_bytes(0) == moe.effective_weight_bytes(1)  # B is floored at 1
    # Spec §4: at B = 1 the step reads top_k experts, i.e. weight_bytes_total.
    assert moe.effective_weight_bytes(1) == pytest.approx(moe.weight_bytes_total, rel=1e-12)
    # A huge step reads every expert: all resident weights but the input embedding table.
    embedding = m.hidden_size * m.vocab_size * m.bytes_per_param
    assert moe.effective_weight_bytes(10**6) == pytest.approx(moe.param_bytes_resident - embedding, rel=1e-12)


@pytest.mark.parametrize("sched", [1, 8, 50, 131, 3000])
def test_moe_beta_features(moe, sched):
    decode_step = beta_in(decode_tokens=sched, scheduled_tokens=sched, num_decode_reqs=sched)
    prefill_step = beta_in(prefill_tokens=sched, scheduled_tokens=sched, num_prefill_reqs=1)
    want_b8 = 1 - 0.75**sched
    want_b3 = moe.effective_weight_bytes(sched) / moe.hw_peak_bandwidth
    for got in both_beta(moe, decode_step):
        assert got[7] == pytest.approx(want_b8, rel=1e-13)
        assert got[2] == pytest.approx(want_b3, rel=1e-13)
    for got in both_beta(moe, prefill_step):
        assert got[2] == 0.0  # b3 needs decode tokens
        assert got[7] == pytest.approx(want_b8, rel=1e-13)


# --- gate ----------------------------------------------------------------------------


@pytest.mark.parametrize(("running", "kv", "s", "m"), [
    (300, 0.5, 1.0, 0.5),  # oversubscribed: 300/256 clamps to 1 (spec E21)
    (128, 1.7, 0.5, 1.0),
    (128, -0.3, 0.5, 0.0),
    (-10, 0.2, 0.0, 0.2),
    (64, 0.6, 0.25, 0.6),
])
def test_gate_clamps_both_inputs(dense, running, kv, s, m):
    g = s + m - s * m
    assert cf.gate(dense, running, kv) == (s, m, g)
    waiting = 40
    for got in both_alpha(dense, alpha_in(running_depth=running, kv_usage_ratio=kv, waiting_depth=waiting)):
        assert (got[0], got[1], got[10]) == (s, m, g)
        assert got[5] == g * m * waiting / 256  # a6 uses the clamped m


# --- clamp ---------------------------------------------------------------------------


@pytest.mark.parametrize(("ema", "want"), [
    (99.5, 99.5), (100.0, 100.0), (100.5, 100.0), (1e300, 100.0), (math.inf, 100.0),
    (0.25, 0.25), (-0.5, 0.0), (-0.0, 0.0), (-math.inf, 0.0),
])
def test_clamp_bounds_and_signed_zero(offload, ema, want):
    # b12 = preemption_ema and a9 = g × preemption_ema with g = 1 (running = max_num_seqs).
    for got in both_beta(offload, beta_in(preemption_ema=ema)):
        assert same(got[11], want)
    for got in both_alpha(offload, alpha_in(running_depth=256, preemption_ema=ema)):
        assert same(got[8], want)


def test_clamp_caps_physical_features(dense):
    for got in both_alpha(dense, alpha_in(running_depth=256, prompt_tokens=4000, kv_free_bytes=1.0)):
        assert got[7] == 100.0  # a8: 4000 tokens of KV against 1 free byte
    for got in both_beta(dense, beta_in(prefill_tokens=10**12, scheduled_tokens=10**12)):
        assert got[0] == 100.0


def test_negative_zero_inputs_give_positive_zero(dense):
    for got in both_alpha(dense, alpha_in(kv_usage_ratio=-0.0, prefix_hit_ratio=-0.0, preemption_ema=-0.0)):
        assert all(same(x, 0.0) for i, x in enumerate(got) if i != 3), got


# --- NaN -----------------------------------------------------------------------------


def test_nan_kv_usage_propagates_through_the_gate(dense):
    inp = alpha_in(running_depth=10, waiting_depth=5, kv_usage_ratio=math.nan, prompt_tokens=100,
                   prefix_hit_ratio=0.5, kv_free_bytes=1e9, preemption_ema=0.1)
    for got in both_alpha(dense, inp):
        assert got[0] == 10 / 256
        assert got[2] == 100 * dense.flops_linear_per_token / dense.hw_peak_flops
        assert got[3] == 1.0
        # m is NaN, and so is g = s + m − s·m: every gated feature is NaN.
        assert all(math.isnan(got[i]) for i in (1, 4, 5, 6, 7, 8, 9, 10)), got


def test_nan_denominator_is_not_floored(dense):
    # Go's max(ε, NaN) is NaN, where Python's max(ε, NaN) would be ε.
    for got in both_alpha(dense, alpha_in(running_depth=10, prompt_tokens=100, kv_free_bytes=math.nan)):
        assert math.isnan(got[7])
        assert not any(math.isnan(x) for i, x in enumerate(got) if i != 7)


@pytest.mark.parametrize(("key", "index"), [("sum_prefill_attn_work", 1), ("preemption_ema", 11)])
def test_nan_beta_input_stays_in_its_feature(dense, key, index):
    inp = beta_in(prefill_tokens=100, decode_tokens=3, scheduled_tokens=103, num_prefill_reqs=1, num_decode_reqs=3)
    inp[key] = math.nan
    for got in both_beta(dense, inp):
        assert [i for i, x in enumerate(got) if math.isnan(x)] == [index]


# --- scalar against vectorized ---------------------------------------------------------

# Features that call log1p or pow, whose numpy kernels may differ from the C
# library's by an ulp; all the others must be bit-identical.
TRANSCENDENTAL_ALPHA = {4}
TRANSCENDENTAL_BETA = {2, 7}


def random_inputs(rng: np.random.Generator, n: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    def counts(hi: int) -> np.ndarray:
        x = rng.integers(0, hi, n)
        x[rng.random(n) < 0.2] = 0
        return x

    alpha = {
        "running_depth": counts(400), "waiting_depth": counts(3000), "kv_usage_ratio": rng.uniform(-0.2, 1.2, n),
        "prompt_tokens": counts(20000), "prefix_hit_ratio": rng.uniform(0, 1, n),
        "kv_free_bytes": rng.choice([0.0, 1e-9, 1e6, 3e10], n) * rng.random(n),
        "preemption_ema": rng.uniform(-0.1, 2, n),
    }
    prefill, decode = counts(8192), counts(256)
    beta = {
        "prefill_tokens": prefill, "decode_tokens": decode, "scheduled_tokens": prefill + decode,
        "num_prefill_reqs": np.minimum(prefill, counts(4)), "num_decode_reqs": decode,
        "running_depth": decode + counts(8), "sum_prefill_attn_work": prefill * rng.uniform(0, 16384, n),
        "decode_context_tokens": decode * counts(8000), "sum_decode_kv_blocks": decode * counts(500),
        "preemption_ema": rng.uniform(0, 0.5, n),
        "transfer_blocks": counts(2000), "cpu_resident_read_blocks": counts(2000),
    }
    return alpha, beta


def rows(cols: dict[str, np.ndarray]) -> list[dict[str, float]]:
    n = len(next(iter(cols.values())))
    return [{k: v[i].item() for k, v in cols.items()} for i in range(n)]


def assert_rows_match(scalar: list[list[float]], batch: np.ndarray, transcendental: set[int]) -> None:
    want = np.array(scalar)
    for j in range(want.shape[1]):
        if j in transcendental:
            np.testing.assert_allclose(batch[:, j], want[:, j], rtol=1e-13, atol=0, err_msg=f"feature {j}")
        else:
            np.testing.assert_array_equal(batch[:, j], want[:, j], err_msg=f"feature {j}")


@pytest.mark.parametrize("name", ["dense", "moe", "offload"])
def test_vectorized_equals_scalar_on_random_inputs(name, request):
    cfg = request.getfixturevalue(name)
    alpha, beta = random_inputs(np.random.default_rng(20240517), 3000)
    a_batch, b_batch = cf.alpha_features_batch(cfg, alpha), cf.beta_features_batch(cfg, beta)
    assert_rows_match([cf.alpha_features(cfg, r) for r in rows(alpha)], a_batch, TRANSCENDENTAL_ALPHA)
    assert_rows_match([cf.beta_features(cfg, r) for r in rows(beta)], b_batch, TRANSCENDENTAL_BETA)
    # The same columns as a pyarrow Table give the same result, bit for bit.
    np.testing.assert_array_equal(cf.alpha_features_batch(cfg, pa.table(alpha)), a_batch)
    np.testing.assert_array_equal(cf.beta_features_batch(cfg, pa.table(beta)), b_batch)
    # Features vary (the inputs reach them) and stay within [0, 100].
    assert (a_batch.std(axis=0)[[0, 1, 2, 4, 5, 6, 7, 8, 10]] > 0).all()
    assert ((b_batch >= 0) & (b_batch <= 100)).all()


def test_vectorized_checks_its_columns(dense):
    cols = {k: np.zeros(3) for k in cf.BETA_INPUT_KEYS}
    assert cf.beta_features_batch(dense, cols).shape == (3, cf.NUM_BETA)
    assert cf.beta_features_batch(dense, {k: [] for k in cf.BETA_INPUT_KEYS}).shape == (0, cf.NUM_BETA)
    with pytest.raises(ValueError, match="decode_tokens"):
        cf.beta_features_batch(dense, cols | {"decode_tokens": np.zeros(4)})
    with pytest.raises(KeyError, match="preemption_ema"):
        cf.alpha_features_batch(dense, {k: np.zeros(3) for k in cf.ALPHA_INPUT_KEYS if k != "preemption_ema"})


# --- configuration ----------------------------------------------------------------------


def test_kv_blocks_derived_as_the_spec_states():
    # Spec §3.3: Llama-3.1-8B on one H100 at 0.9 gives 28,279 blocks.
    cfg = cf.new_physics_config(LLAMA, H100, 1, VLLMKnobs())
    assert cfg.knobs.total_kv_blocks_gpu == 28279
    b = cfg.kv_budget
    assert b.blocks == math.floor((b.requested - b.weights - b.activations - b.overhead) / b.block_bytes)
    assert cfg.gpu_kv_capacity_bytes == 28279 * cfg.block_size_bytes
    given = cf.new_physics_config(LLAMA, H100, 1, VLLMKnobs(total_kv_blocks_gpu=1234))
    assert given.knobs.total_kv_blocks_gpu == 1234 and given.kv_budget is None


def test_loaders_resolve_names_and_paths():
    assert cf.load_model("meta-llama/Llama-3.1-8B") == LLAMA
    assert cf.load_model(" Llama-2-7b-hf ").name == "llama-2-7b"
    assert cf.load_hardware("H100-SXM.json") == H100
    path = str(cf.DATA_DIR / "models" / "gpt2.json")
    assert replace(cf.load_model(path), name="gpt2") == cf.load_model("gpt2")
    with pytest.raises(ValueError, match="neither a file nor a shipped model"):
        cf.load_model("no-such-model")


def test_model_parsing_rules():
    base = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8,
            "vocab_size": 100, "intermediate_size": 128, "torch_dtype": "torch.bfloat16"}
    m = cf.ModelSpec.from_dict(base)
    assert (m.num_key_value_heads, m.head_dim, m.n_mlp_proj, m.bytes_per_param) == (8, 8, 3, 2.0)  # MHA, 64/8
    moe = cf.ModelSpec.from_dict(base | {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                         "n_shared_experts": 2})
    assert (moe.num_local_experts, moe.intermediate_size, moe.shared_expert_intermediate_size) == (4, 32, 64)
    unknown = cf.ModelSpec.from_dict(base | {"model_type": "new", "hidden_act": "gelu"})
    assert unknown.n_mlp_proj == 2
    # Go's decoder matches keys case-insensitively and the later key wins.
    assert cf.ModelSpec.from_dict(base | {"Vocab_Size": 7}).vocab_size == 7


# Configs that leave the MLP width null or out, or give no dtype, read as transformers and vLLM do
# (Go's TestParseModelConfigArchitectureDefaults, case for case).
@pytest.mark.parametrize(("data", "hidden", "heads", "head_dim", "inter", "nproj", "bpp", "tied", "dtype_note"), [
    pytest.param({"model_type": "bloom", "architectures": ["BloomForCausalLM"], "hidden_size": 1024, "n_layer": 24,
                  "n_head": 16, "n_inner": None, "vocab_size": 250880, "layer_norm_epsilon": 1e-05},
                 1024, 16, 64, 4096, 2, 2.0, True, True, id="bloom-560m"),
    pytest.param({"model_type": "bloom", "n_embed": 14336, "n_layer": 70, "num_attention_heads": 112,
                  "vocab_size": 250880}, 14336, 112, 128, 57344, 2, 2.0, True, True, id="bloom-176b"),
    pytest.param({"model_type": "bloom", "hidden_size": 64, "n_embed": 128, "n_layer": 2, "n_head": 4, "n_inner": 100,
                  "vocab_size": 100, "torch_dtype": "float16"}, 128, 4, 32, 512, 2, 2.0, True, False,
                 id="bloom n_embed wins"),
    pytest.param({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None,
                  "vocab_size": 50257, "torch_dtype": "float32"}, 768, 12, 64, 3072, 2, 4.0, True, False,
                 id="gpt2 n_inner null"),
    pytest.param({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": 1000,
                  "vocab_size": 50257, "torch_dtype": "float32"}, 768, 12, 64, 1000, 2, 4.0, True, False,
                 id="gpt2 n_inner given"),
    pytest.param({"model_type": "gpt_bigcode", "n_embd": 256, "n_layer": 2, "n_head": 4, "vocab_size": 100,
                  "torch_dtype": "bfloat16"}, 256, 4, 64, 1024, 2, 2.0, False, False, id="gpt_bigcode no n_inner"),
    pytest.param({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "intermediate_size": 256, "vocab_size": 100, "torch_dtype": None}, 64, 4, 16, 256, 3, 2.0, False,
                 True, id="llama without dtype"),
])
def test_model_architecture_defaults(data, hidden, heads, head_dim, inter, nproj, bpp, tied, dtype_note):
    m = cf.ModelSpec.from_dict(data, "config.json")
    assert (m.hidden_size, m.num_attention_heads, m.num_key_value_heads, m.head_dim) == (hidden, heads, heads, head_dim)
    assert (m.intermediate_size, m.n_mlp_proj, m.bytes_per_param, m.tie_word_embeddings) == (inter, nproj, bpp, tied)
    if dtype_note:
        assert len(m.notes) == 1 and m.notes[0].startswith("config.json: no torch_dtype") and "bfloat16" in m.notes[0]
    else:
        assert m.notes == ()
    assert "notes" not in m.to_dict()
    assert cf.ModelSpec.from_dict(m.to_dict()) == m  # the JSON form states the assumed values


def test_hardware_defaults():
    h = cf.HardwareSpec.from_dict({"TFlopsPeak": 100, "BwPeakTBs": 1, "pcie_bandwidth_gb_s": 10})
    assert h.pcie_efficiency == 0.75 and h.interconnect_bandwidth_gb_s == 0
    assert cf.HardwareSpec(tflops_peak=1, bw_peak_tbs=1, pcie_bandwidth_gb_s=1).effective_pcie_efficiency() == 0.75


MODEL_BASE = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8,
              "vocab_size": 100, "intermediate_size": 128, "torch_dtype": "bfloat16"}
HW_BASE = {"TFlopsPeak": 100, "BwPeakTBs": 1, "pcie_bandwidth_gb_s": 10}


@pytest.mark.parametrize(("data", "field", "msg"), [
    ({k: v for k, v in MODEL_BASE.items() if k != "hidden_size"}, "hidden_size", "missing"),
    (MODEL_BASE | {"hidden_size": 0}, "hidden_size", "must be > 0, got 0"),
    (MODEL_BASE | {"hidden_size": 64.0}, "hidden_size", "expected int, got JSON number 64.0"),
    (MODEL_BASE | {"num_key_value_heads": 3}, "num_key_value_heads", "3 does not divide num_attention_heads 8"),
    (MODEL_BASE | {"kv_lora_rank": 512}, "kv_lora_rank", "multi-head latent attention"),
    (MODEL_BASE | {"text_config": None}, "text_config", "multimodal"),  # Go's RawMessage holds even null
    (MODEL_BASE | {"quantization_config": {"bits": 4}}, "quantization_config", "unless bytes_per_param"),
    (MODEL_BASE | {"torch_dtype": "int4"}, "torch_dtype", 'unknown dtype "int4"'),
    (MODEL_BASE | {"model_type": "new"}, "model_type", "cannot tell whether the MLP is gated"),
    (MODEL_BASE | {"n_mlp_proj": 4}, "n_mlp_proj", "must be 2 or 3"),
    (MODEL_BASE | {"num_local_experts": 8}, "num_experts_per_tok", "missing for a mixture-of-experts model"),
    (MODEL_BASE | {"num_local_experts": 8, "num_experts_per_tok": 9}, "num_experts_per_tok",
     "must be in [1, 8], got 9"),
    (MODEL_BASE | {"num_experts_per_tok": 2}, "num_experts_per_tok", "given without a number of experts"),
])
def test_invalid_model(data, field, msg):
    with pytest.raises(FieldError) as e:
        cf.ModelSpec.from_dict(data, "m.json")
    assert e.value.field == field and msg in e.value.msg
    assert str(e.value) == f'm.json: field "{field}": {e.value.msg}'


@pytest.mark.parametrize(("data", "field"), [
    ({k: v for k, v in HW_BASE.items() if k != "TFlopsPeak"}, "TFlopsPeak"),
    (HW_BASE | {"BwPeakTBs": "fast"}, "BwPeakTBs"),
    (HW_BASE | {"pcie_efficiency": 1.5}, "pcie_efficiency"),
    (HW_BASE | {"pcie_efficiency": 0}, "pcie_efficiency"),
    (HW_BASE | {"interconnect_bandwidth_gb_s": -1}, "interconnect_bandwidth_gb_s"),
])
def test_invalid_hardware(data, field):
    with pytest.raises(FieldError) as e:
        cf.HardwareSpec.from_dict(data)
    assert e.value.field == field and field in str(e.value)


@pytest.mark.parametrize(("data", "field"), [
    ({"max_num_seqs": 0}, "max_num_seqs"),
    ({"max_batched_tokens": -1}, "max_batched_tokens"),
    ({"block_size_tokens": 0}, "block_size_tokens"),
    ({"total_kv_blocks_gpu": -5}, "total_kv_blocks_gpu"),
    ({"cpu_offloading": True}, "total_kv_blocks_cpu"),
    ({"total_kv_blocks_cpu": 10}, "total_kv_blocks_cpu"),
    ({"gpu_memory_utilization": 0}, "gpu_memory_utilization"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
])
def test_invalid_knobs(data, field):
    with pytest.raises(FieldError) as e:
        VLLMKnobs.from_dict(data)
    assert e.value.field == field and field in str(e.value)
    with pytest.raises(FieldError, match=field):
        cf.new_physics_config(LLAMA, H100, 1, replace(VLLMKnobs(), **data))


@pytest.mark.parametrize(("data", "field"), [
    ({"chunked_prefill_enabled": 1}, "chunked_prefill_enabled"),  # a number is not a JSON bool
    ({"max_num_seqs": 256.0}, "max_num_seqs"),  # Go refuses a fraction-looking number for an int
    ({"max_num_seq": 256}, "max_num_seq"),  # unknown keys are refused, as Go's DisallowUnknownFields
])
def test_knobs_decode_strictly(data, field):
    with pytest.raises(FieldError) as e:
        VLLMKnobs.from_dict(data)
    assert e.value.field == field and field in str(e.value)


@pytest.mark.parametrize(("model", "hardware", "tp", "knobs", "match"), [
    (LLAMA, H100, 0, VLLMKnobs(total_kv_blocks_gpu=1), "tp must be >= 1"),
    (LLAMA, H100, 3, VLLMKnobs(total_kv_blocks_gpu=1), "num_attention_heads"),
    (replace(LLAMA, num_attention_heads=24), H100, 3, VLLMKnobs(total_kv_blocks_gpu=1), "num_key_value_heads"),
    (LLAMA, replace(H100, interconnect_bandwidth_gb_s=0), 2, VLLMKnobs(total_kv_blocks_gpu=1),
     "interconnect_bandwidth_gb_s"),
    (LLAMA, replace(H100, memory_gib=0), 1, VLLMKnobs(), "memory_gib"),
    (cf.load_model("llama-2-70b"), cf.load_hardware("l40s"), 1, VLLMKnobs(), "does not fit"),
    (replace(LLAMA, n_mlp_proj=1), H100, 1, VLLMKnobs(total_kv_blocks_gpu=1), "n_mlp_proj"),
    (LLAMA, replace(H100, tflops_peak=0), 1, VLLMKnobs(total_kv_blocks_gpu=1), "TFlopsPeak"),
])
def test_invalid_physics_config(model, hardware, tp, knobs, match):
    with pytest.raises(ValueError, match=match):
        cf.new_physics_config(model, hardware, tp, knobs)
