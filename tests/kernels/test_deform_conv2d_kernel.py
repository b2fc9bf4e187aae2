"""The eager ``ops.deform_conv2d`` on CUDA tensors (the launcher the plugins run) against a float64 run of torchvision's
op (GPU only), and its independence from torch's process-wide TF32 setting.

Tolerances (issue 9): relative error < 1e-5 in float32, < 2e-3 in float16; bfloat16 < 1e-2. Cases: random offsets
reaching outside the image, zero masks, no mask, groups and offset groups > 1, stride 2, dilation 2.
"""
from __future__ import annotations

import threading
import warnings

import pytest
import torch

from torchtrt_ext.errors import LibraryNotFoundError
from torchtrt_ext.ops import deform_conv2d
from torchtrt_ext.ops.deform_conv2d import torch_deform_conv2d
from tests.helpers import rel_err

pytestmark = pytest.mark.gpu

CASES = {  # n, c_in, c_out, h, w, k, stride, padding, dilation, groups, offset_groups, sigma, mask
    "resnet_like": (2, 64, 64, 20, 24, 3, 1, 1, 1, 1, 1, 2.0, "rand"),
    "far_outside": (2, 16, 32, 9, 11, 3, 1, 1, 1, 1, 1, 8.0, "rand"),
    "zero_mask": (1, 16, 16, 8, 8, 3, 1, 1, 1, 1, 1, 2.0, "zeros"),
    "no_mask": (2, 16, 24, 10, 10, 3, 1, 1, 1, 1, 1, 2.0, "none"),
    "groups_offset_groups": (2, 32, 48, 12, 10, 3, 1, 1, 1, 4, 2, 3.0, "rand"),
    "offset_groups8": (1, 64, 32, 9, 9, 3, 1, 1, 1, 2, 8, 3.0, "rand"),
    "stride2": (2, 16, 16, 15, 17, 3, 2, 1, 1, 1, 1, 2.0, "rand"),
    "dilation2": (2, 16, 16, 13, 12, 3, 1, 2, 2, 1, 1, 2.0, "rand"),
    "kernel5x1": (1, 8, 8, 11, 7, (5, 1), (2, 1), (2, 0), (1, 3), 1, 2, 2.0, "rand"),
}
TOLERANCES = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _make(case: tuple, seed: int = 0) -> dict:
    n, c_in, c_out, h, w, k, stride, padding, dilation, groups, og, sigma, mask = case
    k, stride, padding, dilation = _pair(k), _pair(stride), _pair(padding), _pair(dilation)
    ho = (h + 2 * padding[0] - dilation[0] * (k[0] - 1) - 1) // stride[0] + 1
    wo = (w + 2 * padding[1] - dilation[1] * (k[1] - 1) - 1) // stride[1] + 1
    gen = torch.Generator(device="cuda").manual_seed(seed)
    taps = k[0] * k[1]
    m = {"rand": lambda: torch.rand(n, og * taps, ho, wo, device="cuda", generator=gen),
         "zeros": lambda: torch.zeros(n, og * taps, ho, wo, device="cuda"), "none": lambda: None}[mask]()
    return dict(input=torch.randn(n, c_in, h, w, device="cuda", generator=gen),
                offset=torch.randn(n, 2 * og * taps, ho, wo, device="cuda", generator=gen) * sigma,
                weight=torch.randn(c_out, c_in // groups, *k, device="cuda", generator=gen) * 0.1,
                bias=torch.randn(c_out, device="cuda", generator=gen), mask=m,
                stride=stride, padding=padding, dilation=dilation, groups=groups, offset_groups=og)


def _torchvision_f64(t: dict, dtype: torch.dtype) -> torch.Tensor:
    tv = pytest.importorskip("torchvision.ops", reason="torchvision is needed for the reference")
    f64 = {k: (v.to(dtype).double() if isinstance(v, torch.Tensor) else v) for k, v in t.items()}  # rounded inputs
    return tv.deform_conv2d(f64["input"], f64["offset"], f64["weight"], f64["bias"], stride=t["stride"],
                            padding=t["padding"], dilation=t["dilation"], mask=f64["mask"])


def _kernel_library() -> None:
    from torchtrt_ext import _native

    try:
        _native.kernels_library()
    except LibraryNotFoundError as exc:
        pytest.skip(f"kernels library not built: {exc}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_eager_op_matches_torchvision_float64(name: str, dtype: torch.dtype) -> None:
    _kernel_library()
    t = _make(CASES[name])
    ref = _torchvision_f64(t, dtype)
    low = {k: (v.to(dtype) if isinstance(v, torch.Tensor) else v) for k, v in t.items()}
    precision = torch.backends.cuda.matmul.fp32_precision
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = deform_conv2d(low["input"], low["offset"], low["weight"], low["bias"], mask=low["mask"],
                            stride=t["stride"], padding=t["padding"], dilation=t["dilation"], groups=t["groups"])
    assert not [w for w in caught if "CUDA kernel unavailable" in str(w.message)]
    assert got.dtype == dtype and got.shape == ref.shape
    assert rel_err(got, ref) < TOLERANCES[dtype], name
    assert torch.backends.cuda.matmul.fp32_precision == precision  # nothing process-wide was touched


def test_fp32_op_beside_fp32_matmuls_of_another_thread() -> None:
    """Issue 17 item 5: while one thread loops float32 DeformConv2d, another thread's float32 matmuls (TF32 off) keep
    FP32 accuracy, and the op keeps its own (both against float64)."""
    _kernel_library()
    t = _make(CASES["resnet_like"])
    ref = _torchvision_f64(t, torch.float32)
    a = torch.randn(256, 512, device="cuda", dtype=torch.float32)
    b = torch.randn(512, 256, device="cuda", dtype=torch.float32)
    exact = (a.double() @ b.double())
    precision = torch.backends.cuda.matmul.fp32_precision
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    stop = threading.Event()
    errors: dict[str, list[float]] = {"op": [], "matmul": []}

    def op_loop() -> None:
        while not stop.is_set():
            out = deform_conv2d(t["input"], t["offset"], t["weight"], t["bias"], mask=t["mask"], padding=1)
            errors["op"].append(rel_err(out, ref))

    worker = threading.Thread(target=op_loop)
    worker.start()
    try:
        for _ in range(300):
            errors["matmul"].append(rel_err(a @ b, exact))
    finally:
        stop.set()
        worker.join()
        torch.backends.cuda.matmul.fp32_precision = precision
    assert errors["op"], "the op thread did not run"
    assert max(errors["matmul"]) < 1e-5, f"{sum(e >= 1e-5 for e in errors['matmul'])} of 300 matmuls lost FP32 accuracy"
    assert max(errors["op"]) < 1e-5


@pytest.mark.parametrize("name", list(CASES))
def test_pytorch_implementation_matches_torchvision(name: str) -> None:
    """The eager fallback used where torchvision is absent (CPU CI) agrees with torchvision itself."""
    t = _make(CASES[name])
    ref = _torchvision_f64(t, torch.float32)
    f64 = {k: (v.double() if isinstance(v, torch.Tensor) else v) for k, v in t.items()}
    got = torch_deform_conv2d(f64["input"], f64["offset"], f64["weight"], f64["bias"], f64["mask"], t["stride"],
                              t["padding"], t["dilation"], t["groups"], t["offset_groups"])
    assert rel_err(got.double(), ref) < 1e-5
