"""Write (and read back) the versioned coefficient YAML of Go's ``coefficients`` package.

The layout, key order, comments, version strings and float format are those of
``coefficients.File.Marshal`` (coefficients/layout.go, marshal.go), so that Go's
strict loader (``coefficients.Load``: unknown, missing, duplicate or misordered
keys are errors, versions must be quoted strings, numbers finite) accepts the
file, and a Python-written file differs from a Go-written one only in its
numbers and provenance:

* ``schema_version: 1``, ``feature_spec_version: "1.0"``;
* ``fitted_configs`` (optional: omitted when empty, and a file without it
  loads) after ``applies_to``, one entry per configuration the fit used;
* floats in the shortest form that reads back bit for bit (Go's
  ``strconv.FormatFloat(v, 'g', -1, 64)``: exponent form below 1e-4 and from
  1e6 on, two-digit exponents), always with a decimal point ("0.0", "1.0e-07");
* ``provenance.tool`` is ``physics_trainer`` (the Python trainer) and
  ``provenance.tool_version`` this package's version.

``CoefficientFile.validate`` applies Go's ``File.Validate`` checks before
anything is written. ``load`` reads a file of this layout (Go's or ours) for
``validate.evaluate_file``; it is not a general YAML parser.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import List, Optional

from . import compute_features as cf

__all__ = [
    "SCHEMA_VERSION",
    "FEATURE_SPEC_VERSION",
    "HEADER",
    "AppliesTo",
    "FittedConfig",
    "ARCH_DENSE",
    "ARCH_MOE",
    "Overheads",
    "FitInfo",
    "Input",
    "Provenance",
    "CoefficientFile",
    "format_float",
    "marshal",
    "write",
    "load",
    "parse",
    "tool_version",
]

SCHEMA_VERSION = 1
FEATURE_SPEC_VERSION = cf.DEFAULT_SPEC


def spec_of(version: str) -> str:
    """Go's coefficients.SpecOf: the features spec of a feature_spec_version, by its major version."""
    major = version.split(".")[0]
    return {"1": cf.SPEC_V1, "2": cf.SPEC_V2, "3": cf.SPEC_V3}.get(major, version)


OBJECTIVE_RELATIVE = "relative"
OBJECTIVE_ABSOLUTE = "absolute"
HEADER = "blis physics-model coefficients. The dot products are seconds."

KNOB_KEYS = ("max_num_seqs", "max_batched_tokens", "chunked_prefill_enabled", "cpu_offloading",
             "block_size_tokens", "total_kv_blocks_gpu", "total_kv_blocks_cpu", "gpu_memory_utilization",
             "prefix_caching_enabled")
# The knobs of applies_to.vllm that a fitted_configs entry records (those that
# change feature values), in KNOB_KEYS order.
FITTED_KNOB_KEYS = ("max_num_seqs", "max_batched_tokens", "chunked_prefill_enabled", "cpu_offloading",
                    "block_size_tokens")
ARCH_DENSE, ARCH_MOE = "dense", "moe"
_BOOL_KNOBS = {"chunked_prefill_enabled", "cpu_offloading", "prefix_caching_enabled"}
_FLOAT_KNOBS = {"gpu_memory_utilization"}


def tool_version() -> str:
    """This package's version: its distribution's, else ``__version__``."""
    from importlib import metadata

    try:
        return metadata.version("physics-trainer")
    except metadata.PackageNotFoundError:
        from . import __version__

        return __version__


@dataclass
class AppliesTo:
    model: str
    hardware: str
    tp: int
    vllm: dict  # KNOB_KEYS -> value

    @classmethod
    def from_phys(cls, phys) -> "AppliesTo":
        k = phys.knobs
        return cls(model=phys.model.name, hardware=phys.hardware.name, tp=int(phys.tp),
                   vllm={key: getattr(k, key) for key in KNOB_KEYS})


