"""DeformConv2d CUDA path (sampling kernel + cuBLAS) against a float64 run of torchvision's op (GPU only).

Tolerances (issue 9): relative error < 1e-5 in float32, < 2e-3 in float16; bfloat16 < 1e-2. Cases: random offsets
reaching outside the image, zero masks, no mask, groups and offset groups > 1, stride 2, dilation 2.
"""
from __future__ import annotations

import warnings

import pytest
import torch

from torchtrt_ext.ops import deform_conv2d
from torchtrt_ext.ops.deform_conv2d import sample_columns, torch_deform_conv2d
from tests.helpers import kernels_library_or_skip, rel_err
from tests.ops.test_deform_conv2d import to_kernel_layout

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
    kernels_library_or_skip()


@pytest.mark.parametrize("dtype,fp32_gemm", [(torch.float32, "3xtf32"), (torch.float32, "sgemm"),
                                              (torch.float16, "-"), (torch.bfloat16, "-")])
@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_torchvision_float64(name: str, dtype: torch.dtype, fp32_gemm: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _kernel_library()
    from torchtrt_ext.ops import _deform_conv2d_cuda
    from torchtrt_ext.ops._deform_conv2d_cuda import deform_conv2d_cuda

    if fp32_gemm != "-":
        monkeypatch.setattr(_deform_conv2d_cuda, "FP32_GEMM", fp32_gemm)
        monkeypatch.setattr(_deform_conv2d_cuda, "SPLIT_MIN_MACS", 0)  # these shapes are small: force the split
        monkeypatch.setattr(_deform_conv2d_cuda, "TF32_CHUNK", 100)  # several K-chunks with uneven ends

    t = _make(CASES[name])
    ref = _torchvision_f64(t, dtype)
    low = {k: (v.to(dtype) if isinstance(v, torch.Tensor) else v) for k, v in t.items()}
    got = deform_conv2d_cuda(low["input"], low["offset"], low["weight"], low["bias"], low["mask"], t["stride"],
                             t["padding"], t["dilation"], t["groups"], t["offset_groups"])
    assert got.dtype == dtype and got.shape == ref.shape
    assert rel_err(got, ref) < TOLERANCES[dtype], name
    if dtype == torch.float32:  # the TF32 switch is restored after the GEMMs
        assert torch.get_float32_matmul_precision() == "highest"
    # the public op on CUDA tensors takes the same kernel path without falling back
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        public = deform_conv2d(low["input"], low["offset"], low["weight"], low["bias"], mask=low["mask"],
                               stride=t["stride"], padding=t["padding"], dilation=t["dilation"], groups=t["groups"])
    assert not [w for w in caught if "CUDA kernel unavailable" in str(w.message)]
    assert torch.equal(public, got)


@pytest.mark.parametrize("name", ["far_outside", "groups_offset_groups", "offset_groups8", "kernel5x1"])
def test_columns_match_pytorch_sampling(name: str) -> None:
    _kernel_library()
    from torchtrt_ext.ops._deform_conv2d_cuda import im2col_cuda

    t = _make(CASES[name])
    k = tuple(t["weight"].shape[-2:])
    cols = im2col_cuda(t["input"], t["offset"], t["mask"], k, t["stride"], t["padding"], t["dilation"], t["groups"],
                       t["offset_groups"])
    ref = sample_columns(t["input"].double(), t["offset"].double(), None if t["mask"] is None else t["mask"].double(),
                         k, t["stride"], t["padding"], t["dilation"], t["offset_groups"])
    assert rel_err(cols, to_kernel_layout(ref, t["groups"], k[0] * k[1])) < 1e-6


@pytest.mark.parametrize("name", list(CASES))
def test_pytorch_implementation_matches_torchvision(name: str) -> None:
    """The eager fallback used where torchvision is absent (CPU CI) agrees with torchvision itself."""
    t = _make(CASES[name])
    ref = _torchvision_f64(t, torch.float32)
    f64 = {k: (v.double() if isinstance(v, torch.Tensor) else v) for k, v in t.items()}
    got = torch_deform_conv2d(f64["input"], f64["offset"], f64["weight"], f64["bias"], f64["mask"], t["stride"],
                              t["padding"], t["dilation"], t["groups"], t["offset_groups"])
    assert rel_err(got.double(), ref) < 1e-5


@pytest.mark.parametrize("split", [False, True])
def test_split_columns_sum_to_plain_columns(split: bool) -> None:
    _kernel_library()
    from torchtrt_ext.ops._deform_conv2d_cuda import im2col_cuda

    t = _make(CASES["groups_offset_groups"])
    args = (t["input"], t["offset"], t["mask"], (3, 3), t["stride"], t["padding"], t["dilation"], t["groups"],
            t["offset_groups"])
    plain = im2col_cuda(*args)
    rows = t["input"].shape[1] * 9
    if not split:
        assert plain.shape[2] == rows
        return
    pair = im2col_cuda(*args, split_tf32=True)
    hi, lo = pair[:, :, :rows], pair[:, :, rows:]
    assert torch.equal(hi.view(torch.int32) & 0x1FFF, torch.zeros_like(hi, dtype=torch.int32))  # TF32-exact
    assert (hi + lo - plain).abs().max() <= 1e-6 * plain.abs().max()  # equal up to FMA contraction differences


def test_large_batch_is_sliced_and_matches() -> None:
    _kernel_library()
    from torchtrt_ext.ops import _deform_conv2d_cuda as dcn

    t = _make((5, 8, 8, 9, 9, 3, 1, 1, 1, 1, 1, 2.0, "rand"))
    args = (t["input"], t["offset"], t["weight"], t["bias"], t["mask"], t["stride"], t["padding"], t["dilation"],
            t["groups"], t["offset_groups"])
    whole = dcn.deform_conv2d_cuda(*args)
    budget = dcn.COLUMNS_BUDGET_BYTES
    try:
        dcn.COLUMNS_BUDGET_BYTES = 2 * 2 * 8 * 9 * 81 * 4  # two images per slice (split columns are twice as wide)
        sliced = dcn.deform_conv2d_cuda(*args)
    finally:
        dcn.COLUMNS_BUDGET_BYTES = budget
    assert torch.allclose(whole, sliced, rtol=0, atol=1e-5)
