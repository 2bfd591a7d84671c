"""Python twin of the Go physics configuration and feature computation.

The Go packages physics (constants) and features (the 11 alpha and 16 beta
features) are authoritative; docs/physics-spec.md states the formulas and the
golden fixture testdata/physics_features_golden.json pins the values. The
trainer computes features from traces here, in Python, so every value must
agree with Go to 1e-10 relative. To get there, each formula is written in the
same operation order as the Go source (Go evaluates left to right, in float64,
and does not fuse multiply-adds on amd64; Python and numpy do not fuse either).

Two results are not bit-identical across implementations: pow (MoE activation)
and log1p (alpha queue_drain) come from different math libraries in Go, the C
library (math.pow, math.log1p) and numpy's SIMD kernels. They agree to within
an ulp or two, far inside the 1e-10 tolerance.

Model and hardware specs are parsed the way Go's encoding/json fills the Go
structs (keys matched exactly, else case-insensitively, the later key winning;
JSON null leaving a field unset; a wrong type is an error naming the field),
then validated with the same rules and messages.

Feature inputs are taken as float64. Go's int64 inputs (token and block
counts) are expected to hold integer values; the comparisons Go makes on them
(decode_tokens > 0, scheduled_tokens <= 0, ...) are made on the same values.
"""

from __future__ import annotations

import json
import math
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

EPSILON = 1e-6
FEATURE_MAX = 100.0
NUM_ALPHA = 11
NUM_BETA = 16

ALPHA_NAMES: tuple[str, ...] = (
    "batch_saturation",
    "kv_pressure",
    "admission_compute",
    "base_bias",
    "queue_drain",
    "queue_memory_interaction",
    "prefix_cache_benefit",
    "memory_admission_gap",
    "preemption_disruption",
    "cpu_offload_expansion",
    "queued_regime_bias",
)

BETA_NAMES: tuple[str, ...] = (
    "prefill_linear_compute",
    "prefill_attention",
    "decode_weight_loading",
    "decode_attention_compute",
    "kv_read",
    "batch_utilization",
    "prefill_decode_mix",
    "moe_activation",
    "tp_communication",
    "gqa_ratio",
    "fixed_overhead",
    "preemption_overhead",
    "cpu_offload_transfer",
    "cpu_offload_kv_read",
    "chunked_prefill_mixed",
    "bias",
)

# JSON keys of Go's features.AlphaInput and features.BetaInput, in field order.
ALPHA_INPUT_KEYS: tuple[str, ...] = (
    "running_depth",
    "waiting_depth",
    "kv_usage_ratio",
    "prompt_tokens",
    "prefix_hit_ratio",
    "kv_free_bytes",
    "preemption_ema",
)
BETA_INPUT_KEYS: tuple[str, ...] = (
    "prefill_tokens",
    "decode_tokens",
    "scheduled_tokens",
    "num_prefill_reqs",
    "num_decode_reqs",
    "running_depth",
    "sum_prefill_attn_work",
    "decode_context_tokens",
    "sum_decode_kv_blocks",
    "preemption_ema",
    "transfer_blocks",
    "cpu_resident_read_blocks",
)
# The inputs that are float64 in Go; all the others are int64.
ALPHA_FLOAT_INPUT_KEYS: tuple[str, ...] = ("kv_usage_ratio", "prefix_hit_ratio", "kv_free_bytes", "preemption_ema")
BETA_FLOAT_INPUT_KEYS: tuple[str, ...] = ("sum_prefill_attn_work", "preemption_ema")

DEFAULT_PCIE_EFFICIENCY = 0.75
RUNTIME_OVERHEAD_BYTES = 1 << 30

# physics/data beside the Go code: this file is tools/physics_trainer/physics_trainer/.
DATA_DIR = Path(__file__).resolve().parents[3] / "physics" / "data"


# --- errors and JSON decoding -------------------------------------------------


class FieldError(ValueError):
    """An invalid input field, formatted like Go's physics.FieldError."""

    def __init__(self, source: str, field_name: str, msg: str):
        self.source, self.field, self.msg = source, field_name, msg
        where = f'field "{field_name}": {msg}'
        super().__init__(f"{source}: {where}" if source else where)


def _fmt(v: float) -> str:
    """Formats a float roughly as Go's %v does (no trailing .0)."""
    r = repr(float(v))
    return r[:-2] if r.endswith(".0") else r


# Go types of decoded fields.
_INT, _FLOAT, _BOOL, _STR, _STRS, _RAW = "int", "float64", "bool", "string", "[]string", "raw"
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1


def _json_kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (list, tuple)):
        return "array"
    return "object"


def _check_type(v: Any, kind: str) -> Any:
    """Returns v as the Go type kind, or None when Go would refuse it."""
    if isinstance(v, bool):
        return v if kind == _BOOL else None
    if kind == _INT:
        return v if isinstance(v, int) and _INT_MIN <= v <= _INT_MAX else None
    if kind == _FLOAT:
        if isinstance(v, (int, float)):
            try:
                return float(v)
            except OverflowError:
                return None
        return None
    if kind == _STR:
        return v if isinstance(v, str) else None
    if kind == _STRS:
        return tuple(v) if isinstance(v, (list, tuple)) and all(isinstance(s, str) for s in v) else None
    return None


def _decode(d: Mapping[str, Any], schema: Mapping[str, str], source: str, strict: bool = False) -> dict[str, Any]:
    """Decodes d into the fields of schema as Go's encoding/json would.

    A key matches a field exactly, else case-insensitively; a later key wins.
    null leaves a field unset, except for raw fields, which then hold None.
    Unknown keys are ignored unless strict (DisallowUnknownFields).
    """
    if not isinstance(d, Mapping):
        raise FieldError(source, "", f"expected a JSON object, got JSON {_json_kind(d)}")
    folded = {k.lower(): k for k in schema}
    out: dict[str, Any] = {}
    for key, v in d.items():
        name = key if key in schema else folded.get(str(key).lower())
        if name is None:
            if strict:
                raise FieldError(source, str(key), "unknown field")
            continue
        kind = schema[name]
        if kind == _RAW:
            out[name] = v
            continue
        if v is None:
            continue
        got = _check_type(v, kind)
        if got is None:
            shown = _json_kind(v)
            if shown == "number" and kind == _INT:
                shown = f"number {v}"
            raise FieldError(source, name, f"expected {kind}, got JSON {shown}")
        out[name] = got
    return out


# --- model --------------------------------------------------------------------

# Every config.json key the Go loader understands, with its Go type.
_HF_SCHEMA: dict[str, str] = {
    "model_type": _STR, "architectures": _STRS, "name": _STR, "_name_or_path": _STR,
    "hidden_size": _INT, "n_embd": _INT, "n_embed": _INT,
    "num_hidden_layers": _INT, "n_layer": _INT,
    "num_attention_heads": _INT, "n_head": _INT, "num_key_value_heads": _INT, "head_dim": _INT,
    "intermediate_size": _INT, "n_inner": _INT, "moe_intermediate_size": _INT,
    "vocab_size": _INT, "max_position_embeddings": _INT, "n_positions": _INT,
    "torch_dtype": _STR, "dtype": _STR, "bytes_per_param": _FLOAT,
    "n_mlp_proj": _INT, "hidden_act": _STR, "activation_function": _STR,
    "num_local_experts": _INT, "num_experts": _INT, "n_routed_experts": _INT, "num_experts_per_tok": _INT,
    "shared_expert_intermediate_size": _INT, "n_shared_experts": _INT, "tie_word_embeddings": _BOOL,
    "kv_lora_rank": _INT, "text_config": _RAW, "quantization_config": _RAW,
}

# Whether a model_type's MLP is gated (gate, up and down projections).
_GATED_MODEL_TYPES = {
    "llama": True, "mistral": True, "mixtral": True, "qwen2": True, "qwen2_moe": True,
    "qwen3": True, "qwen3_moe": True, "gemma": True, "gemma2": True, "phi3": True,
    "olmo": True, "olmo2": True, "granite": True, "cohere": True, "internlm2": True,
    "starcoder2": False, "gpt2": False, "gpt_neox": False, "gptj": False, "opt": False,
    "bloom": False, "falcon": False, "phi": False, "gpt_bigcode": False,
}

