"""Builds and runs a host-only check program of csrc/ (nvcc, no GPU): what the plan tests share."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.plugins._plugin_harness import ROOT, cuda_home


def host_check_report(tmp_path_factory: pytest.TempPathFactory, source: Path, *sources: str, libs: tuple[str, ...] = (),
                      failure: str) -> str:
    """stdout of `source` (plus csrc/kernels/`sources`) built for the host and run; skips without nvcc, fails with
    `failure` and the output's end where the program exits non-zero."""
    nvcc = cuda_home() / "bin" / "nvcc"
    if not nvcc.is_file():
        pytest.skip(f"nvcc not found at {nvcc}: set CUDA_HOME to a CUDA toolkit")
    exe = tmp_path_factory.mktemp("plan") / source.stem
    kernels = ROOT / "csrc" / "kernels"
    subprocess.run([str(nvcc), "-std=c++17", "-O1", "-gencode", "arch=compute_75,code=sm_75", "-I", str(ROOT / "csrc"),
                    str(source), *(str(kernels / s) for s in sources), "-o", str(exe), *libs],
                   check=True, capture_output=True, text=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, f"{failure}:\n{run.stdout[-3000:]}"
    return run.stdout
