"""export_coeffs: Go's float format, the layout, validation, round trip.

The expected float strings are what Go's strconv.FormatFloat(v, 'g', -1, 64)
prints (checked with a Go program), with the decimal point that
coefficients.formatFloat adds.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from physics_trainer import compute_features as cf
from physics_trainer import export_coeffs as ec


@pytest.mark.parametrize("v, want", [
    (0.0, "0.0"), (-0.0, "-0.0"), (100.0, "100.0"), (1.0, "1.0"), (0.1, "0.1"),
    (1e6, "1.0e+06"), (1234567.0, "1.234567e+06"), (123456.7, "123456.7"), (100000.0, "100000.0"),
    (1e20, "1.0e+20"), (1e21, "1.0e+21"), (12345678901234567890.0, "1.2345678901234567e+19"),
    (0.0001, "0.0001"), (0.00001234, "1.234e-05"), (-4.984794062309116e-07, "-4.984794062309116e-07"),
    (2684.041330993588, "2684.041330993588"), (1e-300, "1.0e-300"), (5e-324, "5.0e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"), (0.001, "0.001"), (-12.5, "-12.5"),
])
def test_format_float_is_gos(v, want):
    assert ec.format_float(v) == want
    assert float(want) == v and math.copysign(1, float(want)) == math.copysign(1, v)


def sample_file(**kw) -> ec.CoefficientFile:
    k = cf.VLLMKnobs(total_kv_blocks_gpu=28279)
    f = ec.CoefficientFile(
        applies_to=ec.AppliesTo(model="llama-3.1-8b", hardware="H100-SXM", tp=1, vllm=k.to_dict()),
        gamma=0.3, alpha=[0.001 * (i + 1) for i in range(cf.NUM_ALPHA)], beta=[-1e-7 * i for i in range(cf.NUM_BETA)],
        overheads=ec.Overheads(1200.5, 0.08, 400.0, 1.5),
        fit=ec.FitInfo(lambda_alpha=0.1, lambda_beta=0.01, folds=5, lambda_grid=[0.001, 0.01, 0.1, 1.0, 10.0, 100.0],
                       gamma_grid=[0.1, 0.3, 0.5], alpha_cv_mape=7.5, beta_cv_mape=0.04,
                       beta_target="step_pairs (12) + journey (3)", samples_alpha=10, samples_beta=15),
        provenance=ec.Provenance(tool="physics_trainer", tool_version="0.1.0",
                                 command="python -m physics_trainer fit t/ --notes 'a: b # c'",
                                 inputs=[ec.Input("t/steps.parquet", "ab" * 32, 12)],
                                 notes='fitted on x (y on 1 × z); "quoted"\nnext line'),
        fitted_configs=[
            ec.FittedConfig(name="a", model="llama-3.1-8b", hardware="H100-SXM", tp=1, architecture="dense",
                            max_num_seqs=256, max_batched_tokens=8192, chunked_prefill_enabled=True,
                            cpu_offloading=False, block_size_tokens=16, samples_beta=15, samples_alpha=10),
            ec.FittedConfig(name="yes", model="mixtral-8x7b", hardware="a100-80gb", tp=4, architecture="moe",
                            max_num_seqs=128, max_batched_tokens=2048, chunked_prefill_enabled=False,
                            cpu_offloading=True, block_size_tokens=32, samples_beta=0, samples_alpha=0),
        ],
    )
    for k_, v in kw.items():
        setattr(f, k_, v)
    return f


def test_layout_matches_gos():
    text = ec.marshal(sample_file())
    lines = text.splitlines()
    assert lines[:6] == [
        "# blis physics-model coefficients. The dot products are seconds.",
        "",
        "schema_version: 1",
        'feature_spec_version: "1.0" # docs/physics-spec.md version the features follow',
        "applies_to: # the default configuration",
        "  model: llama-3.1-8b # physics.ModelSpec.Name",
    ]
    i = lines.index("fitted_configs: # every configuration the fit used")
    assert lines[i - 1] == "    prefix_caching_enabled: true" and lines[i + 25].startswith("gamma:")
    assert lines[i + 1:i + 14] == [
        "  - name: a", "    model: llama-3.1-8b", "    hardware: H100-SXM", "    tp: 1",
        "    architecture: dense # dense or moe", "    max_num_seqs: 256", "    max_batched_tokens: 8192",
        "    chunked_prefill_enabled: true", "    cpu_offloading: false", "    block_size_tokens: 16",
        "    samples_beta: 15", "    samples_alpha: 10", '  - name: "yes"']
    assert "  vllm: # physics.VLLMKnobs" in lines
    assert "    gpu_memory_utilization: 0.9" in lines and "    chunked_prefill_enabled: true" in lines
    assert "gamma: 0.3 # preemption EMA factor of features a9 and b12" in lines
    assert "  lambda_grid: [0.001, 0.01, 0.1, 1.0, 10.0, 100.0]" in lines
    assert "  beta_cv_mape: 0.04 # fraction" in lines
    assert '  tool_version: "0.1.0"' in lines
    assert "    - path: t/steps.parquet" in lines and f'      sha256: "{"ab" * 32}"' in lines
    # strings that plain YAML would misread are double-quoted
    assert any(line.startswith('  command: "python -m') for line in lines)
    assert any(line.startswith('  notes: "fitted on') and "\\n" in line for line in lines)
    keys = [line.split(":")[0].strip() for line in lines if line and not line.startswith("#")]
    assert keys[keys.index("alpha") + 1:keys.index("alpha") + 12] == list(cf.ALPHA_NAMES)
    assert keys[keys.index("beta") + 1:keys.index("beta") + 17] == list(cf.BETA_NAMES)


def test_round_trip():
    f = sample_file()
    g = ec.parse(ec.marshal(f))
    assert g == f


def test_optional_parts_are_omitted():
    f = sample_file(fit=None, fitted_configs=[])
    f.provenance.inputs, f.provenance.notes = [], ""
    text = ec.marshal(f)
    assert "\nfit:" not in text and "  inputs:" not in text and "  notes:" not in text
    assert "fitted_configs" not in text
    assert ec.parse(text) == f


@pytest.mark.parametrize("change, path", [
    (lambda f: f.beta.__setitem__(15, math.nan), "beta.bias"),
    (lambda f: f.alpha.__setitem__(0, math.inf), "alpha.batch_saturation"),
    (lambda f: setattr(f, "gamma", 0.0), "gamma"),
    (lambda f: setattr(f.overheads, "departure_base_us", -1.0), "overheads.departure_base_us"),
    (lambda f: setattr(f.provenance.inputs[0], "sha256", "XY"), "provenance.inputs[0].sha256"),
    (lambda f: setattr(f.provenance, "command", " "), "provenance.command"),
    (lambda f: f.applies_to.vllm.__setitem__("total_kv_blocks_cpu", 5), "applies_to.vllm.total_kv_blocks_cpu"),
    (lambda f: setattr(f.fitted_configs[1], "architecture", "ssm"), "fitted_configs[1].architecture"),
    (lambda f: setattr(f.fitted_configs[0], "tp", 0), "fitted_configs[0].tp"),
    (lambda f: setattr(f.fitted_configs[0], "samples_alpha", -1), "fitted_configs[0].samples_alpha"),
])
def test_invalid_files_are_refused(change, path, tmp_path):
    f = sample_file()
    change(f)
    with pytest.raises(ValueError, match=path.replace("[", r"\[").replace("]", r"\]")):
        ec.write(f, str(tmp_path / "c.yaml"))
    assert not (tmp_path / "c.yaml").exists()


GO_TESTDATA = Path(__file__).resolve().parents[3] / "coefficients" / "testdata"


def test_go_golden_reads_and_writes_back_byte_for_byte():
    """Go's Marshal output (coefficients/testdata/valid.golden.yaml, two fitted_configs) is what we write."""
    text = (GO_TESTDATA / "valid.golden.yaml").read_text(encoding="utf-8")
    f = ec.parse(text)
    assert [c.name for c in f.fitted_configs] == ["h100-tp1", "h100-tp2"]
    assert f.fitted_configs[1].tp == 2 and f.fitted_configs[1].samples_alpha == 534
    assert ec.marshal(f) == text


def test_file_without_fitted_configs_loads():
    f = ec.load(str(GO_TESTDATA / "no_fitted_configs.yaml"))
    assert f.fitted_configs == []
    assert "fitted_configs" not in ec.marshal(f)