_DTYPE_BYTES = {
    "float32": 4.0, "float": 4.0, "fp32": 4.0,
    "bfloat16": 2.0, "bf16": 2.0, "float16": 2.0, "half": 2.0, "fp16": 2.0,
    "float8_e4m3fn": 1.0, "float8_e5m2": 1.0, "fp8": 1.0, "int8": 1.0,
}

# Architectures whose MLP width defaults to 4 × hidden when the config leaves it null or out
# (Go's fourHiddenMLPTypes): GPT-2, GPT-J, GPTBigCode read n_inner; BLOOM reads no width at all.
_FOUR_HIDDEN_MLP_TYPES = frozenset({"gpt2", "gptj", "gpt_bigcode", "bloom"})

# Go's physics.DefaultDtype: the dtype of a config that gives none (vLLM's --dtype auto serves it in bfloat16).
DEFAULT_DTYPE = "bfloat16"


def _missing_dtype_note(source: str) -> str:
    return (f"{source or 'model config'}: no torch_dtype: weights taken as {DEFAULT_DTYPE} (2 bytes per parameter), "
            "as vLLM's --dtype auto serves such a model; set torch_dtype or bytes_per_param to change it")


@dataclass(frozen=True)
class ModelSpec:
    """Go's physics.ModelSpec; attribute names are its JSON keys."""

    name: str = ""
    num_hidden_layers: int = 0
    hidden_size: int = 0
    num_attention_heads: int = 0
    num_key_value_heads: int = 0
    head_dim: int = 0
    intermediate_size: int = 0  # per expert for MoE models
    vocab_size: int = 0
    n_mlp_proj: int = 0  # 3 for gated MLPs, 2 otherwise
    bytes_per_param: float = 0.0
    num_local_experts: int = 0  # 0 for dense models
    num_experts_per_tok: int = 0
    shared_expert_intermediate_size: int = 0
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 0
    # Where from_dict assumed a value the config left out (Go's ModelSpec.Notes); not part of the JSON form.
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def is_moe(self) -> bool:
        return self.num_local_experts > 0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "") -> ModelSpec:
        """Resolves a HuggingFace config.json (or a ModelSpec's JSON) like Go's ParseModelConfig."""
        c = _decode(d, _HF_SCHEMA, source)
        if c.get("kv_lora_rank") is not None:
            raise FieldError(source, "kv_lora_rank",
                             "multi-head latent attention is not supported by the physics model")
        if "text_config" in c:
            raise FieldError(source, "text_config",
                             "multimodal configs are not supported; pass the text model's config")
        if "quantization_config" in c and "bytes_per_param" not in c:
            raise FieldError(source, "quantization_config",
                             "quantized weights are not supported unless bytes_per_param is given explicitly")
        m: dict[str, Any] = {"name": c.get("name") or c.get("_name_or_path", "")}

        def pick(*names: str) -> tuple[int, str, bool]:
            for n in names:
                if n in c:
                    return c[n], n, True
            return 0, names[0], False

        def need(*names: str) -> int:
            v, n, ok = pick(*names)
            if not ok:
                raise FieldError(source, n, "missing")
            if v <= 0:
                raise FieldError(source, n, f"must be > 0, got {v}")
            return v

        # BloomConfig: n_embed, when given, is the hidden size.
        m["hidden_size"] = need("n_embed") if "n_embed" in c else need("hidden_size", "n_embd")
        m["num_hidden_layers"] = need("num_hidden_layers", "n_layer")
        m["num_attention_heads"] = need("num_attention_heads", "n_head")
        m["vocab_size"] = need("vocab_size")
        heads = m["num_attention_heads"]

        kv = c.get("num_key_value_heads", heads)  # absent means multi-head attention
        if kv <= 0:
            raise FieldError(source, "num_key_value_heads", f"must be > 0, got {kv}")
        if heads % kv != 0:
            raise FieldError(source, "num_key_value_heads", f"{kv} does not divide num_attention_heads {heads}")
        m["num_key_value_heads"] = kv
        if "head_dim" in c:
            if c["head_dim"] <= 0:
                raise FieldError(source, "head_dim", f"must be > 0, got {c['head_dim']}")
            m["head_dim"] = c["head_dim"]
        else:
            if m["hidden_size"] % heads != 0:
                raise FieldError(source, "num_attention_heads",
                                 f"{heads} does not divide hidden_size {m['hidden_size']} and head_dim is not given")
            m["head_dim"] = m["hidden_size"] // heads

        experts, n, ok = pick("num_local_experts", "num_experts", "n_routed_experts")
        if ok and experts < 0:
            raise FieldError(source, n, f"must be >= 0, got {experts}")
        m["num_local_experts"] = experts
        topk = c.get("num_experts_per_tok")
        if experts > 0:
            if topk is None:
                raise FieldError(source, "num_experts_per_tok", "missing for a mixture-of-experts model")
            if topk <= 0 or topk > experts:
                raise FieldError(source, "num_experts_per_tok", f"must be in [1, {experts}], got {topk}")
            m["num_experts_per_tok"] = topk
        elif topk not in (None, 0) and not ok:
            raise FieldError(source, "num_experts_per_tok", "given without a number of experts")

        # MLP width: per expert for MoE, with moe_intermediate_size taking precedence.
        if experts > 0 and "moe_intermediate_size" in c:
            width, n = c["moe_intermediate_size"], "moe_intermediate_size"
        elif "intermediate_size" in c:
            width, n = c["intermediate_size"], "intermediate_size"
        elif c.get("model_type") == "bloom":
            width, n = 4 * m["hidden_size"], "intermediate_size"  # BloomMLP: always 4 × hidden
        elif "n_embd" in c or c.get("model_type") in _FOUR_HIDDEN_MLP_TYPES:
            width, n = c.get("n_inner", 4 * m["hidden_size"]), "n_inner"  # GPT-2: n_inner null means 4 × n_embd
        else:
            raise FieldError(source, "intermediate_size", "missing")
        if width <= 0:
            raise FieldError(source, n, f"must be > 0, got {width}")
        m["intermediate_size"] = width
        if "shared_expert_intermediate_size" in c:
            shared = c["shared_expert_intermediate_size"]
            if shared < 0:
                raise FieldError(source, "shared_expert_intermediate_size", f"must be >= 0, got {shared}")
            m["shared_expert_intermediate_size"] = shared
        elif c.get("n_shared_experts", 0) > 0:
            m["shared_expert_intermediate_size"] = c["n_shared_experts"] * width

        if "n_mlp_proj" in c:
            m["n_mlp_proj"] = c["n_mlp_proj"]
            if m["n_mlp_proj"] not in (2, 3):
                raise FieldError(source, "n_mlp_proj", f"must be 2 or 3, got {m['n_mlp_proj']}")
        else:
            model_type = c.get("model_type", "")
            gated = _GATED_MODEL_TYPES.get(model_type)
            if gated is None:
                act = c.get("hidden_act", c.get("activation_function", ""))
                if act.lower() in ("silu", "swiglu", "swish"):
                    gated = True
                elif act.lower() in ("gelu", "gelu_new", "relu", "gelu_fast", "gelu_pytorch_tanh"):
                    gated = False
                else:
                    raise FieldError(source, "model_type",
                                     f'unknown model_type "{model_type}" and activation "{act}": cannot tell whether '
                                     "the MLP is gated; set n_mlp_proj to 2 or 3")
            m["n_mlp_proj"] = 3 if gated else 2

        if "bytes_per_param" in c:
            m["bytes_per_param"] = c["bytes_per_param"]
            if not m["bytes_per_param"] > 0:
                raise FieldError(source, "bytes_per_param", f"must be > 0, got {_fmt(m['bytes_per_param'])}")
        else:
            if "torch_dtype" in c:
                dt_field, dt = "torch_dtype", c["torch_dtype"]
            elif "dtype" in c:
                dt_field, dt = "dtype", c["dtype"]
            else:
                dt_field, dt = "torch_dtype", DEFAULT_DTYPE
                m["notes"] = (_missing_dtype_note(source),)
            b = _DTYPE_BYTES.get(dt.removeprefix("torch.").lower())
            if b is None:
                raise FieldError(source, dt_field, f'unknown dtype "{dt}"')
            m["bytes_per_param"] = b

        if "tie_word_embeddings" in c:
            m["tie_word_embeddings"] = c["tie_word_embeddings"]
        elif c.get("model_type") in ("gpt2", "bloom"):
            m["tie_word_embeddings"] = True  # GPT-2 and BLOOM tie input and output embeddings
        v, _, ok = pick("max_position_embeddings", "n_positions")
        if ok:
            m["max_position_embeddings"] = v
        spec = cls(**m)
        spec._validate(source)
        return spec

    def validate(self) -> None:
        """Checks a spec built by hand (from_dict already does)."""
        self._validate(self.name)

    def _validate(self, src: str) -> None:
        for n in ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
                  "head_dim", "intermediate_size", "vocab_size"):
            if getattr(self, n) <= 0:
                raise FieldError(src, n, f"must be > 0, got {getattr(self, n)}")
        if self.num_attention_heads % self.num_key_value_heads != 0:
            raise FieldError(src, "num_key_value_heads", f"{self.num_key_value_heads} does not divide "
                             f"num_attention_heads {self.num_attention_heads}")
        if self.n_mlp_proj not in (2, 3):
            raise FieldError(src, "n_mlp_proj", f"must be 2 or 3, got {self.n_mlp_proj}")
        if not self.bytes_per_param > 0:
            raise FieldError(src, "bytes_per_param", f"must be > 0, got {_fmt(self.bytes_per_param)}")
        if self.num_local_experts < 0:
            raise FieldError(src, "num_local_experts", f"must be >= 0, got {self.num_local_experts}")
        if self.num_local_experts > 0 and not 0 < self.num_experts_per_tok <= self.num_local_experts:
            raise FieldError(src, "num_experts_per_tok",
                             f"must be in [1, {self.num_local_experts}], got {self.num_experts_per_tok}")
        if self.num_local_experts == 0 and self.num_experts_per_tok != 0:
            raise FieldError(src, "num_experts_per_tok", f"must be 0 for a dense model, got {self.num_experts_per_tok}")
        if self.shared_expert_intermediate_size < 0:
            raise FieldError(src, "shared_expert_intermediate_size",
                             f"must be >= 0, got {self.shared_expert_intermediate_size}")

    def to_dict(self) -> dict[str, Any]:
        """The Go JSON form (name and max_position_embeddings omitted when empty)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "notes"}
        for k in ("name", "max_position_embeddings"):
            if not d[k]:
                del d[k]
        return d


# --- hardware -----------------------------------------------------------------

# Python attribute -> Go JSON key.
_HW_KEYS = {
    "name": "name", "tflops_peak": "TFlopsPeak", "bw_peak_tbs": "BwPeakTBs",
    "pcie_bandwidth_gb_s": "pcie_bandwidth_gb_s", "pcie_efficiency": "pcie_efficiency",
    "interconnect_bandwidth_gb_s": "interconnect_bandwidth_gb_s", "memory_gib": "memory_gib",
    "boost_clock_mhz": "boost_clock_mhz", "sources": "sources",
}
_HW_SCHEMA = {
    "name": _STR, "TFlopsPeak": _FLOAT, "BwPeakTBs": _FLOAT, "pcie_bandwidth_gb_s": _FLOAT,
    "pcie_efficiency": _FLOAT, "interconnect_bandwidth_gb_s": _FLOAT, "memory_gib": _FLOAT,
    "boost_clock_mhz": _FLOAT, "sources": _STRS,
}


@dataclass(frozen=True)
class HardwareSpec:
    """Go's physics.HardwareSpec: one accelerator's datasheet figures, bandwidths per direction.

    JSON keys: name, TFlopsPeak, BwPeakTBs, pcie_bandwidth_gb_s, pcie_efficiency,
    interconnect_bandwidth_gb_s, memory_gib, sources.
    """

    name: str = ""
    tflops_peak: float = 0.0  # dense tensor peak, TFLOP/s
    bw_peak_tbs: float = 0.0  # HBM, TB/s
    pcie_bandwidth_gb_s: float = 0.0
    pcie_efficiency: float = 0.0  # 0 means DEFAULT_PCIE_EFFICIENCY
    interconnect_bandwidth_gb_s: float = 0.0  # required for tp > 1
    memory_gib: float = 0.0  # required to derive total_kv_blocks_gpu
    boost_clock_mhz: float = 0.0  # required by feature spec 2.0; 0 means unknown
    sources: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "") -> HardwareSpec:
        """Reads a spec like Go's ParseHardwareSpec: a missing pcie_efficiency is the default."""
        c = _decode(d, _HW_SCHEMA, source)
        eff = c.get("pcie_efficiency")
        if eff is not None and not 0 < eff <= 1:
            raise FieldError(source, "pcie_efficiency", f"must be in (0, 1], got {_fmt(eff)}")
        c["pcie_efficiency"] = DEFAULT_PCIE_EFFICIENCY if eff is None else eff
        spec = cls(**{attr: c[key] for attr, key in _HW_KEYS.items() if key in c})
        spec._validate(source)
        return spec

    def validate(self) -> None:
        """Checks the figures every configuration needs (interconnect and memory are checked where used)."""
        self._validate(self.name)

    def _validate(self, src: str) -> None:
        for attr in ("tflops_peak", "bw_peak_tbs", "pcie_bandwidth_gb_s"):
            v = getattr(self, attr)
            if not v > 0:
                raise FieldError(src, _HW_KEYS[attr], f"must be > 0, got {_fmt(v)}")
        if self.interconnect_bandwidth_gb_s < 0:
            raise FieldError(src, "interconnect_bandwidth_gb_s",
                             f"must be >= 0, got {_fmt(self.interconnect_bandwidth_gb_s)}")
        if self.memory_gib < 0:
            raise FieldError(src, "memory_gib", f"must be >= 0, got {_fmt(self.memory_gib)}")
        if not 0 <= self.boost_clock_mhz < 1e5:
            raise FieldError(src, "boost_clock_mhz", f"must be in [0, 100000) MHz, got {_fmt(self.boost_clock_mhz)}")
        if self.pcie_efficiency < 0 or self.pcie_efficiency > 1:
            raise FieldError(src, "pcie_efficiency", f"must be in (0, 1], got {_fmt(self.pcie_efficiency)}")

    def effective_pcie_efficiency(self) -> float:
        return DEFAULT_PCIE_EFFICIENCY if self.pcie_efficiency == 0 else self.pcie_efficiency

    def to_dict(self) -> dict[str, Any]:
        """The Go JSON form (name, memory_gib and sources omitted when empty)."""
        d = {key: getattr(self, attr) for attr, key in _HW_KEYS.items()}
        d["sources"] = list(d["sources"])
        for k in ("name", "memory_gib", "boost_clock_mhz", "sources"):
            if not d[k]:
                del d[k]
        return d


