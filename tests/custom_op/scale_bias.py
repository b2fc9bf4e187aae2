"""TestScaleBias, the op the tests add by following docs/custom-op.md: ``y = x * scale + bias`` on float32.

New files only (this module, scale_bias.cu/.h, scale_bias_plugin.h/.cpp); its one registration line on the Python side
is the ``define_op`` at the bottom, and on the C++ side one line in ``csrc/plugins/creator_table.h``, which
test_scale_bias.py adds to a copy. The kernel library (scale_bias.cu alone) is built by the tests with nvcc and handed
over with :func:`use_kernel_library`, where the library's own ops find theirs in libtorchtrt_ext_kernels.so.
"""
from __future__ import annotations

import ctypes
import functools
import math
from collections.abc import Sequence
from pathlib import Path

import torch

from torchtrt_ext import _native
from torchtrt_ext.errors import LibraryNotFoundError, failure
from torchtrt_ext.ops import Attr, Buffer, Decomposer, OpSpec, define_op

_KERNELS: list[Path] = []


def use_kernel_library(path: Path) -> None:
    """Where the compiled scale_bias.cu is (a shared library exporting test_scale_bias_f32)."""
    _KERNELS[:] = [path]
    _launcher.cache_clear()


@functools.lru_cache(maxsize=None)
def _launcher() -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    if not _KERNELS:
        raise LibraryNotFoundError(failure("the TestScaleBias kernel library is not built", "use_kernel_library(path)",
                                           "build tests/custom_op/scale_bias.cu with nvcc -shared"))
    fn = ctypes.CDLL(str(_KERNELS[0])).test_scale_bias_f32
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_float, ctypes.c_void_p]
    fn.restype = ctypes.c_int32
    return fn


def launch(inputs: Sequence[Buffer | None], outputs: Sequence[Buffer], stream: int, *, scale: float,
           bias: float) -> None:
    """The kernel on raw contiguous float32 buffers, on ``stream`` (the Python plugin and the eager CUDA path)."""
    x, y = inputs[0], outputs[0]
    assert x is not None
    count = math.prod(x.shape)
    status = _launcher()(x.ptr, y.ptr, count, scale, bias, stream)
    _native.check_kernel_status(status, f"test_scale_bias_f32(count={count})", "check the sizes")


def _cuda(x: torch.Tensor, scale: float, bias: float) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    launch([Buffer.of(x)], [Buffer.of(y)], torch.cuda.current_stream(x.device).cuda_stream, scale=scale, bias=bias)
    return y


def _decompose(d: Decomposer, inputs: list[str], outputs: list[str], scale: float, bias: float) -> None:
    d.op("Add", d.op("Mul", inputs[0], d.const(scale)), d.const(bias), out=outputs[0])


SPEC = OpSpec(
    name="TestScaleBias", inputs=("x",), outputs=("y",),
    attrs=(Attr("scale", "float", default=1.0), Attr("bias", "float", default=0.0)),
    eager=lambda x, scale, bias: x * scale + bias,
    shape_rule=lambda shapes, dtypes, scale, bias: [(shapes[0], dtypes[0])],
    decompose=_decompose, cuda=_cuda, launch=launch, dtypes=(torch.float32,), doc="y = x * scale + bias")

SCALE_BIAS = define_op(SPEC)  # the one registration line of the Python side