@dataclass
class FittedConfig:
    """One configuration the coefficients were fitted on (Go's coefficients.FittedConfig)."""
    name: str
    model: str
    hardware: str
    tp: int
    architecture: str  # ARCH_DENSE or ARCH_MOE
    max_num_seqs: int
    max_batched_tokens: int
    chunked_prefill_enabled: bool
    cpu_offloading: bool
    block_size_tokens: int
    samples_beta: int = 0  # usable samples of this configuration (hold-out included)
    samples_alpha: int = 0

    @classmethod
    def from_phys(cls, name: str, phys, samples_beta: int, samples_alpha: int) -> "FittedConfig":
        k = phys.knobs
        return cls(name=name, model=phys.model.name, hardware=phys.hardware.name, tp=int(phys.tp),
                   architecture=ARCH_MOE if phys.model.is_moe else ARCH_DENSE,
                   **{key: getattr(k, key) for key in FITTED_KNOB_KEYS},
                   samples_beta=int(samples_beta), samples_alpha=int(samples_alpha))


@dataclass
class Overheads:
    arrival_base_us: float = 0.0
    arrival_per_prompt_token_us: float = 0.0
    departure_base_us: float = 0.0
    departure_per_output_token_us: float = 0.0


@dataclass
class FitInfo:
    lambda_alpha: float = 0.0
    lambda_beta: float = 0.0
    folds: int = 0
    lambda_grid: List[float] = field(default_factory=list)
    gamma_grid: List[float] = field(default_factory=list)
    alpha_cv_mape: float = 0.0
    beta_cv_mape: float = 0.0
    beta_target: str = ""
    samples_alpha: int = 0
    samples_beta: int = 0
    objective: str = ""  # "" in files written before it was recorded (absolute)


@dataclass
class Input:
    path: str
    sha256: str
    rows: int


@dataclass
class Provenance:
    tool: str = "physics_trainer"
    tool_version: str = "0.1.0"
    command: str = ""
    inputs: List[Input] = field(default_factory=list)
    notes: str = ""