# --- vLLM knobs ---------------------------------------------------------------

_KNOBS_SCHEMA = {
    "max_num_seqs": _INT, "max_batched_tokens": _INT, "chunked_prefill_enabled": _BOOL, "cpu_offloading": _BOOL,
    "block_size_tokens": _INT, "total_kv_blocks_gpu": _INT, "total_kv_blocks_cpu": _INT,
    "gpu_memory_utilization": _FLOAT, "prefix_caching_enabled": _BOOL,
}


MAX_BLOCK_SIZE_TOKENS = 1024  # Go's physics.MaxBlockSizeTokens


@dataclass(frozen=True)
class VLLMKnobs:
    """Go's physics.VLLMKnobs; attribute names are its JSON keys.

    The defaults are Go's DefaultVLLMKnobs: vLLM V1 defaults, 256 sequences, an
    8192-token budget, and total_kv_blocks_gpu 0, which means derive it.
    """

    max_num_seqs: int = 256
    max_batched_tokens: int = 8192
    chunked_prefill_enabled: bool = True
    cpu_offloading: bool = False
    block_size_tokens: int = 16
    total_kv_blocks_gpu: int = 0
    total_kv_blocks_cpu: int = 0  # required exactly when cpu_offloading
    gpu_memory_utilization: float = 0.9
    prefix_caching_enabled: bool = True

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], base: VLLMKnobs | None = None) -> VLLMKnobs:
        """Overlays d on base (default: the defaults) strictly, as Go decodes knobs; then validates."""
        c = _decode(d, _KNOBS_SCHEMA, "vllm", strict=True)
        k = replace(base if base is not None else cls(), **c)
        k.validate()
        return k

    def validate(self) -> None:
        src = "vllm"
        if self.max_num_seqs <= 0:
            raise FieldError(src, "max_num_seqs", f"must be > 0, got {self.max_num_seqs}")
        if self.max_batched_tokens <= 0:
            raise FieldError(src, "max_batched_tokens",
                             f"must be > 0, got {self.max_batched_tokens} "
                             "(the deployment's effective token budget per step)")
        if self.block_size_tokens <= 0 or self.block_size_tokens > MAX_BLOCK_SIZE_TOKENS:
            raise FieldError(src, "block_size_tokens", f"must be in [1, {MAX_BLOCK_SIZE_TOKENS}], got "
                             f"{self.block_size_tokens} (vLLM's GPU block sizes are 1 to 128 tokens)")
        if self.total_kv_blocks_gpu < 0:
            raise FieldError(src, "total_kv_blocks_gpu", f"must be >= 0, got {self.total_kv_blocks_gpu}")
        if self.total_kv_blocks_cpu < 0:
            raise FieldError(src, "total_kv_blocks_cpu", f"must be >= 0, got {self.total_kv_blocks_cpu}")
        if self.cpu_offloading and self.total_kv_blocks_cpu == 0:
            raise FieldError(src, "total_kv_blocks_cpu", "must be > 0 when cpu_offloading is on")
        if not self.cpu_offloading and self.total_kv_blocks_cpu != 0:
            raise FieldError(src, "total_kv_blocks_cpu", f"is {self.total_kv_blocks_cpu} but cpu_offloading is off")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise FieldError(src, "gpu_memory_utilization",
                             f"must be in (0, 1], got {_fmt(self.gpu_memory_utilization)}")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# --- shipped specs --------------------------------------------------------------


