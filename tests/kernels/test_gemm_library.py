"""The GEMM library behind DeformConv2d: cuBLASLt loaded at run time, our own kernel where it cannot be.

CPU: which library the kernels library reports under TORCHTRT_EXT_CUBLASLT (off, a file that does not load), and
that the first launch logs it once (a warning when it fell back). GPU (marker gpu): with torch's CUDA wheels the GEMM
is cuBLASLt's, and with cuBLASLt turned off the op still matches float64 through our own kernel.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import kernels_library_or_skip

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _python(code: str, **env: str) -> str:
    """Run `code` in a fresh interpreter (the library is chosen once per process) and return its stdout."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                filter(None, [ROOT, os.environ.get("PYTHONPATH")])), **env})
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_turned_off_by_the_environment() -> None:
    kernels_library_or_skip()
    out = _python("""
        from torchtrt_ext.ops._deform_conv2d_launcher import gemm_library
        print(gemm_library())
    """, TORCHTRT_EXT_CUBLASLT="0")
    assert out.strip() == "own tensor-core GEMM (cuBLASLt turned off by TORCHTRT_EXT_CUBLASLT=0)"


def test_a_file_that_does_not_load_is_named_with_the_loader_error_and_the_remedy() -> None:
    kernels_library_or_skip()
    out = _python("""
        from torchtrt_ext.ops._deform_conv2d_launcher import gemm_library
        print(gemm_library())
    """, TORCHTRT_EXT_CUBLASLT="/nonexistent/libcublasLt.so.13")
    assert out.startswith("own tensor-core GEMM (/nonexistent/libcublasLt.so.13 could not be loaded: ")
    assert "No such file" in out and "install nvidia-cublas" in out


def test_the_first_launch_logs_the_fallback_once_as_a_warning() -> None:
    kernels_library_or_skip()
    out = _python("""
        import logging
        from torchtrt_ext.ops import _deform_conv2d_launcher as full
        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logging.getLogger(full.__name__).addHandler(handler)
        full._log_gemm_library()
        full._log_gemm_library()
        print(len(records), records[0].levelname, records[0].getMessage())
    """, TORCHTRT_EXT_CUBLASLT="0")
    assert out.strip() == "1 WARNING DeformConv2d GEMM: own tensor-core GEMM (cuBLASLt turned off by TORCHTRT_EXT_CUBLASLT=0)"


@pytest.mark.gpu
def test_torch_cuda_brings_cublaslt_and_the_op_uses_it() -> None:
    kernels_library_or_skip()
    out = _python("""
        import torch  # its CUDA wheels load libcublasLt, which the launcher then finds by name
        from torchtrt_ext.ops._deform_conv2d_launcher import gemm_library
        torch.ones(4, 4, device="cuda") @ torch.ones(4, 4, device="cuda")
        print(gemm_library())
    """)
    assert out.startswith("cuBLASLt "), out


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_without_cublaslt_our_own_gemm_matches_float64(dtype: str) -> None:
    kernels_library_or_skip()
    out = _python(f"""
        import torch
        from tests.helpers import rel_err
        from tests.kernels.test_deform_conv2d_full_launcher import CASES, TOLERANCES, _make, _reference_f64, _run
        from torchtrt_ext.ops._deform_conv2d_launcher import gemm_library
        dtype = torch.{dtype}
        worst = 0.0
        for name in ("bias_and_mask", "groups2_offset_groups2", "odd_channels_groups3", "large_tiling"):
            t = _make(CASES[name])
            worst = max(worst, rel_err(_run(t, dtype).cpu(), _reference_f64(t, dtype)) / TOLERANCES[dtype])
        print(gemm_library().split(" (")[0], worst)
    """, TORCHTRT_EXT_CUBLASLT="0")
    library, worst = out.split()[:-1], float(out.split()[-1])
    assert " ".join(library) == "own tensor-core GEMM", out
    assert worst < 1.0, f"error {worst:.3g} x the tolerance with our own GEMM"