@dataclass
class CoefficientFile:
    applies_to: AppliesTo
    gamma: float
    alpha: List[float]
    beta: List[float]
    overheads: Overheads
    fit: Optional[FitInfo]
    provenance: Provenance
    schema_version: int = SCHEMA_VERSION
    feature_spec_version: str = cf.SPEC_V1  # fit sets its spec
    fitted_configs: List[FittedConfig] = field(default_factory=list)

    def validate(self, source: str = "coefficients") -> None:
        """Go's File.Validate: raise ValueError naming the first bad key path."""
        def fail(path, msg):
            raise ValueError(f"{source}: {path}: {msg}")

        def finite(path, v):
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                fail(path, f"must be a finite number, got {v}")

        def nonneg(path, v):
            finite(path, v)
            if v < 0:
                fail(path, f"must be >= 0, got {v}")

        def fraction(path, v):
            finite(path, v)
            if not (0 < v <= 1):
                fail(path, f"must be in (0, 1], got {v}")

        def text(path, s, required):
            if not isinstance(s, str):
                fail(path, "must be a string")
            if required and not s.strip():
                fail(path, "must not be empty")

        if self.schema_version != SCHEMA_VERSION:
            fail("schema_version", f"must be {SCHEMA_VERSION}, got {self.schema_version}")
        text("feature_spec_version", self.feature_spec_version, True)
        if spec_of(self.feature_spec_version) not in cf.SPECS:
            fail("feature_spec_version", f"{self.feature_spec_version!r} has another major version")
        beta_names = cf.beta_names_of(spec_of(self.feature_spec_version))
        a = self.applies_to
        text("applies_to.model", a.model, True)
        text("applies_to.hardware", a.hardware, True)
        if a.tp < 1:
            fail("applies_to.tp", f"must be >= 1, got {a.tp}")
        k = a.vllm
        for key in KNOB_KEYS:
            if key not in k:
                fail("applies_to.vllm." + key, "missing")
        for key in ("max_num_seqs", "max_batched_tokens", "block_size_tokens"):
            if k[key] <= 0:
                fail("applies_to.vllm." + key, f"must be > 0, got {k[key]}")
        for key in ("total_kv_blocks_gpu", "total_kv_blocks_cpu"):
            if k[key] < 0:
                fail("applies_to.vllm." + key, f"must be >= 0, got {k[key]}")
        if k["cpu_offloading"] and k["total_kv_blocks_cpu"] == 0:
            fail("applies_to.vllm.total_kv_blocks_cpu", "must be > 0 when cpu_offloading is on")
        if not k["cpu_offloading"] and k["total_kv_blocks_cpu"] != 0:
            fail("applies_to.vllm.total_kv_blocks_cpu", "is set but cpu_offloading is off")
        if not (0 < k["gpu_memory_utilization"] <= 1):
            fail("applies_to.vllm.gpu_memory_utilization", f"must be in (0, 1], got {k['gpu_memory_utilization']}")
        for i, fc in enumerate(self.fitted_configs):
            path = f"fitted_configs[{i}]."
            text(path + "name", fc.name, True)
            text(path + "model", fc.model, True)
            text(path + "hardware", fc.hardware, True)
            if fc.tp < 1:
                fail(path + "tp", f"must be >= 1, got {fc.tp}")
            if fc.architecture not in (ARCH_DENSE, ARCH_MOE):
                fail(path + "architecture", f"must be {ARCH_DENSE} or {ARCH_MOE}, got {fc.architecture!r}")
            for key in ("max_num_seqs", "max_batched_tokens", "block_size_tokens"):
                if getattr(fc, key) <= 0:
                    fail(path + key, f"must be > 0, got {getattr(fc, key)}")
            for key in ("samples_beta", "samples_alpha"):
                if getattr(fc, key) < 0:
                    fail(path + key, f"must be >= 0, got {getattr(fc, key)}")
        fraction("gamma", self.gamma)
        if len(self.alpha) != cf.NUM_ALPHA:
            fail("alpha", f"has {len(self.alpha)} values, want {cf.NUM_ALPHA}")
        if len(self.beta) != len(beta_names):
            fail("beta", f"has {len(self.beta)} values, want {len(beta_names)}")
        for n, v in zip(cf.ALPHA_NAMES, self.alpha):
            finite("alpha." + n, v)
        for n, v in zip(beta_names, self.beta):
            finite("beta." + n, v)
        o = self.overheads
        for key in ("arrival_base_us", "arrival_per_prompt_token_us", "departure_base_us",
                    "departure_per_output_token_us"):
            nonneg("overheads." + key, getattr(o, key))
        if self.fit is not None:
            f = self.fit
            nonneg("fit.lambda_alpha", f.lambda_alpha)
            nonneg("fit.lambda_beta", f.lambda_beta)
            if f.folds < 0:
                fail("fit.folds", f"must be >= 0, got {f.folds}")
            for i, v in enumerate(f.lambda_grid):
                nonneg(f"fit.lambda_grid[{i}]", v)
            for i, v in enumerate(f.gamma_grid):
                fraction(f"fit.gamma_grid[{i}]", v)
            nonneg("fit.alpha_cv_mape", f.alpha_cv_mape)
            nonneg("fit.beta_cv_mape", f.beta_cv_mape)
            text("fit.beta_target", f.beta_target, False)
            if f.samples_alpha < 0 or f.samples_beta < 0:
                fail("fit.samples_alpha", "must be >= 0")
        p = self.provenance
        text("provenance.tool", p.tool, True)
        text("provenance.tool_version", p.tool_version, True)
        text("provenance.command", p.command, True)
        for i, inp in enumerate(p.inputs):
            text(f"provenance.inputs[{i}].path", inp.path, True)
            if not re.fullmatch(r"[0-9a-f]{64}", inp.sha256 or ""):
                fail(f"provenance.inputs[{i}].sha256", f"must be 64 lowercase hex digits, got {inp.sha256!r}")
            if inp.rows < 0:
                fail(f"provenance.inputs[{i}].rows", f"must be >= 0, got {inp.rows}")
        text("provenance.notes", p.notes, False)


# ---------------------------------------------------------------------------
# Writing