def _builtin_names(subdir: str) -> list[str]:
    return sorted(p.stem for p in (DATA_DIR / subdir).glob("*.json"))


def builtin_models() -> list[str]:
    return _builtin_names("models")


def builtin_hardware() -> list[str]:
    return _builtin_names("hardware")


def _go_path_base(s: str) -> str:
    """Go's path.Base: the last element, trailing slashes removed, "." for empty."""
    if s == "":
        return "."
    s = s.rstrip("/")
    return posixpath.basename(s) if s else "/"


def _normalize_name(s: str) -> str:
    """Lets "meta-llama/Llama-3.1-8B", "Llama-3.1-8B" and "llama-3.1-8b" name one shipped file."""
    return _go_path_base(s.strip()).lower().removesuffix(".json").removesuffix("-hf")


def _read_named(ref: str, subdir: str, kind: str) -> tuple[Any, str]:
    """Reads a JSON file when ref is an existing file, else a shipped entry; returns (data, source)."""
    path = Path(ref)
    if path.is_file():
        src = ref
    else:
        names = _builtin_names(subdir)
        want = _normalize_name(ref)
        if want not in names:
            raise ValueError(f'{kind} "{ref}" is neither a file nor a shipped {kind} (shipped: {", ".join(names)})')
        path, src = DATA_DIR / subdir / f"{want}.json", "builtin:" + want
    try:
        return json.loads(path.read_text(encoding="utf-8")), src
    except json.JSONDecodeError as e:
        raise ValueError(f"{src}: invalid JSON: {e}") from e


def load_model(name_or_path: str) -> ModelSpec:
    """Loads a model config from a config.json path or a shipped name, like Go's physics.LoadModel."""
    data, src = _read_named(name_or_path, "models", "model")
    m = ModelSpec.from_dict(data, src)
    return m if m.name else replace(m, name=src.removeprefix("builtin:"))


def load_hardware(name_or_path: str) -> HardwareSpec:
    """Loads a hardware spec from a JSON path or a shipped name, like Go's physics.LoadHardware."""
    data, src = _read_named(name_or_path, "hardware", "hardware")
    h = HardwareSpec.from_dict(data, src)
    return h if h.name else replace(h, name=src.removeprefix("builtin:"))


# --- physics configuration ------------------------------------------------------------


@dataclass(frozen=True)
class KVMemoryBudget:
    """The per-device memory split behind a derived total_kv_blocks_gpu, in bytes."""

    requested: float  # memory_gib × 2^30 × gpu_memory_utilization
    weights: float  # resident parameter bytes / tp
    activations: float  # peak activation estimate for one full batch
    overhead: float  # RUNTIME_OVERHEAD_BYTES
    kv: float  # what is left for the KV cache
    block_bytes: float  # one block's bytes on one device
    blocks: int  # floor(kv / block_bytes)


# Go JSON tags of the derived constants, in Go field order.
_CONSTANT_KEYS: tuple[str, ...] = (
    "q_dim", "kv_dim", "flops_attn_linear", "flops_mlp", "flops_lm_head", "flops_linear_per_token",
    "attn_flops_per_work_unit", "weight_bytes_attn", "weight_bytes_mlp", "weight_bytes_lm_head",
    "weight_bytes_total", "weight_bytes_non_expert", "expert_bytes", "param_bytes_resident",
    "kv_bytes_per_token", "block_size_bytes", "hw_peak_flops", "hw_peak_bandwidth", "hw_pcie_bandwidth_eff",
    "hw_interconnect_bw", "hw_clock_hz", "comm_bytes_per_token", "roofline_step_time", "moe_topk_fraction", "gqa_ratio",
    "gpu_kv_capacity_bytes", "cpu_kv_capacity_bytes",
)


@dataclass(frozen=True)
class PhysicsConfig:
    """Constants derived once per (model, hardware, tp, knobs); see Go's physics.PhysicsConfig.

    Build it with new_physics_config. knobs.total_kv_blocks_gpu is resolved
    (derived when it was 0, with kv_budget explaining it; kv_budget is None
    when it was given).
    """

    model: ModelSpec
    hardware: HardwareSpec
    tp: int
    knobs: VLLMKnobs
    kv_budget: KVMemoryBudget | None
    q_dim: float
    kv_dim: float
    flops_attn_linear: float
    flops_mlp: float
    flops_lm_head: float
    flops_linear_per_token: float
    attn_flops_per_work_unit: float
    weight_bytes_attn: float
    weight_bytes_mlp: float
    weight_bytes_lm_head: float
    weight_bytes_total: float
    weight_bytes_non_expert: float
    expert_bytes: float
    param_bytes_resident: float
    kv_bytes_per_token: float
    block_size_bytes: float
    hw_peak_flops: float
    hw_peak_bandwidth: float
    hw_pcie_bandwidth_eff: float
    hw_interconnect_bw: float
    hw_clock_hz: float
    comm_bytes_per_token: float
    roofline_step_time: float
    moe_topk_fraction: float
    gqa_ratio: float
    gpu_kv_capacity_bytes: float
    cpu_kv_capacity_bytes: float

    def moe_activation(self, scheduled_tokens: float) -> float:
        """Expected share of routed experts a step touches, 1 − (1 − k/E)^B; 0 when dense or B ≤ 0."""
        if self.model.num_local_experts == 0 or scheduled_tokens <= 0:
            return 0.0
        return 1 - math.pow(1 - self.moe_topk_fraction, float(scheduled_tokens))

    def effective_weight_bytes(self, scheduled_tokens: float) -> float:
        """Weight traffic of a step: non-expert bytes + expected distinct experts (MoE), else weight_bytes_total."""
        if self.model.num_local_experts == 0:
            return self.weight_bytes_total
        b = _gomax(float(scheduled_tokens), 1.0)
        unique = float(self.model.num_local_experts) * (1 - math.pow(1 - self.moe_topk_fraction, b))
        return self.weight_bytes_non_expert + self.expert_bytes * unique

    def to_dict(self) -> dict[str, float | int]:
        """The constants under their Go JSON keys, plus total_kv_blocks_gpu (the fixture's expected_physics_config)."""
        d: dict[str, float | int] = {k: getattr(self, k) for k in _CONSTANT_KEYS}
        d["total_kv_blocks_gpu"] = self.knobs.total_kv_blocks_gpu
        return d


