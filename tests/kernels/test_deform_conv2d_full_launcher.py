"""The DeformConv2d launcher (sampling + tensor-core GEMM + bias): what the TensorRT plugins and the eager op run.

CPU (no GPU needed, the kernels library only): exported symbols, the workspace size (values, monotonic in the sizes a
profile varies, -1 for bad descriptors), and argument checks that return cudaErrorInvalidValue before touching the GPU.
GPU (marker gpu): the launcher through ctypes against a float64 reference (torchvision's op when it imports, else our
PyTorch math in float64), tolerances of issue 9: relative error < 1e-5 float32, < 2e-3 float16, < 1e-2 bfloat16;
cases with and without bias/mask, stride 2, dilation 2, groups, offset groups, rectangular kernels, odd channel counts
(the unaligned GEMM and sampling paths), offsets reaching outside the image, several GEMM tiles with ragged edges,
misaligned pointers, channels-last input, a workspace poisoned with NaN, and a workspace that holds one image; on an
H100/H200 the fused implicit GEMM (float32 as bf16 pairs, fp16, bf16) on its own edge cases (among them tiles cut into
pieces whose partial sums a second kernel adds up, and a whole wave of tiles, nothing cut), forced on and off by
TORCHTRT_EXT_DCN_FUSED in subprocesses, and the default route's choice by shape.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.helpers import kernels_library_or_skip, rel_err
from torchtrt_ext import _native
from torchtrt_ext.errors import InvalidInputError, LibraryNotFoundError
from torchtrt_ext.ops.deform_conv2d import columns_to_output, sample_columns

ROOT = Path(__file__).resolve().parents[2]
CUDA_ERROR_INVALID_VALUE = 1
TOLERANCES = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
# The GPU's multiprocessor count (an H200's 132 without one): the fused kernel cuts the tiles of a last wave that is
# mostly idle into pieces (fusedSplit in csrc/kernels/deform_conv2d_sm90.cuh), so two cases are sized by it.
SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 132
# n, c_in, c_out, h, w, (kh, kw), stride, padding, dilation, groups, offset_groups, offset sigma, bias, mask
CASES = {
    "plain_no_bias_no_mask": (2, 8, 16, 9, 10, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, False, "none"),
    "bias_only": (2, 8, 16, 9, 10, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, True, "none"),
    "bias_and_mask": (2, 16, 24, 11, 9, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, True, "rand"),
    "mask_zero_bias": (1, 8, 8, 8, 8, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, "zeros", "rand"),
    "zero_mask": (1, 8, 8, 8, 8, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, True, "zeros"),
    "far_outside": (2, 16, 32, 9, 11, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 8.0, True, "rand"),
    "stride2": (2, 16, 16, 15, 17, (3, 3), (2, 2), (1, 1), (1, 1), 1, 1, 2.0, True, "rand"),
    "dilation2": (2, 16, 16, 13, 12, (3, 3), (1, 1), (2, 2), (2, 2), 1, 1, 2.0, True, "rand"),
    "groups2_offset_groups2": (2, 32, 48, 12, 10, (3, 3), (1, 1), (1, 1), (1, 1), 2, 2, 3.0, True, "rand"),
    "groups4_offset_groups8": (1, 64, 32, 9, 9, (3, 3), (1, 1), (1, 1), (1, 1), 4, 8, 3.0, True, "rand"),
    "kernel5x1_odd": (1, 6, 10, 11, 7, (5, 1), (2, 1), (2, 0), (1, 3), 1, 2, 2.0, True, "rand"),
    "many_tiles": (2, 40, 130, 23, 29, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, True, "rand"),
    "odd_channels": (3, 3, 5, 7, 9, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, True, "rand"),
    "odd_channels_groups3": (2, 9, 6, 8, 7, (3, 2), (1, 2), (1, 0), (2, 1), 3, 3, 2.0, True, "rand"),
    "long_reduction": (1, 256, 72, 10, 13, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, True, "rand"),
    "one_pixel": (1, 16, 8, 1, 1, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 0.3, True, "rand"),
    # enough 128 x 256 GEMM tiles for every multiprocessor of an H200: the large tiling (the others take the small one)
    "large_tiling": (5, 24, 130, 64, 64, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, True, "rand"),
    # enough sampling tiles for 4 blocks on every multiprocessor of an H200: each block samples every tap (the smaller
    # cases split the taps over several blocks of a tile, the first one writing the ones row)
    "one_tap_group": (4, 48, 32, 64, 128, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, True, "rand"),
    # the sampler's corner table holds fewer taps than a 7x7 kernel has: taps sampled in chunks, the last one partial
    "kernel7x7_tap_chunks": (1, 16, 8, 12, 11, (7, 7), (1, 1), (3, 3), (1, 1), 1, 1, 2.0, True, "rand"),
    # either side of the direct kernel's DIRECT_MAX_TAPS: 12 taps (its shared memory at exactly 48 KB) and 14
    "kernel3x4_direct_limit": (2, 8, 16, 9, 10, (3, 4), (1, 1), (1, 2), (1, 1), 1, 1, 2.0, True, "rand"),
    "kernel2x7_past_direct": (2, 8, 16, 9, 10, (2, 7), (1, 1), (1, 3), (1, 1), 1, 1, 2.0, True, "rand"),
    # several channel slices per offset group and per image, conv groups cutting through an offset group's slices
    "slices_of_offset_groups": (2, 256, 32, 10, 12, (3, 3), (1, 1), (1, 1), (1, 1), 8, 2, 2.0, True, "rand"),
    # on an sm_90a build and an H100/H200 every dtype takes the fused implicit GEMM where every conv group and offset
    # group holds whole 64-channel blocks (deform_conv2d_sm90.cuh); these cases reach each of its edges:
    # conv and offset groups, 48 output channels of a 128-channel tile, pixel tiles spanning images, no mask
    "fused_groups2_offset_groups2": (3, 128, 96, 12, 10, (3, 3), (1, 1), (1, 1), (1, 1), 2, 2, 3.0, True, "rand"),
    # 320 output channels: 256-channel tiles (two m64 tiles per warpgroup), a second, ragged channel tile
    "fused_wide_ragged": (3, 64, 320, 9, 11, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, True, "none"),
    # stride, dilation, a rectangular kernel, no bias, offsets far outside
    "fused_stride_dilation_rect": (2, 128, 64, 17, 15, (3, 2), (2, 1), (1, 0), (2, 1), 1, 2, 6.0, False, "rand"),
    # a 7x7 kernel: 49 reduction blocks, offset group of 128 channels (two blocks per tap)
    "fused_7x7": (1, 128, 128, 14, 13, (7, 7), (1, 1), (3, 3), (1, 1), 1, 1, 2.0, True, "rand"),
    # many pixel tiles over several waves of blocks, a last partial tile
    "fused_many_tiles": (3, 64, 256, 37, 41, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, True, "rand"),
    # (the cases above have fewer tiles than the GPU has multiprocessors: every tile is cut into pieces of reduction
    # blocks whose partial sums a second kernel adds up)
    # exactly one tile per multiprocessor, the last one ragged: every tile whole, nothing cut
    "fused_whole_wave": (1, 64, 64, 8, 16 * SMS - 1, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, True, "rand"),
    # a wave of whole tiles, then 1-2 tiles (conv group 2's last pixel tiles, the last ragged) cut into pieces
    "fused_split_tail": (1, 128, 192, 8, ((SMS // 2 + 1) * 128 - 48) // 8, (3, 3), (1, 1), (1, 1), (1, 1), 2, 2, 2.0,
                         True, "rand"),
    # float32's 256-channel tiles of 64 pixels: a wave of whole tiles, then 4 (the last ragged) cut into pieces
    "fused_wide_split_tail": (1, 64, 256, 8, ((SMS + 4) * 64 - 24) // 8, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0,
                              True, "rand"),
}
FUSED = [name for name in CASES if name.startswith("fused_")]
DIRECT_MAX_TAPS = 12  # kDirectMaxTaps (csrc/kernels/deform_conv2d_direct.cuh): larger kernels take the other routes


def _library() -> ctypes.CDLL:
    return kernels_library_or_skip()


def _workspace_size(desc: Any) -> int:
    from torchtrt_ext.ops._deform_conv2d_launcher import _functions

    _library()
    return int(_functions()[1](ctypes.byref(desc)))


# ------------------------------------------------------------------------------------------------ CPU checks
def test_full_launchers_are_exported() -> None:
    _library()
    path = str(_native.kernels_library_path())
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) not installed")
    out = subprocess.run(["nm", "-D", "--defined-only", path], check=True, capture_output=True, text=True).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[1:2] == ["T"]}
    for name in ("torchtrt_ext_deform_conv2d", "torchtrt_ext_deform_conv2d_workspace_size"):
        assert name in exported, f"{name} is not exported by {path}"


def _sizes(n: int = 2, c: int = 16, h: int = 12, w: int = 10, c_out: int = 32, kh: int = 3, kw: int = 3,
           stride: int = 1, pad: int = 1, dil: int = 1, groups: int = 1, og: int = 1, elem: int = 4,
           dtype: int | None = None, layout: int = 0) -> Any:
    """The launcher's descriptor (dtype code from elem: 4 float32, 2 float16, unless given)."""
    from torchtrt_ext.ops._deform_conv2d_launcher import Desc

    code = dtype if dtype is not None else {4: 0, 2: 1}.get(elem, 7)
    return Desc(n, c, h, w, c_out, kh, kw, stride, stride, pad, pad, dil, dil, groups, og, code, layout)