def format_float(v: float) -> str:
    """Go's coefficients.formatFloat: FormatFloat(v, 'g', -1, 64) with a decimal point."""
    v = float(v)
    if math.isnan(v):
        s = "NaN"
    elif math.isinf(v):
        s = "+Inf" if v > 0 else "-Inf"
    elif v == 0:
        s = "-0" if math.copysign(1.0, v) < 0 else "0"
    else:
        # repr gives the shortest round-tripping digits, as Go's shortest mode.
        r = repr(abs(v))
        m = re.fullmatch(r"(\d+)(?:\.(\d*))?(?:e([+-]?\d+))?", r)
        ip, fp, ex = m.group(1), m.group(2) or "", int(m.group(3) or 0)
        digits = (ip + fp).lstrip("0")
        # decimal point position: value = 0.digits × 10^dp
        lead_zeros = len(ip + fp) - len((ip + fp).lstrip("0"))
        dp = len(ip) + ex - lead_zeros
        digits = digits.rstrip("0") or "0"
        exp = dp - 1
        if exp < -4 or exp >= 6:  # Go's %g rule with eprec = 6 in shortest mode
            mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
            s = f"{mant}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
        elif dp <= 0:
            s = "0." + "0" * (-dp) + digits
        elif dp >= len(digits):
            s = digits + "0" * (dp - len(digits))
        else:
            s = digits[:dp] + "." + digits[dp:]
        if v < 0:
            s = "-" + s
    if any(c in s for c in ".nN"):
        return s
    i = s.find("e")
    if i >= 0:
        return s[:i] + ".0" + s[i:]
    return s + ".0"


_PLAIN_SPECIAL_START = set("-?:,[]{}#&*!|>'\"%@`")
_RESOLVES = re.compile(
    r"^(?:~|null|Null|NULL|true|True|TRUE|false|False|FALSE|y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF"
    r"|[-+]?(?:0|[1-9][0-9_]*)|0o?[0-7_]+|0x[0-9a-fA-F_]+|0b[01_]+"
    r"|[-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*(?:[eE][-+]?[0-9]+)"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|<<|=)$")


def _string(s: str, quoted: bool = False) -> str:
    """A YAML scalar for s: plain when that reads back as this string, else double-quoted."""
    plain = (not quoted and s != "" and s == s.strip() and s[0] not in _PLAIN_SPECIAL_START
             and ": " not in s and " #" not in s and not s.endswith(":") and not _RESOLVES.match(s)
             and all(c >= " " and c != "\x7f" for c in s))
    if plain:
        return s
    return json.dumps(s, ensure_ascii=False)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return format_float(v)
    raise TypeError(f"no writer for {type(v).__name__}")