def new_physics_config(model: ModelSpec, hardware: HardwareSpec, tp: int, knobs: VLLMKnobs) -> PhysicsConfig:
    """Validates the inputs and derives every constant, in Go's operation order.

    A zero knobs.total_kv_blocks_gpu is derived from device memory (_kv_budget).
    """
    model.validate()
    hardware.validate()
    knobs.validate()
    if isinstance(tp, bool) or not isinstance(tp, int):
        raise ValueError(f"tp must be an integer, got {tp!r}")
    if tp < 1:
        raise ValueError(f"tp must be >= 1, got {tp}")
    m, h, k = model, hardware, knobs
    if m.num_attention_heads % tp != 0:
        raise ValueError(f'tp {tp} does not divide num_attention_heads {m.num_attention_heads} of model "{m.name}"')
    if m.num_key_value_heads % tp != 0 and tp % m.num_key_value_heads != 0:
        raise ValueError(f'tp {tp} and num_key_value_heads {m.num_key_value_heads} of model "{m.name}": '
                         "one must divide the other")
    if tp > 1 and not h.interconnect_bandwidth_gb_s > 0:
        raise FieldError(h.name, "interconnect_bandwidth_gb_s", f"must be > 0 for tp {tp}")

    L = float(m.num_hidden_layers)
    hd = float(m.hidden_size)
    dt = m.bytes_per_param
    I = float(m.intermediate_size)  # noqa: E741 - the spec's name
    nproj = float(m.n_mlp_proj)
    vocab = float(m.vocab_size)
    tpf = float(tp)

    q_dim = float(m.num_attention_heads) * float(m.head_dim)
    kv_dim = float(m.num_key_value_heads) * float(m.head_dim)

    # FLOPs: Q and O are h×q_dim, K and V are h×kv_dim; 2 FLOPs per weight.
    flops_attn_linear = 4 * hd * (q_dim + kv_dim)
    flops_mlp = nproj * 2 * hd * I
    weight_bytes_attn = 2 * hd * (q_dim + kv_dim) * dt
    weight_bytes_mlp = nproj * hd * I * dt
    flops_lm_head = 2 * hd * vocab
    weight_bytes_lm_head = hd * vocab * dt
    expert_bytes = weight_bytes_non_expert = moe_topk_fraction = 0.0
    if m.is_moe:
        E = float(m.num_local_experts)
        topk = float(m.num_experts_per_tok)
        shared = float(m.shared_expert_intermediate_size)
        # top_k whole experts per token, a shared expert, and the h×E router.
        flops_mlp = nproj * 2 * hd * I * topk + nproj * 2 * hd * shared + 2 * hd * E
        weight_bytes_mlp = nproj * hd * I * topk * dt + nproj * hd * shared * dt + hd * E * dt
        non_expert_per_layer = weight_bytes_attn + nproj * hd * shared * dt + hd * E * dt
        expert_bytes = L * (nproj * hd * I * dt)
        weight_bytes_non_expert = L * non_expert_per_layer + weight_bytes_lm_head
        param_bytes_resident = L * (non_expert_per_layer + nproj * hd * I * E * dt) + weight_bytes_lm_head
        moe_topk_fraction = topk / E
    else:
        param_bytes_resident = L * (weight_bytes_attn + weight_bytes_mlp) + weight_bytes_lm_head
    if not m.tie_word_embeddings:
        param_bytes_resident += hd * vocab * dt  # input embedding table
    flops_linear_per_token = L * (flops_attn_linear + flops_mlp) + flops_lm_head
    weight_bytes_total = L * (weight_bytes_attn + weight_bytes_mlp) + weight_bytes_lm_head
    attn_flops_per_work_unit = L * 2 * q_dim

    # KV heads are replicated when tp exceeds them: each rank holds at least one.
    kv_heads_stored = tpf if tp > m.num_key_value_heads else float(m.num_key_value_heads)
    kv_bytes_per_token = 2 * L * kv_heads_stored * float(m.head_dim) * dt
    block_size_bytes = float(k.block_size_tokens) * kv_bytes_per_token

    hw_peak_flops = h.tflops_peak * 1e12 * tpf
    hw_peak_bandwidth = h.bw_peak_tbs * 1e12 * tpf
    hw_pcie_bandwidth_eff = h.pcie_bandwidth_gb_s * 1e9 * h.effective_pcie_efficiency() * tpf
    hw_interconnect_bw = h.interconnect_bandwidth_gb_s * 1e9
    hw_clock_hz = h.boost_clock_mhz * 1e6

    # Two all-reduces per layer of h × dtype bytes; a ring sends 2(tp−1)/tp of each.
    comm_bytes_per_token = L * 2 * hd * dt * 2 * (tpf - 1) / tpf if tp > 1 else 0.0
    roofline_step_time = _gomax(float(k.max_batched_tokens) * flops_linear_per_token / hw_peak_flops,
                                weight_bytes_total / hw_peak_bandwidth)
    gqa_ratio = float(m.num_key_value_heads) / float(m.num_attention_heads)

    budget = None
    if k.total_kv_blocks_gpu == 0:
        budget = _kv_budget(m, h, tp, k, param_bytes_resident, kv_bytes_per_token)
        k = replace(k, total_kv_blocks_gpu=budget.blocks)
    return PhysicsConfig(
        model=m, hardware=h, tp=tp, knobs=k, kv_budget=budget,
        q_dim=q_dim, kv_dim=kv_dim,
        flops_attn_linear=flops_attn_linear, flops_mlp=flops_mlp, flops_lm_head=flops_lm_head,
        flops_linear_per_token=flops_linear_per_token, attn_flops_per_work_unit=attn_flops_per_work_unit,
        weight_bytes_attn=weight_bytes_attn, weight_bytes_mlp=weight_bytes_mlp,
        weight_bytes_lm_head=weight_bytes_lm_head, weight_bytes_total=weight_bytes_total,
        weight_bytes_non_expert=weight_bytes_non_expert, expert_bytes=expert_bytes,
        param_bytes_resident=param_bytes_resident,
        kv_bytes_per_token=kv_bytes_per_token, block_size_bytes=block_size_bytes,
        hw_peak_flops=hw_peak_flops, hw_peak_bandwidth=hw_peak_bandwidth,
        hw_pcie_bandwidth_eff=hw_pcie_bandwidth_eff, hw_interconnect_bw=hw_interconnect_bw,
        hw_clock_hz=hw_clock_hz, comm_bytes_per_token=comm_bytes_per_token, roofline_step_time=roofline_step_time,
        moe_topk_fraction=moe_topk_fraction, gqa_ratio=gqa_ratio,
        gpu_kv_capacity_bytes=float(k.total_kv_blocks_gpu) * block_size_bytes,
        cpu_kv_capacity_bytes=float(k.total_kv_blocks_cpu) * block_size_bytes,
    )


def _kv_budget(m: ModelSpec, h: HardwareSpec, tp: int, k: VLLMKnobs,
               param_bytes_resident: float, kv_bytes_per_token: float) -> KVMemoryBudget:
    """Derives the GPU KV block count the way vLLM sizes its cache, per device:
    requested memory minus weights, the activation peak of a full token budget,
    and runtime overhead."""
    if not h.memory_gib > 0:
        raise FieldError(h.name, "memory_gib",
                         "must be > 0 to derive total_kv_blocks_gpu (or give total_kv_blocks_gpu)")
    tpf = float(tp)
    requested = h.memory_gib * float(1 << 30) * k.gpu_memory_utilization
    weights = param_bytes_resident / tpf
    active_mlp = float(m.intermediate_size)
    if m.is_moe:
        topk, shared = float(m.num_experts_per_tok), float(m.shared_expert_intermediate_size)
        active_mlp = topk * float(m.intermediate_size) + shared
    # Gate and up outputs of the MLP plus four hidden-wide buffers per token,
    # and fp32 logits for every sequence that samples.
    activations = (float(k.max_batched_tokens) * (2 * active_mlp / tpf + 4 * float(m.hidden_size)) * m.bytes_per_param
                   + float(k.max_num_seqs) * float(m.vocab_size) * 4)
    overhead = float(RUNTIME_OVERHEAD_BYTES)
    kv = requested - weights - activations - overhead
    block_bytes = float(k.block_size_tokens) * kv_bytes_per_token / tpf
    if kv < block_bytes:
        gib = float(1 << 30)
        raise ValueError(
            f'model "{m.name}" does not fit on "{h.name}" at tp={tp}: {requested / gib:.2f} GiB requested per device, '
            f"{weights / gib:.2f} GiB weights, {activations / gib:.2f} GiB activations, "
            f"{overhead / gib:.2f} GiB overhead leave no KV cache")
    return KVMemoryBudget(requested=requested, weights=weights, activations=activations, overhead=overhead,
                          kv=kv, block_bytes=block_bytes, blocks=int(math.floor(kv / block_bytes)))


