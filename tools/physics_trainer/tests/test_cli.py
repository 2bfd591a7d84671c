"""The command line's --configs file (Go's cmd/calibrate readManifest)."""

from __future__ import annotations

import json

from physics_trainer import cli
from physics_trainer import compute_features as cf


def _model(name):
    return json.dumps({"name": name, "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 100,
                       "torch_dtype": "bfloat16"})


def _hw(name):
    return json.dumps({"name": name, "TFlopsPeak": 100, "BwPeakTBs": 1, "pcie_bandwidth_gb_s": 10, "memory_gib": 80})


def test_manifest_paths_from_its_folder(tmp_path, monkeypatch):
    """Go's TestManifestPathsFromItsFolder: relative tables, model and hardware paths are read from the file's
    folder, not the working directory; shipped names and absolute paths still work."""
    sub = tmp_path / "sub"
    (sub / "hw").mkdir(parents=True)
    (sub / "model.json").write_text(_model("next-to-the-file"))
    (sub / "hw" / "gpu.json").write_text(_hw("next-to-the-file"))
    abs_model = tmp_path / "abs-model.json"
    abs_model.write_text(_model("absolute"))
    cwd = tmp_path / "cwd"  # decoys of the same relative names in the working directory
    (cwd / "hw").mkdir(parents=True)
    (cwd / "model.json").write_text(_model("working-directory"))
    (cwd / "hw" / "gpu.json").write_text(_hw("working-directory"))
    monkeypatch.chdir(cwd)
    path = sub / "configs.yaml"
    path.write_text(f"""configs:
  - name: relative
    tables: [run1/tables]
    model: model.json
    hardware: hw/gpu.json
  - name: shipped
    tables: [{tmp_path / 't'}]
    model: meta-llama/Llama-3.1-8B
    hardware: " h100-sxm "
  - name: absolute
    tables: [t]
    model: {abs_model}
    hardware: h100-sxm.json
""")
    specs = cli._read_manifest(str(path))
    want = [("next-to-the-file", "next-to-the-file", sub / "run1" / "tables"),
            ("llama-3.1-8b", "H100-SXM", tmp_path / "t"),
            ("absolute", "H100-SXM", sub / "t")]
    assert len(specs) == len(want)
    for (name, model, hardware, _tp, _knobs, dirs), (m, h, d) in zip(specs, want):
        assert cf.load_model(model).name == m, name
        assert cf.load_hardware(hardware).name == h, name
        assert dirs == [str(d)], name


def test_offload_rule_is_blis_runs():
    """Go's TestOffloadRuleIsBlisRuns: KV offloading is on exactly when --kv-blocks-cpu > 0; the deprecated
    --cpu-offloading is accepted when it agrees and refused when it does not."""
    import argparse

    import pytest

    def args(kv_cpu, flag):
        return argparse.Namespace(kv_blocks_cpu=kv_cpu, cpu_offloading=flag)

    assert cli._offloading(args(0, None)) is False
    assert cli._offloading(args(1000, None)) is True
    assert cli._offloading(args(1000, True)) is True
    assert cli._offloading(args(0, False)) is False
    with pytest.raises(cli.UsageError, match="--cpu-offloading=true disagrees with --kv-blocks-cpu 0"):
        cli._offloading(args(0, True))
    with pytest.raises(cli.UsageError, match="--cpu-offloading=false disagrees with --kv-blocks-cpu 10"):
        cli._offloading(args(10, False))
    with pytest.raises(cli.UsageError, match="--kv-blocks-cpu must be >= 0"):
        cli._offloading(args(-1, None))


def test_kv_capacity_check_is_gos():
    """Go's TestFitRefusesAnotherModelsTrace: traces whose kv.blocks_total_gpu is more than
    KV_CAPACITY_FACTOR from what the model and GPU hold are refused, the same figures in the message."""
    import pytest

    m, h = cf.load_model("gpt2"), cf.load_hardware("h100-sxm")
    k = cf.VLLMKnobs()
    implied = int(cf.new_physics_config(m, h, 1, k).knobs.total_kv_blocks_gpu)
    cli._check_kv_capacity("c", m, h, 1, k, implied)
    cli._check_kv_capacity("c", m, h, 1, k, int(implied * 1.9))
    cli._check_kv_capacity("c", m, h, 1, k, int(implied / 1.9))
    with pytest.raises(cli.UsageError, match=rf"the traces report 28279 GPU KV blocks .* holds {implied} "):
        cli._check_kv_capacity("c", m, h, 1, k, 28279)
    with pytest.raises(cli.UsageError, match="more than 2× apart"):
        cli._check_kv_capacity("c", m, h, 1, k, implied * 3)