def _align(v: int) -> int:
    return (v + 255) // 256 * 256


LT_WORKSPACE = 4 << 20  # the GEMM library's share (cublaslt::kWorkspaceBytes)


def _rows_pad(c: int, groups: int, taps: int) -> int:
    """A conv group's column rows: its channels x taps, the ones row that meets the bias, zeros up to 8 elements."""
    return (c // groups * taps + 1 + 7) // 8 * 8


def test_workspace_size_is_input_prepared_weight_gemm_workspace_and_columns() -> None:
    n, c, h, w, c_out, k = 2, 16, 12, 10, 32, 9
    rows_pad = 152  # 144 rows + the ones row, padded to 8
    assert _rows_pad(c, 1, k) == rows_pad
    nhwc = _align(n * c * h * w * 4)
    weight32 = _align(c_out * rows_pad * 4)  # the weight with the bias in the ones row's place
    columns32 = n * _align(h * w * rows_pad * 4)
    assert _workspace_size(_sizes()) == nhwc + weight32 + LT_WORKSPACE + columns32
    half = _align(n * c * h * w * 2) + _align(c_out * rows_pad * 2) + LT_WORKSPACE + n * _align(h * w * rows_pad * 2)
    assert _workspace_size(_sizes(elem=2)) == half
    assert _workspace_size(_sizes(layout=1)) == weight32 + LT_WORKSPACE + columns32  # channels-last is read as it is


def test_workspace_size_pads_each_groups_rows_to_8_elements() -> None:
    # 6 channels, 2 groups, 5x1 kernel, padding 2 on both axes (11x11 outputs): 15 rows + the ones row per group = 16
    got = _workspace_size(_sizes(n=1, c=6, h=11, w=7, c_out=10, kh=5, kw=1, pad=2, groups=2, layout=1, elem=2))
    assert _rows_pad(6, 2, 5) == 16
    assert got == _align(10 * 16 * 2) + LT_WORKSPACE + _align(11 * 11 * 2 * 16 * 2)
    # 7 rows per group + the ones row: still 8
    assert _rows_pad(7, 1, 1) == 8 and _rows_pad(8, 1, 1) == 16


def test_workspace_size_caps_columns_at_256_mib_but_holds_one_image() -> None:
    big = _sizes(n=64, c=256, h=64, w=64, c_out=256, elem=2)  # one image: 4096 * 2312 * 2 B = 18 MiB; 64 > 256 MiB
    fixed = _align(64 * 256 * 64 * 64 * 2) + _align(256 * 2312 * 2) + LT_WORKSPACE
    assert _workspace_size(big) == fixed + (256 << 20)
    huge = _sizes(n=2, c=2048, h=128, w=128, c_out=8)  # one image's columns alone exceed the budget
    rows_pad = _rows_pad(2048, 1, 9)
    image = _align(128 * 128 * rows_pad * 4)
    assert _workspace_size(huge) == _align(2 * 2048 * 128 * 128 * 4) + _align(8 * rows_pad * 4) + LT_WORKSPACE + image


@pytest.mark.parametrize("index", [0, 1, 2, 3, 4])  # n, c, h, w, c_out: the dims a TensorRT profile varies
def test_workspace_size_never_shrinks_as_a_profile_dim_grows(index: int) -> None:
    names = ["n", "channels", "height", "width", "out_channels"]
    previous = 0
    for value in [1, 2, 3, 5, 8, 13, 64, 100, 333, 1000]:
        desc = _sizes(n=3, c=64, h=40, w=40, c_out=64)
        setattr(desc, names[index], value)  # groups = offset_groups = 1: any channel count is valid
        got = _workspace_size(desc)
        assert got >= previous, f"workspace shrank from {previous} to {got} when {names[index]} grew to {value}"
        previous = got


@pytest.mark.parametrize("bad", [
    dict(c=15, groups=2), dict(c_out=15, groups=2), dict(c=15, og=2), dict(stride=0), dict(dil=0), dict(pad=-1),
    dict(groups=0), dict(og=0), dict(h=0), dict(kh=0), dict(h=1, pad=0), dict(elem=8), dict(n=-1), dict(dtype=3),
    dict(dtype=-1), dict(layout=2),
])
def test_workspace_size_rejects_bad_sizes(bad: dict) -> None:
    assert _workspace_size(_sizes(**bad)) == -1, bad


def test_workspace_size_rejects_a_prepared_weight_of_2_to_the_31_elements() -> None:
    # the sampler copies the weight with 32-bit indices: out_channels * rows_pad must stay below 2^31
    rows_pad = _rows_pad(16, 1, 9)
    largest = (2**31 - 1) // rows_pad
    assert _workspace_size(_sizes(c_out=largest)) > 0
    assert _workspace_size(_sizes(c_out=largest + 1)) == -1


def _call(desc: Any, ptrs: list, workspace_bytes: int) -> int:
    from torchtrt_ext.ops._deform_conv2d_launcher import Tensors, _functions

    _library()
    return int(_functions()[0](ctypes.byref(desc), ctypes.byref(Tensors(*ptrs[:6])), ptrs[6], workspace_bytes, None))


@pytest.mark.parametrize("elem", [4, 2])
def test_launcher_rejects_bad_arguments_before_touching_the_gpu(elem: int) -> None:
    fake = [0x1000] * 7  # 6 tensors + workspace, 256-aligned, never dereferenced: every case fails its checks first
    good = _sizes(elem=elem)
    needed = _workspace_size(good)
    assert _call(good, [None] * 7, needed) == CUDA_ERROR_INVALID_VALUE  # null pointers
    assert _call(_sizes(c=15, groups=2, elem=elem), fake, needed) == CUDA_ERROR_INVALID_VALUE
    assert _call(_sizes(h=1, pad=0, elem=elem), fake, needed) == CUDA_ERROR_INVALID_VALUE  # empty output
    assert _call(_sizes(elem=elem, dtype=5), fake, needed) == CUDA_ERROR_INVALID_VALUE  # unknown dtype
    assert _call(good, fake[:6] + [0x1001], needed) == CUDA_ERROR_INVALID_VALUE  # unaligned workspace
    image = _align(12 * 10 * _rows_pad(16, 1, 9) * elem)  # the columns of one image
    fixed = needed - 2 * image  # channels-last input
    assert _call(good, fake, fixed + image - 1) == CUDA_ERROR_INVALID_VALUE  # not even one image fits
    assert _call(_sizes(n=0, elem=elem), [None] * 7, 0) == 0  # empty batch: nothing to do, nothing touched


def test_python_binding_reports_rejected_sizes() -> None:
    _library()
    from torchtrt_ext.ops._deform_conv2d_launcher import workspace_size

    assert workspace_size((2, 16, 12, 10), (32, 16, 3, 3), (1, 1), (1, 1), (1, 1), 1, 1, torch.float32) == \
        _workspace_size(_sizes())
    with pytest.raises(InvalidInputError, match="rejects the sizes"):
        workspace_size((2, 15, 12, 10), (32, 15, 3, 3), (1, 1), (1, 1), (1, 1), 2, 1, torch.float32)


# ------------------------------------------------------------------------------------------------ GPU checks
def _make(case: tuple, seed: int = 0) -> dict:
    n, c_in, c_out, h, w, k, stride, padding, dilation, groups, og, sigma, bias, mask = case
    ho = (h + 2 * padding[0] - dilation[0] * (k[0] - 1) - 1) // stride[0] + 1
    wo = (w + 2 * padding[1] - dilation[1] * (k[1] - 1) - 1) // stride[1] + 1
    gen = torch.Generator().manual_seed(seed)
    taps = k[0] * k[1]
    b = {True: lambda: torch.randn(c_out, generator=gen), False: lambda: None,
         "zeros": lambda: torch.zeros(c_out)}[bias]()
    m = {"rand": lambda: torch.rand(n, og * taps, ho, wo, generator=gen),
         "zeros": lambda: torch.zeros(n, og * taps, ho, wo), "none": lambda: None}[mask]()
    return dict(input=torch.randn(n, c_in, h, w, generator=gen),
                offset=torch.randn(n, 2 * og * taps, ho, wo, generator=gen) * sigma,
                weight=torch.randn(c_out, c_in // groups, *k, generator=gen) * 0.1, bias=b, mask=m,
                stride=stride, padding=padding, dilation=dilation, groups=groups, offset_groups=og)


def _reference_f64(t: dict, dtype: torch.dtype) -> torch.Tensor:
    """float64 result on the dtype-rounded inputs: torchvision's op when it imports, else our PyTorch math."""
    f64 = {k: (v.to(dtype).double() if isinstance(v, torch.Tensor) else v) for k, v in t.items()}
    try:
        from torchvision.ops import deform_conv2d as tv
    except Exception:  # noqa: BLE001 - torchvision absent or built for another torch
        tv = None
    if tv is not None:
        return tv(f64["input"], f64["offset"], f64["weight"], f64["bias"], stride=t["stride"], padding=t["padding"],
                  dilation=t["dilation"], mask=f64["mask"])
    k = tuple(t["weight"].shape[-2:])
    cols = sample_columns(f64["input"], f64["offset"], f64["mask"], k, t["stride"], t["padding"], t["dilation"],
                          t["offset_groups"])
    return columns_to_output(cols, f64["weight"], f64["bias"], t["groups"], tuple(t["offset"].shape[-2:]))


def _run(t: dict, dtype: torch.dtype, workspace_bytes: int | None = None) -> torch.Tensor:
    from torchtrt_ext.ops._deform_conv2d_launcher import deform_conv2d_full

    dev = {k: (v.to("cuda", dtype) if isinstance(v, torch.Tensor) else v) for k, v in t.items()}
    out = deform_conv2d_full(dev["input"], dev["offset"], dev["weight"], dev["bias"], dev["mask"], t["stride"],
                             t["padding"], t["dilation"], t["groups"], t["offset_groups"],
                             workspace_bytes=workspace_bytes)
    torch.cuda.synchronize()
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_full_launcher_matches_float64_reference(name: str, dtype: torch.dtype) -> None:
    _library()
    t = _make(CASES[name])
    ref = _reference_f64(t, dtype)
    got = _run(t, dtype)
    assert got.dtype == dtype and tuple(got.shape) == tuple(ref.shape), (got.shape, ref.shape)
    assert torch.isfinite(got.float()).all(), f"{name} {dtype}: non-finite values (unwritten or NaN output)"
    err = rel_err(got.cpu(), ref)
    assert err < TOLERANCES[dtype], f"{name} {dtype}: relative error {err:.3g} >= {TOLERANCES[dtype]:g} vs float64"


@pytest.mark.gpu
@pytest.mark.parametrize("scale", [1e-30, 1e30], ids=["tiny", "huge"])
def test_float32_keeps_its_accuracy_at_any_magnitude(scale: float) -> None:
    """float32 runs as bf16 pairs (hi + lo) on cuBLASLt: bf16 has float32's exponent range, so inputs near 1e-30 or
    1e30 keep the same relative error (a float16 split would underflow or overflow)."""
    _library()
    t = _make(CASES["long_reduction"])
    t["input"] = t["input"] * scale
    t["bias"] = t["bias"] * scale
    got = _run(t, torch.float32)
    err = rel_err(got.cpu(), _reference_f64(t, torch.float32))
    assert err < TOLERANCES[torch.float32], f"input scaled by {scale:g}: relative error {err:.3g}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_a_workspace_of_one_image_gives_the_same_result_in_several_passes(dtype: torch.dtype) -> None:
    _library()
    from torchtrt_ext.ops._deform_conv2d_launcher import workspace_size

    t = _make((5,) + CASES["groups2_offset_groups2"][1:])  # 5 images
    shape, wshape = tuple(t["input"].shape), tuple(t["weight"].shape)
    full = workspace_size(shape, wshape, t["stride"], t["padding"], t["dilation"], t["groups"], t["offset_groups"], dtype)
    one = workspace_size((1,) + shape[1:], wshape, t["stride"], t["padding"], t["dilation"], t["groups"],
                         t["offset_groups"], dtype)
    elem = torch.empty((), dtype=dtype).element_size()
    nhwc_extra = ((5 * t["input"][0].numel() * elem + 255) // 256 - (t["input"][0].numel() * elem + 255) // 256) * 256
    small = one + nhwc_extra  # the weight, all 5 images channels-last, the columns of 1 image
    assert small < full
    whole, sliced = _run(t, dtype), _run(t, dtype, workspace_bytes=small)
    # one GEMM batch of 5 images or 5 passes of 1: the GEMM library may pick another algorithm for another batch
    assert rel_err(sliced.cpu(), whole.cpu()) < TOLERANCES[dtype] / 10, "slicing the batch over passes changed it"
    assert rel_err(sliced.cpu(), _reference_f64(t, dtype)) < TOLERANCES[dtype]


def _one_route() -> bool:
    """True where TORCHTRT_EXT_DCN_DIRECT forces the route (the subprocesses of test_both_routes_on_every_case): both
    layouts of an input then take the same kernels, so their results can be compared bit for bit."""
    return os.environ.get("TORCHTRT_EXT_DCN_DIRECT") in ("0", "1")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_misaligned_pointers_take_the_unaligned_paths(dtype: torch.dtype) -> None:
    """Every tensor (and a channels-last input) one element past a 16-byte boundary: same result as aligned."""
    _library()
    from torchtrt_ext.ops._deform_conv2d_launcher import deform_conv2d_full

    t = _make(CASES["groups2_offset_groups2"])
    dev = {k: (v.to("cuda", dtype) if isinstance(v, torch.Tensor) else v) for k, v in t.items()}

    def shifted(x: torch.Tensor, channels_last: bool = False) -> torch.Tensor:
        if channels_last:
            x = x.permute(0, 2, 3, 1)
        buffer = torch.empty(x.numel() + 1, dtype=dtype, device="cuda")
        view = buffer[1:].view(x.shape).copy_(x)
        return view.permute(0, 3, 1, 2) if channels_last else view

    conv = (t["stride"], t["padding"], t["dilation"], t["groups"], t["offset_groups"])
    aligned = deform_conv2d_full(dev["input"], dev["offset"], dev["weight"], dev["bias"], dev["mask"], *conv)
    for channels_last in (False, True):
        x = shifted(dev["input"], channels_last)
        assert x.data_ptr() % 16 != 0 and x.is_contiguous(
            memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        got = deform_conv2d_full(x, shifted(dev["offset"]), shifted(dev["weight"]), shifted(dev["bias"]),
                                 shifted(dev["mask"]), *conv)
        torch.cuda.synchronize()
        if channels_last and not _one_route():  # the default route may differ by layout (directMaxMacs)
            assert rel_err(got.cpu(), _reference_f64(t, dtype)) < TOLERANCES[dtype], "channels_last=True"
        else:
            assert rel_err(got.cpu(), aligned.cpu()) < TOLERANCES[dtype] / 10, f"channels_last={channels_last}"
    assert rel_err(aligned.cpu(), _reference_f64(t, dtype)) < TOLERANCES[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["bias_and_mask", "fused_groups2_offset_groups2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_channels_last_input_is_read_as_it_is(dtype: torch.dtype, case: str) -> None:
    _library()
    from torchtrt_ext.ops._deform_conv2d_launcher import deform_conv2d_full, workspace_size

    t = _make(CASES[case])
    dev = {k: (v.to("cuda", dtype) if isinstance(v, torch.Tensor) else v) for k, v in t.items()}
    conv = (t["stride"], t["padding"], t["dilation"], t["groups"], t["offset_groups"])
    nchw = deform_conv2d_full(dev["input"], dev["offset"], dev["weight"], dev["bias"], dev["mask"], *conv)
    x = dev["input"].contiguous(memory_format=torch.channels_last)
    shapes = (tuple(x.shape), tuple(dev["weight"].shape), *conv, dtype)
    small = workspace_size(*shapes, channels_last=True)
    assert small < workspace_size(*shapes)  # no room for a transposed copy: the launcher must read x directly
    got = deform_conv2d_full(x, dev["offset"], dev["weight"], dev["bias"], dev["mask"], *conv, workspace_bytes=small)
    if _one_route():
        assert torch.equal(got, nchw)
    else:  # by default the direct kernel's sizes differ by layout (directMaxMacs): both against float64
        reference = _reference_f64(t, dtype)
        assert rel_err(got.cpu(), reference) < TOLERANCES[dtype] and rel_err(nchw.cpu(), reference) < TOLERANCES[dtype]


def _on_gpu(t: dict, dtype: torch.dtype) -> list[torch.Tensor | None]:
    """The launcher's tensor arguments of a case (input, offset, weight, bias, mask) on the GPU in `dtype`."""
    return [t[k].to("cuda", dtype) if t[k] is not None else None for k in ("input", "offset", "weight", "bias", "mask")]


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["fused_many_tiles", "fused_split_tail"])
def test_calls_queued_back_to_back_each_read_their_own_input(case: str) -> None:
    """Calls queued with no synchronization between them (a TensorRT engine's enqueues, the eager op in a loop) each
    give their own result, bit for bit: on an H100/H200 the fused path's kernels start beside the kernel before them
    (programmatic dependent launch) and must still wait for their own call's transposed input and reordered weight."""
    _library()
    from torchtrt_ext.ops._deform_conv2d_launcher import deform_conv2d_full

    dtype = torch.float16
    a, b = _make(CASES[case], seed=1), _make(CASES[case], seed=2)
    conv = (a["stride"], a["padding"], a["dilation"], a["groups"], a["offset_groups"])
    expected = [_run(a, dtype), _run(b, dtype)]  # each call synchronized
    args = [_on_gpu(a, dtype), _on_gpu(b, dtype)]
    outs = [deform_conv2d_full(*args[i % 2], *conv) for i in range(8)]
    torch.cuda.synchronize()
    for i, out in enumerate(outs):
        assert torch.equal(out, expected[i % 2]), f"call {i} of 8 differs from the same call made alone"


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["fused_many_tiles", "bias_and_mask"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_a_cuda_graph_of_the_launcher_replays_it_on_new_values(dtype: torch.dtype, case: str) -> None:
    """Captured in a CUDA graph (TRTModule's CUDA-graph mode, torch.cuda.graph around the eager op), the launcher's
    kernels (cuBLASLt's and the fused path's overlapping launches among them) replay to the result of a plain call on
    the values copied into the captured inputs."""
    _library()
    from torchtrt_ext.ops._deform_conv2d_launcher import deform_conv2d_full

    a, b = _make(CASES[case], seed=1), _make(CASES[case], seed=2)
    conv = (a["stride"], a["padding"], a["dilation"], a["groups"], a["offset_groups"])
    captured = _on_gpu(a, dtype)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # first call outside the capture: library handles, kernel attributes
        deform_conv2d_full(*captured, *conv)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = deform_conv2d_full(*captured, *conv)
    for t in (b, a):
        for dst, src in zip(captured, _on_gpu(t, dtype)):
            if dst is not None and src is not None:
                dst.copy_(src)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, _run(t, dtype)), "the replay differs from a plain call on the same values"


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["odd_channels_groups3", "fused_wide_ragged"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_a_workspace_full_of_nan_does_not_leak_into_the_output(dtype: torch.dtype, case: str) -> None:
    """The padding rows of each group's columns and the fused kernel's padded weight tiles are written (zeros),
    never read as whatever the workspace held."""
    _library()
    from torchtrt_ext.ops._deform_conv2d_launcher import Tensors, describe, desc_workspace_size, launch_desc

    t = _make(CASES[case])
    dev = {k: (v.to("cuda", dtype) if isinstance(v, torch.Tensor) else v) for k, v in t.items()}
    desc = describe(tuple(dev["input"].shape), tuple(dev["weight"].shape), t["stride"], t["padding"], t["dilation"],
                    t["groups"], t["offset_groups"], dtype)
    nbytes = desc_workspace_size(desc)
    workspace = torch.full((nbytes,), 0xFF, dtype=torch.uint8, device="cuda")  # all NaN in float32 and float16
    out = torch.full((dev["input"].shape[0], dev["weight"].shape[0], *dev["offset"].shape[-2:]), float("nan"),
                     dtype=dtype, device="cuda")
    pointers = Tensors(dev["input"].data_ptr(), dev["offset"].data_ptr(), dev["weight"].data_ptr(),
                       dev["bias"].data_ptr(), dev["mask"].data_ptr() if dev["mask"] is not None else None,
                       out.data_ptr())
    launch_desc(desc, pointers, workspace.data_ptr(), nbytes, torch.cuda.current_stream().cuda_stream, "the test")
    torch.cuda.synchronize()
    assert torch.isfinite(out.float()).all()
    assert rel_err(out.cpu(), _reference_f64(t, dtype)) < TOLERANCES[dtype]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_empty_batch_and_no_input_channels(dtype: torch.dtype) -> None:
    _library()
    from torchtrt_ext.ops._deform_conv2d_launcher import deform_conv2d_full

    empty = _make((0,) + CASES["bias_only"][1:])
    dev = {k: (v.to("cuda", dtype) if isinstance(v, torch.Tensor) else v) for k, v in empty.items()}
    conv = (empty["stride"], empty["padding"], empty["dilation"], 1, 1)
    out = deform_conv2d_full(dev["input"], dev["offset"], dev["weight"], dev["bias"], None, *conv)
    assert tuple(out.shape) == (0, 16, 9, 10)
    bias = torch.randn(4, device="cuda").to(dtype)
    out = deform_conv2d_full(torch.empty(2, 0, 5, 5, device="cuda", dtype=dtype),
                             torch.randn(2, 18, 5, 5, device="cuda").to(dtype),
                             torch.empty(4, 0, 3, 3, device="cuda", dtype=dtype), bias, None, (1, 1), (1, 1), (1, 1),
                             1, 1)
    torch.cuda.synchronize()
    assert torch.equal(out, bias.view(1, 4, 1, 1).expand(2, 4, 5, 5))  # no input channels: the bias alone


@pytest.mark.gpu
def test_the_eager_op_runs_the_launcher() -> None:
    """ops.deform_conv2d on CUDA tensors is this launcher (bit for bit), not another implementation."""
    _library()
    from torchtrt_ext.ops import deform_conv2d

    t = _make(CASES["many_tiles"])
    dev = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in t.items()}
    eager = deform_conv2d(dev["input"], dev["offset"], dev["weight"], dev["bias"], mask=dev["mask"],
                          stride=t["stride"], padding=t["padding"], dilation=t["dilation"], groups=t["groups"])
    assert torch.equal(eager.cpu(), _run(t, torch.float32).cpu())


def _kernel_names(t: dict, dtype: torch.dtype) -> list[str]:
    """The CUDA kernels one launcher call runs (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        _run(t, dtype)
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def _fused_build_or_skip() -> None:
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the fused kernel runs on compute capability 9.0 (H100/H200) only")
    if "90a" not in (_native.build_info() or {}).get("sm", []):
        pytest.skip("the kernels library has no sm_90a code: build with 90 in TORCHTRT_EXT_CUDA_ARCHS")


def _runs_fused(names: list[str]) -> bool:
    """True when one of the kernels is a fused implicit GEMM: fusedKernel (256-channel tiles), fusedWsKernel (128) or
    fusedPairKernel (float32)."""
    return any(k in n for n in names for k in ("fusedKernel<", "fusedWsKernel<", "fusedPairKernel"))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", FUSED)
def test_the_fused_cases_take_the_path_torchtrt_ext_dcn_fused_names(name: str, dtype: torch.dtype) -> None:
    """TORCHTRT_EXT_DCN_FUSED=1: the fused implicit GEMM wherever it applies (whole 64-channel blocks on an sm_90a
    build and an H100/H200; no columns, no separate GEMM); =0: the sampling + GEMM path. Run by the test below."""
    mode = os.environ.get("TORCHTRT_EXT_DCN_FUSED")
    if mode not in ("0", "1"):
        pytest.skip("runs in the subprocesses of test_both_paths_on_the_fused_cases (TORCHTRT_EXT_DCN_FUSED=0 or 1)")
    _library()
    _fused_build_or_skip()
    names = _kernel_names(_make(CASES[name]), dtype)
    fused = _runs_fused(names)
    columns = any("sampleKernel" in n or "sampleSplitKernel" in n for n in names)  # (float32: the split sampler)
    assert (fused and not columns) if mode == "1" else (columns and not fused), names
    if name in ("fused_whole_wave", "fused_split_tail"):  # (the others' cut depends on the workspace's room too)
        assert any("fusedFixupKernel" in n for n in names) == (mode == "1" and name == "fused_split_tail"), names


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["1", "0"])
def test_both_paths_on_the_fused_cases(mode: str) -> None:
    """The fused cases (their float64 comparison, a channels-last input, a workspace of NaN) through the fused kernel
    (=1) and through the column path (=0): the variable is read once per process, so each runs in a subprocess. The
    default route picks by shape (below)."""
    _library()
    env = {**os.environ, "TORCHTRT_EXT_DCN_FUSED": mode, "TORCHTRT_EXT_DCN_DIRECT": "0"}  # (small ones: direct)
    tests = [f"{__file__}::{name}" for name in (
        "test_full_launcher_matches_float64_reference", "test_the_fused_cases_take_the_path_torchtrt_ext_dcn_fused_names",
        "test_channels_last_input_is_read_as_it_is", "test_a_workspace_full_of_nan_does_not_leak_into_the_output",
        "test_calls_queued_back_to_back_each_read_their_own_input",
        "test_a_cuda_graph_of_the_launcher_replays_it_on_new_values")]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "fused_", *tests],
                         env=env, capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout, run.stdout[-2000:]


@pytest.mark.gpu
def test_by_default_the_fused_kernel_takes_shapes_that_fill_whole_waves() -> None:
    """Unset TORCHTRT_EXT_DCN_FUSED: blocks filling two whole waves of the GPU's multiprocessors take the fused kernel;
    8 blocks (the column path's finer kernels are faster there) take the column path; float32 takes it only for conv
    groups of at most 256 output channels (one tile)."""
    if _one_route() or os.environ.get("TORCHTRT_EXT_DCN_FUSED") in ("0", "1"):
        pytest.skip("the default route: TORCHTRT_EXT_DCN_FUSED or TORCHTRT_EXT_DCN_DIRECT is set")
    _library()
    _fused_build_or_skip()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    # 128-pixel blocks of all 256 output channels: 2 * sms * 128 pixels are two whole waves
    whole = (1, 64, 256, 2 * sms, 128, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, True, "rand")
    wide = _kernel_names(_make(whole), torch.float16)
    assert any("fusedKernel<" in n for n in wide) and not any("fusedWsKernel" in n for n in wide), wide
    # 128 output channels: the warp-specialized kernel's tiles
    narrow = _kernel_names(_make((1, 64, 128, 2 * sms, 128, *whole[5:])), torch.float16)
    assert any("fusedWsKernel" in n for n in narrow) and not any("fusedKernel<" in n for n in narrow), narrow
    # 8 blocks, too much work for the direct kernel: the column path
    few = _kernel_names(_make((1, 256, 256, 32, 32, *whole[5:])), torch.float16)
    assert any("sampleKernel" in n for n in few) and not _runs_fused(few), few
    # float32: the fused kernel for conv groups of one tile (128 channels x 128 pixels, or 256 x 64 past 128 channels),
    # the column path (split sampler) past 256
    narrow32 = _kernel_names(_make((1, 64, 128, 2 * sms, 128, *whole[5:])), torch.float32)
    assert any("fusedPairKernel<1>" in n for n in narrow32), narrow32
    assert not any("sampleSplitKernel" in n for n in narrow32), narrow32
    wide32 = _kernel_names(_make(whole), torch.float32)
    assert any("fusedPairKernel<2>" in n for n in wide32), wide32
    assert not any("sampleSplitKernel" in n for n in wide32), wide32
    wider32 = _kernel_names(_make((1, 64, 512, 2 * sms, 64, *whole[5:])), torch.float32)
    assert any("sampleSplitKernel" in n for n in wider32) and not _runs_fused(wider32), wider32


# ------------------------------------------------------------------------------------- the direct kernel's route
def _launches(names: list[str]) -> list[str]:
    """The kernels among the device events of a call (not the test's own copies of its inputs to the GPU)."""
    return [n for n in names if not n.startswith(("Memcpy", "Memset"))]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_the_route_torchtrt_ext_dcn_direct_names(name: str, dtype: torch.dtype) -> None:
    """TORCHTRT_EXT_DCN_DIRECT=1: every case of at most DIRECT_MAX_TAPS taps is one launch of the direct kernel (no
    transpose, columns, GEMM or fixup), larger ones (2x7, 7x7) take the other routes; =0: it never runs. Run by the test
    below."""
    mode = os.environ.get("TORCHTRT_EXT_DCN_DIRECT")
    if mode not in ("0", "1"):
        pytest.skip("runs in the subprocesses of test_both_routes_on_every_case (TORCHTRT_EXT_DCN_DIRECT=0 or 1)")
    _library()
    names = _launches(_kernel_names(_make(CASES[name]), dtype))
    direct = [n for n in names if "directKernel<" in n]
    applies = CASES[name][5][0] * CASES[name][5][1] <= DIRECT_MAX_TAPS
    assert (len(names) == 1 and len(direct) == 1) if mode == "1" and applies else (names and not direct), names


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["1", "0"])
def test_both_routes_on_every_case(mode: str) -> None:
    """Every value test of this file through the direct kernel (=1) and through the other routes (=0): the variable
    is read once per process, so each runs in a subprocess. By default small problems take the direct kernel
    (below), so the default run of the table mixes both."""
    _library()
    env = {**os.environ, "TORCHTRT_EXT_DCN_DIRECT": mode}
    env.pop("TORCHTRT_EXT_DCN_FUSED", None)
    tests = [f"{__file__}::{name}" for name in (
        "test_full_launcher_matches_float64_reference", "test_the_route_torchtrt_ext_dcn_direct_names",
        "test_float32_keeps_its_accuracy_at_any_magnitude",
        "test_a_workspace_of_one_image_gives_the_same_result_in_several_passes",
        "test_misaligned_pointers_take_the_unaligned_paths", "test_channels_last_input_is_read_as_it_is",
        "test_calls_queued_back_to_back_each_read_their_own_input",
        "test_a_cuda_graph_of_the_launcher_replays_it_on_new_values",
        "test_a_workspace_full_of_nan_does_not_leak_into_the_output", "test_empty_batch_and_no_input_channels",
        "test_the_eager_op_runs_the_launcher")]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                         env=env, capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and " failed" not in run.stdout, run.stdout[-2000:]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_by_default_small_problems_are_one_launch_of_the_direct_kernel(dtype: torch.dtype) -> None:
    """Unset TORCHTRT_EXT_DCN_DIRECT: the direct kernel takes the sizes where it measured faster (directMaxMacs):
    NCHW float32 up to 2^26 multiply-adds (issue 30's 1x64->64x40x40), NCHW fp16/bf16 up to 2^24, channels-last
    float32 up to 2^22, channels-last fp16/bf16 never; larger ones take the other routes."""
    if _one_route() or os.environ.get("TORCHTRT_EXT_DCN_FUSED") in ("0", "1"):
        pytest.skip("the default route: TORCHTRT_EXT_DCN_FUSED or TORCHTRT_EXT_DCN_DIRECT is set")
    _library()
    rest = ((3, 3), (1, 1), (1, 1), (1, 1), 1, 1, 2.0, True, "rand")

    def direct(case: tuple, channels_last: bool = False) -> bool:
        t = _make(case)
        if channels_last:
            t["input"] = t["input"].contiguous(memory_format=torch.channels_last)
        names = _launches(_kernel_names(t, dtype))
        assert names, names
        return names == [n for n in names if "directKernel<" in n] and len(names) == 1

    tiny, mid = (1, 16, 16, 32, 32, *rest), (1, 32, 32, 40, 40, *rest)  # 2 M and 15 M multiply-adds
    small, large = (1, 64, 64, 40, 40, *rest), (2, 64, 64, 40, 40, *rest)  # 59 M and 118 M
    fp32 = dtype == torch.float32
    assert direct(tiny) and direct(mid) and direct(small) == fp32 and not direct(large)
    assert direct(tiny, channels_last=True) == fp32 and not direct(mid, channels_last=True)