# --- features: scalar path ---------------------------------------------------------


def _gomax(a: float, b: float) -> float:
    """Go's built-in max for floats: NaN if either is NaN, and +0 above −0 (Python's max differs on both)."""
    if a != a or b != b:
        return math.nan
    if a == b:
        return b if math.copysign(1.0, a) < 0 else a
    return a if a > b else b


def _div(n: float, d: float) -> float:
    return n / _gomax(EPSILON, d)


def _clamp(x: float) -> float:
    """Bounds a feature to [0, FEATURE_MAX]; −0 becomes +0 and NaN stays NaN."""
    if x <= 0:
        return 0.0
    if x > FEATURE_MAX:
        return FEATURE_MAX
    return x


def _clamp01(x: float) -> float:
    if x < 0:
        return 0.0
    if x > 1:
        return 1.0
    return x


def gate(cfg: PhysicsConfig, running_depth: float, kv_usage_ratio: float) -> tuple[float, float, float]:
    """The congestion gate (s, m, g): g = s + m − s·m with s = running/max_num_seqs and m clamped to [0, 1]."""
    s = _clamp01(_div(float(running_depth), float(cfg.knobs.max_num_seqs)))
    m = _clamp01(float(kv_usage_ratio))
    sm = s * m  # rounded before the sum, as Go's float64(s*m)
    return s, m, s + m - sm


def alpha_features(cfg: PhysicsConfig, inp: Mapping[str, float]) -> list[float]:
    """The 11 alpha features of one queued request; inp has the ALPHA_INPUT_KEYS."""
    k = cfg.knobs
    s, m, g = gate(cfg, inp["running_depth"], inp["kv_usage_ratio"])
    prompt = float(inp["prompt_tokens"])
    waiting = float(inp["waiting_depth"])
    f = [
        s,
        m,
        _div(prompt * cfg.flops_linear_per_token, cfg.hw_peak_flops),
        1.0,
        g * math.log1p(_gomax(0.0, waiting)) * cfg.roofline_step_time,  # log1p is NaN below −1
        _div(g * m * waiting, float(k.max_num_seqs)),
        _div(g * float(inp["prefix_hit_ratio"]) * prompt, float(k.max_batched_tokens)),
        _div(g * prompt * cfg.kv_bytes_per_token, float(inp["kv_free_bytes"])),
        g * float(inp["preemption_ema"]),
        _div(g * float(k.cpu_offloading) * cfg.cpu_kv_capacity_bytes, cfg.gpu_kv_capacity_bytes),
        g,
    ]
    return [_clamp(x) for x in f]


def beta_features(cfg: PhysicsConfig, inp: Mapping[str, float]) -> list[float]:
    """The 16 beta features of one engine step; inp has the BETA_INPUT_KEYS."""
    k = cfg.knobs
    prefill = float(inp["prefill_tokens"])
    decode = float(inp["decode_tokens"])
    sched = float(inp["scheduled_tokens"])
    offload = float(k.cpu_offloading)
    f = [
        _div(prefill * cfg.flops_linear_per_token, cfg.hw_peak_flops),
        _div(float(inp["sum_prefill_attn_work"]) * cfg.attn_flops_per_work_unit, cfg.hw_peak_flops),
        _div(cfg.effective_weight_bytes(sched), cfg.hw_peak_bandwidth) if decode > 0 else 0.0,
        _div(float(inp["decode_context_tokens"]) * cfg.attn_flops_per_work_unit, cfg.hw_peak_flops),
        _div(float(inp["sum_decode_kv_blocks"]) * cfg.block_size_bytes, cfg.hw_peak_bandwidth),
        _div(sched, float(k.max_batched_tokens)),
        _div(prefill, prefill + decode),
        cfg.moe_activation(sched),
        _div(cfg.comm_bytes_per_token * sched, cfg.hw_interconnect_bw),
        cfg.gqa_ratio,
        1 / _gomax(1.0, sched),
        float(inp["preemption_ema"]),
        _div(offload * float(inp["transfer_blocks"]) * cfg.block_size_bytes, cfg.hw_pcie_bandwidth_eff),
        _div(offload * float(inp["cpu_resident_read_blocks"]) * cfg.block_size_bytes, cfg.hw_pcie_bandwidth_eff),
        float(k.chunked_prefill_enabled and inp["num_prefill_reqs"] > 0 and inp["num_decode_reqs"] > 0),
        1.0,
    ]
    return [_clamp(x) for x in f]


# --- features: vectorized path -------------------------------------------------------


def _arrow_column(col: Any) -> np.ndarray:
    """A pyarrow Array or ChunkedArray as float64, converted chunk by chunk into one buffer
    (a single float64 chunk without nulls is used in place); nulls become NaN."""
    chunks = col.chunks if hasattr(col, "chunks") else [col]
    if len(chunks) == 1:
        return np.asarray(chunks[0].to_numpy(zero_copy_only=False), dtype=np.float64)
    out = np.empty(len(col))
    pos = 0
    for ch in chunks:
        out[pos:pos + len(ch)] = ch.to_numpy(zero_copy_only=False)
        pos += len(ch)
    return out


def _columns(cols: Any, keys: tuple[str, ...]) -> tuple[dict[str, np.ndarray], int]:
    """Returns each key's column as a 1-D float64 array (no copy when it already is one) and the row count.

    cols is a mapping of array-likes or a pyarrow Table/RecordBatch.
    """
    is_arrow = hasattr(cols, "schema") and hasattr(cols, "column")
    out: dict[str, np.ndarray] = {}
    for key in keys:
        a = _arrow_column(cols.column(key)) if is_arrow else np.asarray(cols[key], dtype=np.float64)
        if a.ndim != 1:
            raise ValueError(f"column {key!r} must be one-dimensional, got shape {a.shape}")
        out[key] = a
    n = len(out[keys[0]])
    for key, a in out.items():
        if len(a) != n:
            raise ValueError(f"column {key!r} has {len(a)} rows, {keys[0]!r} has {n}")
    return out, n


def _den(d: float) -> float:
    """A constant denominator floored at EPSILON."""
    return _gomax(EPSILON, d)


def _clamp_inplace(a: np.ndarray) -> None:
    """The scalar _clamp on every element: clip keeps NaN, and adding +0 turns −0 into +0."""
    np.clip(a, 0.0, FEATURE_MAX, out=a)
    np.add(a, 0.0, out=a)


def _clamp01_inplace(a: np.ndarray) -> None:
    np.clip(a, 0.0, 1.0, out=a)  # NaN stays NaN


def _mul_div(a: np.ndarray, b: float, d: float, out: np.ndarray) -> None:
    """out = a × b / d, in that order."""
    np.multiply(a, b, out=out)
    np.divide(out, d, out=out)


def alpha_features_batch(cfg: PhysicsConfig, cols: Any) -> np.ndarray:
    """alpha_features for every row: an (n, 11) float64 array in column-major (Fortran) order.

    cols maps each of ALPHA_INPUT_KEYS to a column (a mapping of array-likes,
    or a pyarrow Table or RecordBatch). Same operation order as the scalar path.
    """
    c, n = _columns(cols, ALPHA_INPUT_KEYS)
    k = cfg.knobs
    prompt, waiting = c["prompt_tokens"], c["waiting_depth"]
    f = np.empty((n, NUM_ALPHA), order="F")
    with np.errstate(all="ignore"):
        s, m, g = f[:, 0], f[:, 1], f[:, 10]
        np.divide(c["running_depth"], _den(float(k.max_num_seqs)), out=s)
        _clamp01_inplace(s)
        np.copyto(m, c["kv_usage_ratio"])
        _clamp01_inplace(m)
        np.add(s, m, out=g)
        np.subtract(g, s * m, out=g)

        _mul_div(prompt, cfg.flops_linear_per_token, _den(cfg.hw_peak_flops), f[:, 2])
        f[:, 3] = 1.0
        t = np.maximum(waiting, 0.0)
        np.log1p(t, out=t)
        np.multiply(g, t, out=f[:, 4])
        np.multiply(f[:, 4], cfg.roofline_step_time, out=f[:, 4])
        np.multiply(g, m, out=f[:, 5])
        _mul_div(f[:, 5], waiting, _den(float(k.max_num_seqs)), f[:, 5])
        np.multiply(g, c["prefix_hit_ratio"], out=f[:, 6])
        _mul_div(f[:, 6], prompt, _den(float(k.max_batched_tokens)), f[:, 6])
        np.multiply(g, prompt, out=f[:, 7])
        np.multiply(f[:, 7], cfg.kv_bytes_per_token, out=f[:, 7])
        np.divide(f[:, 7], np.maximum(c["kv_free_bytes"], EPSILON), out=f[:, 7])
        np.multiply(g, c["preemption_ema"], out=f[:, 8])
        np.multiply(g, float(k.cpu_offloading), out=f[:, 9])
        _mul_div(f[:, 9], cfg.cpu_kv_capacity_bytes, _den(cfg.gpu_kv_capacity_bytes), f[:, 9])
        _clamp_inplace(f)
    return f


