"""The diagnostic build of the fused DeformConv2d kernel (setup.py's TORCHTRT_EXT_DCN_TRACE=1, read on a GPU by
bench/deform_conv_trace.py): setup.py passes the define and records it, the source compiles with it for sm_90a without
warnings and exports the trace reader, and the regular library exports no such function."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._setup_tree import setup_tree
from tests.plugins._plugin_harness import ROOT, cuda_home

READER = "torchtrt_ext_deform_conv2d_trace"
# stand-in for nvcc (setup.py's orchestration only, nothing is compiled): say its version, log its arguments, create -o
RECORDING_NVCC = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 13.0, V13.0.88"; exit 0; fi
echo "$@" >> "$NVCC_LOG"
while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then : > "$2"; exit 0; fi; shift; done
exit 1
"""


def _setup_build(tmp_path: Path, trace: str | None) -> tuple[list[str], dict]:
    """(the kernel sources' compile commands, build_info.json) of setup.py build_ext in a copy of the checkout."""
    tree, nvcc = setup_tree(tmp_path, RECORDING_NVCC)
    env = {k: v for k, v in os.environ.items() if k != "TORCHTRT_EXT_DCN_TRACE"}
    env.update(TORCHTRT_EXT_NVCC=str(nvcc), TORCHTRT_EXT_CUDA_ARCHS="90", NVCC_LOG=str(tmp_path / "nvcc.log"))
    if trace is not None:
        env["TORCHTRT_EXT_DCN_TRACE"] = trace
    done = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "nvcc.log").read_text().splitlines()
    kernels = [line for line in log if "csrc/kernels/" in line and " -c " in f" {line} "]
    assert len(kernels) == len(list((ROOT / "csrc" / "kernels").glob("*.cu"))), log
    return kernels, json.loads((tree / "torchtrt_ext" / "lib" / "build_info.json").read_text())


@pytest.mark.parametrize("trace, on", [("1", True), (None, False), ("0", False)])
def test_setup_passes_and_records_the_trace_define_only_when_asked(tmp_path: Path, trace: str | None,
                                                                   on: bool) -> None:
    kernels, info = _setup_build(tmp_path, trace)
    assert all(("-DTORCHTRT_EXT_DCN_TRACE" in line.split()) == on for line in kernels), kernels
    assert info.get("dcn_trace", False) == on and set(info) == {"cuda_version", "sm", "ptx"} | ({"dcn_trace"} if on
                                                                                                 else set())


def test_the_trace_build_compiles_for_sm90a_without_warnings_and_exports_its_reader(tmp_path: Path) -> None:
    nvcc = cuda_home() / "bin" / "nvcc"
    if not nvcc.is_file():
        pytest.skip(f"nvcc not found at {nvcc}: set CUDA_HOME to a CUDA toolkit")
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) not installed")
    obj = tmp_path / "deform_conv2d.o"
    flags = ["-c", "-O3", "-std=c++17", "-Xcompiler", "-fPIC,-Wall,-Wextra,-fvisibility=hidden",  # setup.py's
             "-I", str(ROOT / "csrc"), "-gencode", "arch=compute_90a,code=sm_90a", "-DTORCHTRT_EXT_SM90A",
             "-DTORCHTRT_EXT_DCN_TRACE"]
    done = subprocess.run([str(nvcc), *flags, str(ROOT / "csrc" / "kernels" / "deform_conv2d.cu"), "-o", str(obj)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "warning" not in done.stderr.lower(), done.stderr[-3000:]
    symbols = subprocess.run(["nm", "--defined-only", str(obj)], check=True, capture_output=True, text=True).stdout
    assert f" T {READER}\n" in symbols, symbols[-2000:]