def marshal(f: CoefficientFile) -> str:
    """The YAML text of f, laid out as Go's coefficients.File.Marshal writes it."""
    f.validate()
    out = ["# " + HEADER, ""]

    def kv(indent: int, key: str, val: str, comment: str = ""):
        line = " " * indent + key + ":" + (" " + val if val != "" else "")
        if comment:
            line += " # " + comment
        out.append(line)

    kv(0, "schema_version", str(f.schema_version))
    kv(0, "feature_spec_version", _string(f.feature_spec_version, quoted=True),
       "docs/physics-spec.md version the features follow")
    a = f.applies_to
    kv(0, "applies_to", "", "the default configuration")
    kv(2, "model", _string(a.model), "physics.ModelSpec.Name")
    kv(2, "hardware", _string(a.hardware), "physics.HardwareSpec.Name")
    kv(2, "tp", str(int(a.tp)))
    kv(2, "vllm", "", "physics.VLLMKnobs")
    for key in KNOB_KEYS:
        v = a.vllm[key]
        if key in _BOOL_KNOBS:
            v = bool(v)
        elif key in _FLOAT_KNOBS:
            v = float(v)
        else:
            v = int(v)
        kv(4, key, _value(v))
    if f.fitted_configs:
        kv(0, "fitted_configs", "", "every configuration the fit used")
        for fc in f.fitted_configs:
            kv(2, "- name", _string(fc.name))
            kv(4, "model", _string(fc.model))
            kv(4, "hardware", _string(fc.hardware))
            kv(4, "tp", str(int(fc.tp)))
            kv(4, "architecture", _string(fc.architecture), "dense or moe")
            for key in FITTED_KNOB_KEYS:
                v = getattr(fc, key)
                kv(4, key, _value(bool(v) if key in _BOOL_KNOBS else int(v)))
            kv(4, "samples_beta", str(int(fc.samples_beta)))
            kv(4, "samples_alpha", str(int(fc.samples_alpha)))
    kv(0, "gamma", format_float(f.gamma), "preemption EMA factor of features a9 and b12")
    kv(0, "alpha", "", "features.AlphaNames, in that order")
    for n, v in zip(cf.ALPHA_NAMES, f.alpha):
        kv(2, n, format_float(v))
    spec = spec_of(f.feature_spec_version)
    kv(0, "beta", "", {cf.SPEC_V2: "features.BetaV2Names, in that order", cf.SPEC_V3: "features.BetaV3Names, in that order"}.get(spec, "features.BetaNames, in that order"))
    for n, v in zip(cf.beta_names_of(spec), f.beta):
        kv(2, n, format_float(v))
    o = f.overheads
    kv(0, "overheads", "", "microseconds, all >= 0")
    kv(2, "arrival_base_us", format_float(o.arrival_base_us), "api.ARRIVED -> journey.QUEUED")
    kv(2, "arrival_per_prompt_token_us", format_float(o.arrival_per_prompt_token_us), "tokenization")
    kv(2, "departure_base_us", format_float(o.departure_base_us), "journey.FINISHED -> api.DEPARTED")
    kv(2, "departure_per_output_token_us", format_float(o.departure_per_output_token_us), "detokenization")
    if f.fit is not None:
        t = f.fit
        kv(0, "fit", "")
        kv(2, "lambda_alpha", format_float(t.lambda_alpha))
        kv(2, "lambda_beta", format_float(t.lambda_beta))
        kv(2, "folds", str(int(t.folds)))
        kv(2, "lambda_grid", "[" + ", ".join(format_float(x) for x in t.lambda_grid) + "]")
        kv(2, "gamma_grid", "[" + ", ".join(format_float(x) for x in t.gamma_grid) + "]")
        kv(2, "alpha_cv_mape", format_float(t.alpha_cv_mape), "fraction")
        kv(2, "beta_cv_mape", format_float(t.beta_cv_mape), "fraction")
        kv(2, "beta_target", _string(t.beta_target))
        kv(2, "samples_alpha", str(int(t.samples_alpha)))
        kv(2, "samples_beta", str(int(t.samples_beta)))
        if t.objective:
            kv(2, "objective", _string(t.objective), "relative or absolute; absent in older files (absolute)")
    p = f.provenance
    kv(0, "provenance", "")
    kv(2, "tool", _string(p.tool))
    kv(2, "tool_version", _string(p.tool_version, quoted=True))
    kv(2, "command", _string(p.command))
    if p.inputs:
        kv(2, "inputs", "")
        for inp in p.inputs:
            out.append("    - path: " + _string(inp.path))
            out.append("      sha256: " + _string(inp.sha256, quoted=True))
            out.append("      rows: " + str(int(inp.rows)))
    if p.notes:
        kv(2, "notes", _string(p.notes))
    return "\n".join(out) + "\n"


def write(f: CoefficientFile, path: str) -> None:
    """Validate f and write it to path (atomically: a temporary file renamed)."""
    text = marshal(f)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------
# Reading (this layout only)


def _strip_comment(line: str) -> str:
    inq = None
    for i, c in enumerate(line):
        if inq:
            if c == "\\" and inq == '"':
                continue
            if c == inq:
                inq = None
        elif c in "\"'":
            inq = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def _scalar(s: str):
    s = s.strip()
    if s.startswith('"'):
        return json.loads(s)
    if s.startswith("'"):
        return s[1:-1].replace("''", "'")
    if s.startswith("["):
        inner = s[1:-1].strip()
        return [_scalar(x) for x in inner.split(",")] if inner else []
    if s in ("true", "false"):
        return s == "true"
    if re.fullmatch(r"[-+]?[0-9]+", s):
        return int(s)
    try:
        return float(s)
    except ValueError:
        return s