def beta_features_batch(cfg: PhysicsConfig, cols: Any) -> np.ndarray:
    """beta_features for every row: an (n, 16) float64 array in column-major (Fortran) order.

    cols maps each of BETA_INPUT_KEYS to a column (a mapping of array-likes,
    or a pyarrow Table or RecordBatch). Same operation order as the scalar path.
    """
    c, n = _columns(cols, BETA_INPUT_KEYS)
    k = cfg.knobs
    prefill, decode, sched = c["prefill_tokens"], c["decode_tokens"], c["scheduled_tokens"]
    flops_den, bw_den, pcie_den = _den(cfg.hw_peak_flops), _den(cfg.hw_peak_bandwidth), _den(cfg.hw_pcie_bandwidth_eff)
    moe = cfg.model.num_local_experts > 0
    base = 1 - cfg.moe_topk_fraction
    f = np.empty((n, NUM_BETA), order="F")
    with np.errstate(all="ignore"):
        _mul_div(prefill, cfg.flops_linear_per_token, flops_den, f[:, 0])
        _mul_div(c["sum_prefill_attn_work"], cfg.attn_flops_per_work_unit, flops_den, f[:, 1])

        if moe:
            p = np.power(base, sched)
            np.subtract(1.0, p, out=f[:, 7])
            np.copyto(f[:, 7], 0.0, where=sched <= 0)
            # effective_weight_bytes raises B to at least 1, and base^1 is base
            # (Go's math.Pow(x, 1) is x), so one power serves both features.
            unique = np.where(sched < 1, base, p)
            np.subtract(1.0, unique, out=unique)
            np.multiply(float(cfg.model.num_local_experts), unique, out=unique)
            ewb = cfg.expert_bytes * unique
            np.add(cfg.weight_bytes_non_expert, ewb, out=ewb)
        else:
            f[:, 7] = 0.0
            ewb = cfg.weight_bytes_total
        f[:, 2] = 0.0
        np.divide(ewb, bw_den, out=f[:, 2], where=decode > 0)

        _mul_div(c["decode_context_tokens"], cfg.attn_flops_per_work_unit, flops_den, f[:, 3])
        _mul_div(c["sum_decode_kv_blocks"], cfg.block_size_bytes, bw_den, f[:, 4])
        np.divide(sched, _den(float(k.max_batched_tokens)), out=f[:, 5])
        np.add(prefill, decode, out=f[:, 6])
        np.maximum(f[:, 6], EPSILON, out=f[:, 6])
        np.divide(prefill, f[:, 6], out=f[:, 6])

        np.multiply(cfg.comm_bytes_per_token, sched, out=f[:, 8])
        np.divide(f[:, 8], _den(cfg.hw_interconnect_bw), out=f[:, 8])
        f[:, 9] = cfg.gqa_ratio
        np.maximum(sched, 1.0, out=f[:, 10])
        np.divide(1.0, f[:, 10], out=f[:, 10])
        np.copyto(f[:, 11], c["preemption_ema"])
        offload = float(k.cpu_offloading)
        for i, key in ((12, "transfer_blocks"), (13, "cpu_resident_read_blocks")):
            np.multiply(offload, c[key], out=f[:, i])
            _mul_div(f[:, i], cfg.block_size_bytes, pcie_den, f[:, i])
        if k.chunked_prefill_enabled:
            np.logical_and(c["num_prefill_reqs"] > 0, c["num_decode_reqs"] > 0, out=f[:, 14], casting="unsafe")
        else:
            f[:, 14] = 0.0
        f[:, 15] = 1.0
        _clamp_inplace(f)
    return f


# --- feature spec 2.0 -------------------------------------------------------------

SPEC_V1 = "1.0"
SPEC_V2 = "2.0"
SPEC_V3 = "3.0"
SPECS = (SPEC_V1, SPEC_V2, SPEC_V3)
DEFAULT_SPEC = SPEC_V3
NUM_BETA_V2 = 9
NUM_BETA_V3 = NUM_BETA_V2
BETA_V2_NAMES: tuple[str, ...] = (
    "linear_compute_bound", "linear_memory_bound", "attention_compute", "kv_read", "tp_comm_bandwidth",
    "tp_comm_latency", "layer_latency", "cpu_offload_transfer", "cpu_offload_kv_read",
)
BETA_V3_NAMES: tuple[str, ...] = (
    "linear_compute_bound", "linear_memory_bound", "prefill_attention", "attention_read", "tp_comm_bandwidth",
    "tp_comm_latency", "layer_latency", "cpu_offload_transfer", "cpu_offload_kv_read",
)
COMM_HOP_SECONDS = 1e-5
LAYER_CYCLES = 1000.0


def beta_names_of(spec: str) -> tuple[str, ...]:
    """Go's features.BetaNamesOf."""
    if spec == SPEC_V1:
        return BETA_NAMES
    if spec == SPEC_V2:
        return BETA_V2_NAMES
    if spec == SPEC_V3:
        return BETA_V3_NAMES
    raise ValueError(f'feature spec "{spec}" is not {SPEC_V1}, {SPEC_V2} or {SPEC_V3}')


def check_spec(cfg: PhysicsConfig, spec: str) -> None:
    """Go's features.CheckSpec: specs 2.0 and 3.0 need the GPU's boost clock."""
    beta_names_of(spec)
    if spec != SPEC_V1 and not cfg.hw_clock_hz > 0:
        raise ValueError(f'hardware "{cfg.hardware.name}": boost_clock_mhz is not set; feature spec {spec} '
                         "needs the GPU's boost clock (add it to the hardware spec JSON from the datasheet)")


def qhead_kv_bytes_per_token(cfg: PhysicsConfig) -> float:
    """Go's PhysicsConfig.QHeadKVBytesPerToken: 2 × layers × q_dim × dtype bytes."""
    return 2 * float(cfg.model.num_hidden_layers) * cfg.q_dim * cfg.model.bytes_per_param


def prefill_context_tokens(inp: Mapping[str, float]) -> float:
    """Go's features.PrefillContextTokens."""
    pt = inp["prefill_tokens"]
    if pt <= 0:
        return 0.0
    p = float(pt)
    n = float(inp["num_prefill_reqs"])
    ctx = float(inp["sum_prefill_attn_work"]) / p - p / _gomax(1.0, n)
    return _gomax(0.0, ctx) * n


def beta_features_v2(cfg: PhysicsConfig, inp: Mapping[str, float]) -> list[float]:
    """The 9 spec 2.0 beta features of one step (Go's features.BetaFeaturesV2), same operation order."""
    offload = float(cfg.knobs.cpu_offloading)
    f = [0.0] * NUM_BETA_V2
    f[7] = _div(offload * float(inp["transfer_blocks"]) * cfg.block_size_bytes, cfg.hw_pcie_bandwidth_eff)
    f[8] = _div(offload * float(inp["cpu_resident_read_blocks"]) * cfg.block_size_bytes, cfg.hw_pcie_bandwidth_eff)
    if inp["scheduled_tokens"] > 0:
        sched = float(inp["scheduled_tokens"])
        layers = float(cfg.model.num_hidden_layers)
        compute = _div(sched * cfg.flops_linear_per_token, cfg.hw_peak_flops)
        memory = _div(cfg.effective_weight_bytes(sched), cfg.hw_peak_bandwidth)
        if compute >= memory:
            f[0] = compute
        else:
            f[1] = memory
        ctx = float(inp["decode_context_tokens"])
        f[2] = _div((float(inp["sum_prefill_attn_work"]) + 2 * ctx) * cfg.attn_flops_per_work_unit, cfg.hw_peak_flops)
        f[3] = _div((ctx + prefill_context_tokens(inp)) * cfg.kv_bytes_per_token, cfg.hw_peak_bandwidth)
        if cfg.tp > 1:
            f[4] = _div(cfg.comm_bytes_per_token * sched, cfg.hw_interconnect_bw)
            f[5] = 2 * layers * 2 * float(cfg.tp - 1) * COMM_HOP_SECONDS
        f[6] = _div(layers * LAYER_CYCLES, cfg.hw_clock_hz)
    return [_clamp(x) for x in f]


