"""scripts/ci_requirements.sh, which .ci/run calls before the suite: CI fails, saying what is missing, when the [rtx]
extra is broken or the TensorRT headers are not there, instead of skipping the tests that need them (.ci/run used to
print "SKIPPED the wheel test" and exit 0 without headers)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "ci_requirements.sh"
VENV = Path(sys.executable).parent.parent  # this interpreter's environment stands for CI's .venv


def run(root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("TORCHTRT_EXT_TRT_INCLUDE", "TensorRT_ROOT")}
    return subprocess.run(["bash", str(root / "scripts" / "ci_requirements.sh")], capture_output=True, text=True,
                          timeout=300, env={**clean, "VENV": str(VENV), **env})


def test_ci_calls_it_before_the_suite() -> None:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    check, suite = lines.index("bash scripts/ci_requirements.sh"), next(
        i for i, line in enumerate(lines) if line.endswith("bash scripts/test.sh"))
    assert check < suite and not any("SKIPPED" in line or "exit 0" in line for line in lines)


def test_passes_where_both_are_there() -> None:
    pytest.importorskip("tensorrt_rtx", reason="tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')")
    result = run(ROOT)
    assert result.returncode == 0, result.stderr


def test_a_broken_rtx_extra_fails(tmp_path: Path) -> None:
    broken = tmp_path / "site" / "tensorrt_rtx"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('libtensorrt_rtx.so.1: cannot open shared object file')\n")
    result = run(ROOT, PYTHONPATH=f"{broken.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    assert result.returncode == 1
    assert "FAILED: the [rtx] extra is broken" in result.stderr and "libtensorrt_rtx.so.1" in result.stderr
    assert "headers" not in result.stderr  # only what is missing is named


def test_missing_tensorrt_headers_fail(tmp_path: Path) -> None:
    """A clone with no ../shared beside it (and no headers anywhere else setup.py looks)."""
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    for name in ("scripts/ci_requirements.sh", "scripts/build_wheel.py", "setup.py"):
        shutil.copy(ROOT / name, clone / name)
    pythonpath = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    found = subprocess.run([sys.executable, str(clone / "scripts" / "build_wheel.py"), "--headers"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": pythonpath})
    if found.returncode == 0:
        pytest.skip(f"TensorRT headers are installed system-wide here ({found.stdout.strip()}): no clone lacks them")
    result = run(clone, PYTHONPATH=pythonpath)
    assert result.returncode == 1, result.stderr
    assert "FAILED: TensorRT headers (NvInfer.h) not found in" in result.stderr
    assert "../shared/third_party/tensorrt/include" in result.stderr