def _parse_block(lines, i: int, indent: int):
    """Parse a block mapping or sequence at this indent; returns (value, next index)."""
    if i < len(lines) and lines[i][1].startswith("- ") and lines[i][0] == indent:
        seq = []
        while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
            ind, text = lines[i]
            lines[i] = (ind + 2, text[2:])
            item, i = _parse_block(lines, i, ind + 2)
            seq.append(item)
        return seq, i
    m = {}
    while i < len(lines) and lines[i][0] == indent:
        text = lines[i][1]
        key, _, rest = text.partition(":")
        key = key.strip()
        if key in m:
            raise ValueError(f"duplicate key {key}")
        i += 1
        if rest.strip() == "":
            if i < len(lines) and lines[i][0] > indent:
                m[key], i = _parse_block(lines, i, lines[i][0])
            elif i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
                m[key], i = _parse_block(lines, i, indent)
            else:
                m[key] = None
        else:
            m[key] = _scalar(rest)
    return m, i


def parse(text: str, source: str = "coefficients") -> CoefficientFile:
    """Read a coefficient file of this layout (written by Go or by ``marshal``)."""
    lines = []
    for raw in text.splitlines():
        s = _strip_comment(raw)
        if s.strip():
            lines.append((len(s) - len(s.lstrip(" ")), s.strip()))
    doc, _ = _parse_block(lines, 0, 0)
    try:
        a = doc["applies_to"]
        t = doc.get("fit")
        p = doc["provenance"]
        f = CoefficientFile(
            schema_version=int(doc["schema_version"]),
            feature_spec_version=str(doc["feature_spec_version"]),
            applies_to=AppliesTo(model=str(a["model"]), hardware=str(a["hardware"]), tp=int(a["tp"]),
                                 vllm=dict(a["vllm"])),
            gamma=float(doc["gamma"]),
            alpha=[float(doc["alpha"][n]) for n in cf.ALPHA_NAMES],
            beta=[float(doc["beta"][n]) for n in cf.beta_names_of(spec_of(str(doc["feature_spec_version"])))],
            overheads=Overheads(**{k: float(v) for k, v in doc["overheads"].items()}),
            fit=None if t is None else FitInfo(
                lambda_alpha=float(t["lambda_alpha"]), lambda_beta=float(t["lambda_beta"]), folds=int(t["folds"]),
                lambda_grid=[float(x) for x in t["lambda_grid"]], gamma_grid=[float(x) for x in t["gamma_grid"]],
                alpha_cv_mape=float(t["alpha_cv_mape"]), beta_cv_mape=float(t["beta_cv_mape"]),
                beta_target=str(t["beta_target"] or ""), samples_alpha=int(t["samples_alpha"]),
                samples_beta=int(t["samples_beta"]), objective=str(t.get("objective") or "")),
            fitted_configs=[FittedConfig(name=str(c["name"]), model=str(c["model"]), hardware=str(c["hardware"]),
                                         tp=int(c["tp"]), architecture=str(c["architecture"]),
                                         **{k: (bool(c[k]) if k in _BOOL_KNOBS else int(c[k]))
                                            for k in FITTED_KNOB_KEYS},
                                         samples_beta=int(c["samples_beta"]), samples_alpha=int(c["samples_alpha"]))
                            for c in (doc.get("fitted_configs") or [])],
            provenance=Provenance(tool=str(p["tool"]), tool_version=str(p["tool_version"]),
                                  command=str(p["command"]),
                                  inputs=[Input(path=str(x["path"]), sha256=str(x["sha256"]), rows=int(x["rows"]))
                                          for x in (p.get("inputs") or [])],
                                  notes=str(p.get("notes") or "")),
        )
    except (KeyError, TypeError) as e:
        raise ValueError(f"{source}: missing or malformed key {e}") from e
    f.validate(source)
    return f


def load(path: str) -> CoefficientFile:
    """Read and validate the coefficient file at path."""
    with open(path, encoding="utf-8") as fh:
        return parse(fh.read(), path)
