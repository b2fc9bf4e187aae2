"""scripts/gpu_check.sh on a machine where torch sees no GPU (a CPU-only torch, a broken driver): it fails before
building anything, saying so, instead of running a suite whose gpu tests all skip. Run on a copy of the script in a
scratch clone whose setup.py only records that it was called, with CUDA_VISIBLE_DEVICES empty so that torch sees no
GPU on any machine."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_no_gpu_fails_before_the_build(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "gpu_check.sh", clone / "scripts" / "gpu_check.sh")
    built = tmp_path / "setup_py_ran"
    (clone / "setup.py").write_text(f"open({str(built)!r}, 'w').close()\nraise SystemExit(1)\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)  # the script calls python3: this torch
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "CUDA_VISIBLE_DEVICES": "",
           "BENCH": "0"}
    result = subprocess.run(["bash", str(clone / "scripts" / "gpu_check.sh"), str(tmp_path / "logs")],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "gpu_check: FAILED: torch" in result.stderr and "torch.cuda.is_available() is False" in result.stderr
    assert not built.exists() and not (tmp_path / "logs" / "build.log").exists()
