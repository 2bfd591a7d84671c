"""The blis binary, built once from this checkout, and the sweep's inputs.

A Python-only checkout may lack Go: the tests that need the binary are then
skipped, unless BLIS_REQUIRE_GO is set (scripts/test.sh and .ci/run set it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TESTDATA = REPO / "sweep" / "testdata"
# mixed-slo for 30 s behind least-loaded, over 2 instance counts × 2 rate
# scales × 2 seeds: 8 runs of ~0.02 s.
SMALL = ["--config", str(TESTDATA / "exp.yaml"), "--grid", str(TESTDATA / "grid.yaml")]

if shutil.which("go") is None and os.environ.get("BLIS_REQUIRE_GO"):
    raise RuntimeError("BLIS_REQUIRE_GO is set but go is not on PATH: the tests need it to build blis")


@pytest.fixture(scope="session")
def blis(tmp_path_factory) -> str:
    if shutil.which("go") is None:
        pytest.skip("needs the Go toolchain to build blis")
    path = tmp_path_factory.mktemp("bin") / "blis"
    subprocess.run(["go", "build", "-o", str(path), "./cmd/blis"], cwd=REPO, check=True)
    return str(path)


def go_sweep(blis: str, args: list[str], out: Path) -> bytes:
    """The table blis sweep writes on one machine, sequentially."""
    p = subprocess.run([blis, "sweep", *args, "--workers", "1", "--quiet", "--out", str(out)], capture_output=True, text=True)
    assert p.returncode in (0,) or 101 <= p.returncode <= 199, p.stderr
    return out.read_bytes()