def beta_features_v2_batch(cfg: PhysicsConfig, cols: Any) -> np.ndarray:
    """beta_features_v2 for every row: an (n, 9) float64 array, same operation order as the scalar path."""
    c, n = _columns(cols, BETA_INPUT_KEYS)
    sched = c["scheduled_tokens"]
    flops_den, bw_den, pcie_den = _den(cfg.hw_peak_flops), _den(cfg.hw_peak_bandwidth), _den(cfg.hw_pcie_bandwidth_eff)
    f = np.zeros((n, NUM_BETA_V2), order="F")
    with np.errstate(all="ignore"):
        offload = float(cfg.knobs.cpu_offloading)
        for i, key in ((7, "transfer_blocks"), (8, "cpu_resident_read_blocks")):
            np.multiply(offload, c[key], out=f[:, i])
            _mul_div(f[:, i], cfg.block_size_bytes, pcie_den, f[:, i])
        on = sched > 0
        layers = float(cfg.model.num_hidden_layers)
        compute = sched * cfg.flops_linear_per_token
        np.divide(compute, flops_den, out=compute)
        if cfg.model.num_local_experts > 0:
            base = 1 - cfg.moe_topk_fraction
            b = np.maximum(sched, 1.0)
            unique = np.power(base, b)
            np.subtract(1.0, unique, out=unique)
            np.multiply(float(cfg.model.num_local_experts), unique, out=unique)
            ewb = cfg.expert_bytes * unique
            np.add(cfg.weight_bytes_non_expert, ewb, out=ewb)
            memory = ewb / bw_den
        else:
            memory = np.full(n, cfg.weight_bytes_total / bw_den)
        cb = compute >= memory
        f[:, 0] = np.where(on & cb, compute, 0.0)
        f[:, 1] = np.where(on & ~cb, memory, 0.0)
        ctx = c["decode_context_tokens"]
        a = 2 * ctx
        np.add(c["sum_prefill_attn_work"], a, out=a)
        np.multiply(a, cfg.attn_flops_per_work_unit, out=a)
        np.divide(a, flops_den, out=a)
        f[:, 2] = np.where(on, a, 0.0)
        p = c["prefill_tokens"]
        nreq = c["num_prefill_reqs"]
        pctx = c["sum_prefill_attn_work"] / p - p / np.maximum(1.0, nreq)
        pctx = np.maximum(0.0, pctx) * nreq
        pctx = np.where(p > 0, pctx, 0.0)
        kv = ctx + pctx
        np.multiply(kv, cfg.kv_bytes_per_token, out=kv)
        np.divide(kv, bw_den, out=kv)
        f[:, 3] = np.where(on, kv, 0.0)
        if cfg.tp > 1:
            comm = cfg.comm_bytes_per_token * sched
            np.divide(comm, _den(cfg.hw_interconnect_bw), out=comm)
            f[:, 4] = np.where(on, comm, 0.0)
            f[:, 5] = np.where(on, 2 * layers * 2 * float(cfg.tp - 1) * COMM_HOP_SECONDS, 0.0)
        f[:, 6] = np.where(on, layers * LAYER_CYCLES / _den(cfg.hw_clock_hz), 0.0)
        _clamp_inplace(f)
    return f


def beta_features_v3(cfg: PhysicsConfig, inp: Mapping[str, float]) -> list[float]:
    """The 9 spec 3.0 beta features of one step (Go's features.BetaFeaturesV3): spec 2.0's, with prefill
    attention alone in feature 3 and attention's KV read once per query head in feature 4."""
    f = beta_features_v2(cfg, inp)
    if inp["scheduled_tokens"] > 0:
        f[2] = _clamp(_div(float(inp["sum_prefill_attn_work"]) * cfg.attn_flops_per_work_unit, cfg.hw_peak_flops))
        ctx = float(inp["decode_context_tokens"])
        f[3] = _clamp(_div((ctx + prefill_context_tokens(inp)) * qhead_kv_bytes_per_token(cfg), cfg.hw_peak_bandwidth))
    return f


def beta_features_v3_batch(cfg: PhysicsConfig, cols: Any) -> np.ndarray:
    """beta_features_v3 for every row: an (n, 9) float64 array, same operation order as the scalar path."""
    f = beta_features_v2_batch(cfg, cols)
    c, n = _columns(cols, BETA_INPUT_KEYS)
    sched = c["scheduled_tokens"]
    flops_den, bw_den = _den(cfg.hw_peak_flops), _den(cfg.hw_peak_bandwidth)
    with np.errstate(all="ignore"):
        on = sched > 0
        a = c["sum_prefill_attn_work"] * cfg.attn_flops_per_work_unit
        np.divide(a, flops_den, out=a)
        f[:, 2] = np.where(on, a, 0.0)
        p = c["prefill_tokens"]
        nreq = c["num_prefill_reqs"]
        pctx = c["sum_prefill_attn_work"] / p - p / np.maximum(1.0, nreq)
        pctx = np.maximum(0.0, pctx) * nreq
        pctx = np.where(p > 0, pctx, 0.0)
        kv = c["decode_context_tokens"] + pctx
        np.multiply(kv, qhead_kv_bytes_per_token(cfg), out=kv)
        np.divide(kv, bw_den, out=kv)
        f[:, 3] = np.where(on, kv, 0.0)
        _clamp_inplace(f)
    return f


def lower_bound_seconds_batch(cfg: PhysicsConfig, cols: Any) -> np.ndarray:
    """Go's features.LowerBoundSeconds for every row: the step's FLOPs at peak FLOP/s or its bytes (weights once,
    the KV it reads) at peak bandwidth, whichever is longer; 0 for a step without scheduled tokens."""
    c, n = _columns(cols, BETA_INPUT_KEYS)
    sched = c["scheduled_tokens"]
    with np.errstate(all="ignore"):
        ctx = c["decode_context_tokens"]
        flops = sched * cfg.flops_linear_per_token + (c["sum_prefill_attn_work"] + 2 * ctx) * cfg.attn_flops_per_work_unit
        if cfg.model.num_local_experts > 0:
            b = np.maximum(sched, 1.0)
            unique = float(cfg.model.num_local_experts) * (1 - np.power(1 - cfg.moe_topk_fraction, b))
            weights = cfg.weight_bytes_non_expert + cfg.expert_bytes * unique
        else:
            weights = np.full(n, cfg.weight_bytes_total)
        p = c["prefill_tokens"]
        nreq = c["num_prefill_reqs"]
        pctx = np.maximum(0.0, c["sum_prefill_attn_work"] / p - p / np.maximum(1.0, nreq)) * nreq
        pctx = np.where(p > 0, pctx, 0.0)
        nbytes = weights + (ctx + pctx) * cfg.kv_bytes_per_token
        lb = np.maximum(flops / cfg.hw_peak_flops, nbytes / cfg.hw_peak_bandwidth)
    return np.where(sched > 0, lb, 0.0)


def beta_features_of(spec: str, cfg: PhysicsConfig, inp: Mapping[str, float]) -> list[float]:
    """The beta features of spec for one step."""
    if spec == SPEC_V3:
        return beta_features_v3(cfg, inp)
    return beta_features_v2(cfg, inp) if spec == SPEC_V2 else beta_features(cfg, inp)


def beta_features_batch_of(spec: str, cfg: PhysicsConfig, cols: Any) -> np.ndarray:
    """The beta features of spec for every row."""
    if spec == SPEC_V3:
        return beta_features_v3_batch(cfg, cols)
    return beta_features_v2_batch(cfg, cols) if spec == SPEC_V2 else beta_features_batch(cfg, cols)
