"""DeformConv2d: modulated deformable convolution (DCNv2), the semantics of ``torchvision.ops.deform_conv2d``.

For every output pixel ``(oy, ox)``, kernel tap ``(i, j)`` and offset group ``g``, the input of group ``g``'s
channels is sampled bilinearly at::

    y = oy * stride_h - pad_h + i * dil_h + offset[n, g*2*K + 2*(i*kw + j)    , oy, ox]
    x = ox * stride_w - pad_w + j * dil_w + offset[n, g*2*K + 2*(i*kw + j) + 1, oy, ox]

(``K = kh * kw``), multiplied by ``mask[n, g*K + i*kw + j, oy, ox]`` when a mask is given, and the sampled
columns are convolved with ``weight`` (``groups`` convolution groups) plus ``bias``. Bilinear sampling follows
torchvision's border rules: a point outside ``(-1, H) x (-1, W)`` gives 0, and each of its four corners that
lies outside the image contributes 0 on its own.

Inputs, in node order: ``input [N, C_in, H, W]``, ``offset [N, 2*offset_groups*K, H_out, W_out]``,
``weight [C_out, C_in/groups, kh, kw]``, optional ``bias [C_out]``, optional ``mask [N, offset_groups*K, H_out,
W_out]``. Optional inputs come last (``OpSpec`` requires it); when a mask is given without a bias, the public
function passes a zero bias, so a node never has a hole in its inputs.

Eager math: torchvision's op when torchvision imports, else the PyTorch implementation here (gather-based,
FP32). On CUDA tensors the launcher of csrc/kernels/deform_conv2d.cu runs the whole op (sampling, the GEMM (cuBLASLt's, else
our own tensor-core kernel), bias), the same code the TensorRT plugins run. The decomposition into standard ONNX ops is gather-based with explicit corner masks.
"""
from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from torchtrt_ext.errors import InvalidInputError
from torchtrt_ext.ops._deform_conv2d_launcher import deform_conv2d_full, launch, workspace_size
from torchtrt_ext.ops._torch_op import define_op
from torchtrt_ext.ops.spec import Attr, Buffer, Decomposer, OpSpec, Shape

_Pair = tuple[int, int]  # stride, padding, dilation as their attribute checks (``_is_pair``) leave them: (h, w)

_NAME = "DeformConv2d"


def _is_pair(value: Any, low: int) -> bool:
    """Whether an attribute value is two numbers >= ``low`` (an Attr check, run on each new call signature)."""
    return len(value) == 2 and all(x >= low for x in value)


# ------------------------------------------------------------------------------------------------ eager math
@functools.lru_cache(maxsize=None)
def _torchvision_op() -> Any:
    """torchvision.ops.deform_conv2d, or None when torchvision does not import here."""
    try:
        from torchvision.ops import deform_conv2d as tv_deform_conv2d
    except Exception:  # noqa: BLE001 - torchvision absent or built for another torch: use our PyTorch math
        return None
    return tv_deform_conv2d


def sample_columns(x: torch.Tensor, offset: torch.Tensor, mask: torch.Tensor | None, kernel: tuple[int, int],
                   stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int],
                   offset_groups: int) -> torch.Tensor:
    """The deformable column buffer ``[N, C_in * kh * kw, H_out * W_out]`` (row ``c * K + k``), in x's dtype.

    Bilinear sampling with torchvision's border rules, mask applied. Differentiable (gather-based).
    """
    n, c, h, w = x.shape
    kh, kw = kernel
    k = kh * kw
    ho, wo = offset.shape[-2:]
    p = ho * wo
    dtype, device = x.dtype, x.device
    oy = torch.arange(ho, device=device, dtype=dtype) * stride[0] - padding[0]
    ox = torch.arange(wo, device=device, dtype=dtype) * stride[1] - padding[1]
    ky = torch.arange(kh, device=device, dtype=dtype) * dilation[0]
    kx = torch.arange(kw, device=device, dtype=dtype) * dilation[1]
    base_y = (ky.view(kh, 1, 1, 1) + oy.view(1, 1, ho, 1)).expand(kh, kw, ho, wo).reshape(k, ho, wo)
    base_x = (kx.view(1, kw, 1, 1) + ox.view(1, 1, 1, wo)).expand(kh, kw, ho, wo).reshape(k, ho, wo)
    off = offset.reshape(n, offset_groups, k, 2, ho, wo)
    # floor and fraction of base + offset taken from the offset (exact; base + offset in float32 rounds the fraction
    # to 1/4096 of a pixel past 2048, as the CUDA kernels' cornersOf explains)
    fy, fx = off[:, :, :, 0].floor(), off[:, :, :, 1].floor()
    y0f = (base_y + fy).reshape(n, offset_groups, 1, k * p)
    x0f = (base_x + fx).reshape(n, offset_groups, 1, k * p)
    ly = (off[:, :, :, 0] - fy).reshape(n, offset_groups, 1, k * p)
    lx = (off[:, :, :, 1] - fx).reshape(n, offset_groups, 1, k * p)
    inside = (y0f + ly > -1) & (y0f < h) & (x0f + lx > -1) & (x0f < w)
    y0, x0 = y0f.long(), x0f.long()
    data = x.reshape(n, offset_groups, c // offset_groups, h * w)
    cols = x.new_zeros(n, offset_groups, c // offset_groups, k * p)
    for dy, dx, weight in ((0, 0, (1 - ly) * (1 - lx)), (0, 1, (1 - ly) * lx), (1, 0, ly * (1 - lx)), (1, 1, ly * lx)):
        yi, xi = y0 + dy, x0 + dx
        valid = inside & (yi >= 0) & (yi <= h - 1) & (xi >= 0) & (xi <= w - 1)
        index = (yi.clamp(0, h - 1) * w + xi.clamp(0, w - 1)).expand(n, offset_groups, c // offset_groups, k * p)
        # a corner outside is zeros, not 0 times the clamped pixel (0 * inf = NaN); no NaN gradient either
        cols = cols + torch.where(valid, torch.gather(data, 3, index), 0) * weight
    if mask is not None:
        cols = cols * mask.reshape(n, offset_groups, 1, k * p)
    return cols.reshape(n, c * k, p)


def columns_to_output(cols: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, groups: int,
                      out_hw: tuple[int, int]) -> torch.Tensor:
    """``weight`` (grouped) times the column buffer ``[N, C_in*K, P]``, plus bias: ``[N, C_out, H_out, W_out]``."""
    n = cols.shape[0]
    c_out = weight.shape[0]
    w = weight.reshape(groups, c_out // groups, -1)
    p = out_hw[0] * out_hw[1]  # explicit, not -1: an empty batch has no elements to infer it from
    out = torch.matmul(w, cols.reshape(n, groups, w.shape[-1], p)).reshape(n, c_out, *out_hw)
    if bias is not None:
        out = out + bias.reshape(1, c_out, 1, 1)
    return out


def torch_deform_conv2d(input: torch.Tensor, offset: torch.Tensor, weight: torch.Tensor,
                        bias: torch.Tensor | None, mask: torch.Tensor | None, stride: tuple[int, int],
                        padding: tuple[int, int], dilation: tuple[int, int], groups: int,
                        offset_groups: int) -> torch.Tensor:
    """The op in plain PyTorch (FP32 math, result in input's dtype); needs no torchvision."""
    b, m = (None if t is None else t.float() for t in (bias, mask))
    kernel, out_size = (weight.shape[-2], weight.shape[-1]), (offset.shape[-2], offset.shape[-1])
    cols = sample_columns(input.float(), offset.float(), m, kernel, stride, padding, dilation, offset_groups)
    return columns_to_output(cols, weight.float(), b, groups, out_size).to(input.dtype)


def _eager(input: torch.Tensor, offset: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
           mask: torch.Tensor | None, stride: _Pair, padding: _Pair, dilation: _Pair, groups: int,
           offset_groups: int) -> torch.Tensor:
    tv = _torchvision_op()
    if tv is None:
        return torch_deform_conv2d(input, offset, weight, bias, mask, stride, padding, dilation, groups, offset_groups)
    f32 = [None if t is None else t.float() for t in (input, offset, weight, bias, mask)]
    x, off, w, b, m = f32
    y: torch.Tensor = tv(x, off, w, b, stride=tuple(stride), padding=tuple(padding), dilation=tuple(dilation),
                         mask=m)
    return y.to(input.dtype)


def _cuda(input: torch.Tensor, offset: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
          mask: torch.Tensor | None, stride: _Pair, padding: _Pair, dilation: _Pair, groups: int,
          offset_groups: int) -> torch.Tensor:
    if input.shape[0] == 0:  # nothing to launch a kernel for: the empty output, as torch's conv2d gives
        return torch_deform_conv2d(input, offset, weight, bias, mask, stride, padding, dilation, groups, offset_groups)
    return deform_conv2d_full(input, offset, weight, bias, mask, stride, padding, dilation, groups, offset_groups)


# ------------------------------------------------------------------------------------------ shapes and checks
def output_size(h: Any, w: Any, kernel: tuple[Any, Any], stride: _Pair, padding: _Pair,
                dilation: _Pair) -> tuple[Any, Any]:
    """(H_out, W_out) of the convolution; arithmetic only, so the dims may be symbolic. A symbolic dim is always the
    left operand: tensorrt.plugin's ShapeExpr has ``+ - * //`` but no reflected operators (``2 * dim`` fails)."""
    ho = (h + 2 * padding[0] - (kernel[0] - 1) * dilation[0] - 1) // stride[0] + 1
    wo = (w + 2 * padding[1] - (kernel[1] - 1) * dilation[1] - 1) // stride[1] + 1
    return ho, wo


def _shape_rule(shapes: list[Shape], dtypes: list[torch.dtype], stride: _Pair, padding: _Pair, dilation: _Pair,
                groups: int, offset_groups: int) -> list[tuple[Shape, torch.dtype]]:
    x, weight = shapes[0], shapes[2]
    ho, wo = output_size(x[2], x[3], (weight[2], weight[3]), stride, padding, dilation)
    return [((x[0], weight[0], ho, wo), dtypes[0])]


def _known(*dims: Any) -> bool:
    """Whether every dim is a plain int (symbolic dims are not checked: comparing them would specialize them)."""
    return all(isinstance(d, int) for d in dims)


def _bad(arg: str, got: str, expected: str, remedy: str) -> InvalidInputError:
    return InvalidInputError(f"{_NAME}: argument {arg!r} {got}; expected {expected}", remedy=remedy)


def _prepare(shapes: list[Shape], dtypes: list[torch.dtype], stride: _Pair, padding: _Pair, dilation: _Pair,
             groups: int, offset_groups: int) -> dict[str, Any]:
    names = ["input", "offset", "weight", "bias", "mask"][:len(shapes)]
    ranks = {"input": 4, "offset": 4, "weight": 4, "bias": 1, "mask": 4}
    for name, shape in zip(names, shapes):
        if len(shape) != ranks[name]:
            raise _bad(name, f"has shape {list(shape)}", f"a rank-{ranks[name]} tensor",
                       "pass input/offset/mask as [N, C, H, W], weight as [C_out, C_in/groups, kh, kw], bias as [C_out]")
    for name, dtype in zip(names, dtypes):
        if dtype != dtypes[0]:
            raise _bad(name, f"has dtype {dtype}", f"the dtype of 'input' ({dtypes[0]})", f"cast it: {name}.to(input.dtype)")
    x, offset, weight = shapes[:3]
    n, c_in, h, w = x
    c_out, c_per_group, kh, kw = weight
    k = kh * kw
    if _known(c_out) and c_out % groups:
        raise _bad("weight", f"has {c_out} output channels", f"a multiple of groups={groups}",
                   "make out_channels divisible by groups")
    if _known(c_in, c_per_group) and c_per_group * groups != c_in:
        raise _bad("weight", f"has shape {list(weight)} ({c_per_group} input channels per group)",
                   f"C_in/groups = {c_in}/{groups} input channels per group for an input of {c_in} channels",
                   "weight must be [C_out, C_in/groups, kh, kw]")
    if _known(offset[1], k) and offset[1] != 2 * offset_groups * k:
        raise _bad("offset", f"has {offset[1]} channels",
                   f"2 * offset_groups * kh * kw channels, a positive multiple of 2*{kh}*{kw} = {2 * k}",
                   "give 2 offsets (dy, dx) per kernel tap and offset group")
    if _known(c_in) and c_in % offset_groups:
        raise _bad("offset", f"implies offset_groups={offset_groups}",
                   f"a divisor of the input's {c_in} channels", "use an offset group count that divides C_in")
    ho, wo = output_size(h, w, (kh, kw), stride, padding, dilation)
    if _known(ho, wo) and (ho < 1 or wo < 1):
        raise _bad("input", f"of spatial size {h}x{w} gives an empty output ({ho}x{wo}) for kernel {kh}x{kw}, "
                   f"stride {list(stride)}, padding {list(padding)}, dilation {list(dilation)}",
                   "an output of at least 1x1", "pad the input or use a smaller kernel/dilation")
    for name, shape in zip(names, shapes):
        if name in ("offset", "mask"):
            if _known(shape[0], n) and shape[0] != n:
                raise _bad(name, f"has batch {shape[0]}", f"the batch of 'input' ({n})", "pass one per image")
            if _known(shape[2], shape[3], ho, wo) and (shape[2], shape[3]) != (ho, wo):
                raise _bad(name, f"has spatial size {shape[2]}x{shape[3]}", f"the output size {ho}x{wo}",
                           "compute it at the convolution's output resolution")
        if name == "mask" and _known(shape[1], k) and shape[1] != offset_groups * k:
            raise _bad("mask", f"has {shape[1]} channels", f"offset_groups * kh * kw = {offset_groups * k} "
                       "(offset_groups taken from offset's channels)", "give one mask value per kernel tap and group")
        if name == "bias" and _known(shape[0], c_out) and shape[0] != c_out:
            raise _bad("bias", f"has shape {list(shape)}", f"[C_out] = [{c_out}]", "one bias per output channel")
    return {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups,
            "offset_groups": offset_groups}


# ------------------------------------------------------------------------------------------------ decomposition
def _decompose(d: Decomposer, inputs: list[str], outputs: list[str], stride: _Pair, padding: _Pair,
               dilation: _Pair, groups: int, offset_groups: int) -> None:
    """Gather-based: sampling positions from Range + offsets, four GatherND corners with explicit masks, MatMul.

    Every size comes from Shape at run time (dynamic batch and spatial dims work), the kernel size from the weight's,
    and every attribute enters as a tensor (``d.const``), so the same nodes serve every node of the op as its ONNX
    function; math in FP32.
    """
    x_in, off_in, w_in = inputs[:3]
    bias = inputs[3] if len(inputs) > 3 and inputs[3] else None
    mask = inputs[4] if len(inputs) > 4 and inputs[4] else None
    i64, f32 = np.int64, 1  # onnx.TensorProto.FLOAT

    def dim(tensor: str, axis: int) -> str:  # a [1] int64 tensor holding tensor.shape[axis]
        return d.op("Shape", tensor, start=axis, end=axis + 1)

    def cat(*parts: str) -> str:
        return d.op("Concat", *parts, axis=0)

    def pick(pair: str, index: int) -> str:  # a 0-D float32 tensor: element ``index`` of a [2] attribute tensor
        return d.op("Gather", pair, d.const(index, i64), axis=0)

    def arange(size: str, scale: str, shift: str | None = None) -> str:  # float32 [size]: i * scale + shift
        r = d.op("Range", d.const(0, i64), d.op("Squeeze", size, d.const([0], i64)), d.const(1, i64))
        scaled = d.op("Mul", d.op("Cast", r, to=f32), scale)
        return scaled if shift is None else d.op("Sub", scaled, shift)

    strides, pads, dilations = (d.const(v, np.float32) for v in (stride, padding, dilation))
    x = d.op("Cast", x_in, to=f32)
    off = d.op("Cast", off_in, to=f32)
    w = d.op("Cast", w_in, to=f32)
    n, c, h, wd = (dim(x_in, a) for a in range(4))
    ho, wo = dim(off_in, 2), dim(off_in, 3)
    c_out, kh, kw = dim(w_in, 0), dim(w_in, 2), dim(w_in, 3)
    k = d.op("Mul", kh, kw)
    one = d.const([1], i64)
    og_t = d.const([offset_groups], i64)
    # base sampling positions per tap and output pixel: [K, Ho, Wo]
    oy = d.op("Reshape", arange(ho, pick(strides, 0), pick(pads, 0)), cat(one, one, ho, one))
    ox = d.op("Reshape", arange(wo, pick(strides, 1), pick(pads, 1)), cat(one, one, one, wo))
    ky = d.op("Reshape", arange(kh, pick(dilations, 0)), cat(kh, one, one, one))
    kx = d.op("Reshape", arange(kw, pick(dilations, 1)), cat(one, kw, one, one))
    grid = cat(kh, kw, ho, wo)
    tap_grid = cat(one, one, k, ho, wo)
    base_y = d.op("Reshape", d.op("Expand", d.op("Add", ky, oy), grid), tap_grid)
    base_x = d.op("Reshape", d.op("Expand", d.op("Add", kx, ox), grid), tap_grid)
    # offsets [N, og, K, 2, Ho, Wo] -> sampling points [N, og, K*Ho*Wo]
    off6 = d.op("Reshape", off, cat(n, og_t, k, d.const([2], i64), ho, wo))
    flat = cat(n, og_t, d.op("Mul", k, d.op("Mul", ho, wo)))
    # the points' floor and fraction from the offsets (exact, as sample_columns takes them)
    off_y, off_x = d.op("Gather", off6, d.const(0, i64), axis=3), d.op("Gather", off6, d.const(1, i64), axis=3)
    fy, fx = d.op("Floor", off_y), d.op("Floor", off_x)
    y0f, x0f = d.op("Reshape", d.op("Add", base_y, fy), flat), d.op("Reshape", d.op("Add", base_x, fx), flat)
    ly, lx = d.op("Reshape", d.op("Sub", off_y, fy), flat), d.op("Reshape", d.op("Sub", off_x, fx), flat)
    hf, wf = d.op("Cast", h, to=f32), d.op("Cast", wd, to=f32)
    minus_one = d.const(-1.0)
    inside = d.op("And", d.op("And", d.op("Greater", d.op("Add", y0f, ly), minus_one), d.op("Less", y0f, hf)),
                  d.op("And", d.op("Greater", d.op("Add", x0f, lx), minus_one), d.op("Less", x0f, wf)))
    one_f = d.const(1.0)
    hy, hx = d.op("Sub", one_f, ly), d.op("Sub", one_f, lx)
    y0, x0 = d.op("Cast", y0f, to=7), d.op("Cast", x0f, to=7)  # INT64
    one_i, zero_i = d.const(1, i64), d.const(0, i64)
    y1, x1 = d.op("Add", y0, one_i), d.op("Add", x0, one_i)
    h_last, w_last = d.op("Sub", h, one), d.op("Sub", wd, one)
    m = d.op("Reshape", d.op("Cast", mask, to=f32), flat) if mask is not None else None
    zero_f = d.const(0.0)
    # the input as [N, og, H*W, C/og] for GatherND with batch_dims=2
    c_per_og = d.op("Div", c, og_t)
    data = d.op("Transpose", d.op("Reshape", x, cat(n, og_t, c_per_og, d.op("Mul", h, wd))), perm=[0, 1, 3, 2])
    cols = None
    for yi, xi, wy, wx in ((y0, x0, hy, hx), (y0, x1, hy, lx), (y1, x0, ly, hx), (y1, x1, ly, lx)):
        ok = d.op("And", inside,
                  d.op("And", d.op("And", d.op("GreaterOrEqual", yi, zero_i), d.op("LessOrEqual", yi, h_last)),
                       d.op("And", d.op("GreaterOrEqual", xi, zero_i), d.op("LessOrEqual", xi, w_last))))
        weight = d.op("Mul", wy, wx) if m is None else d.op("Mul", d.op("Mul", wy, wx), m)
        yc = d.op("Max", d.op("Min", yi, h_last), zero_i)
        xc = d.op("Max", d.op("Min", xi, w_last), zero_i)
        index = d.op("Unsqueeze", d.op("Add", d.op("Mul", yc, wd), xc), d.const([3], i64))
        vals = d.op("GatherND", data, index, batch_dims=2)  # [N, og, K*Ho*Wo, C/og]
        # a corner outside is zeros, not 0 times the clamped pixel (0 * inf = NaN)
        vals = d.op("Where", d.op("Unsqueeze", ok, d.const([3], i64)), vals, zero_f)
        term = d.op("Mul", vals, d.op("Unsqueeze", weight, d.const([3], i64)))
        cols = term if cols is None else d.op("Add", cols, term)
    assert cols is not None  # the four corners were summed
    # [N, og, K, Ho*Wo, C/og] -> [N, og, C/og, K, Ho*Wo] -> [N, groups, C*K/groups, Ho*Wo]
    p = d.op("Mul", ho, wo)
    cols = d.op("Reshape", cols, cat(n, og_t, k, p, c_per_og))
    cols = d.op("Transpose", cols, perm=[0, 1, 4, 2, 3])
    g_t = d.const([groups], i64)
    cols = d.op("Reshape", cols, cat(n, g_t, d.const([-1], i64), p))
    wmat = d.op("Reshape", w, cat(g_t, d.op("Div", c_out, g_t), d.const([-1], i64)))
    out = d.op("Reshape", d.op("MatMul", wmat, cols), cat(n, c_out, ho, wo))
    if bias is not None:
        out = d.op("Add", out, d.op("Reshape", d.op("Cast", bias, to=f32), cat(one, c_out, one, one)))
    d.op("CastLike", out, x_in, out=outputs[0])


# ----------------------------------------------------------------------------------------------- the launcher
def _launch(inputs: Sequence[Buffer | None], outputs: Sequence[Buffer], stream: int, *, stride: _Pair,
            padding: _Pair, dilation: _Pair, groups: int, offset_groups: int) -> None:
    """The full-op launcher (sampling + our GEMM) on raw buffers (the Python plugin's kernel call), with a workspace
    allocated here (torch's caching allocator, recorded on ``stream`` so it is not reused before the kernels finish)."""
    x, offset, weight, bias, mask = (list(inputs) + [None, None])[:5]
    assert x is not None and offset is not None and weight is not None  # required inputs
    y = outputs[0]
    if math.prod(y.shape) == 0:
        return
    conv = (stride, padding, dilation, groups, offset_groups)
    nbytes = workspace_size(x.shape, weight.shape, *conv, x.dtype)
    device = torch.device("cuda", torch.cuda.current_device())
    workspace = torch.empty(max(1, nbytes), dtype=torch.uint8, device=device)
    workspace.record_stream(torch.cuda.ExternalStream(stream, device=device))  # type: ignore[no-untyped-call]
    launch(x.dtype, x.ptr, offset.ptr, weight.ptr, None if bias is None else bias.ptr,
           None if mask is None else mask.ptr, y.ptr, workspace.data_ptr(), nbytes, x.shape, weight.shape, *conv,
           stream, f"the {_NAME} launcher")


# ------------------------------------------------------------------------------------------------------- the op
SPEC = OpSpec(
    name=_NAME,
    inputs=("input", "offset", "weight", "bias", "mask"),
    outputs=("output",),
    attrs=(
        Attr("stride", "ints", default=(1, 1), doc="(stride_h, stride_w)", check=lambda v: _is_pair(v, 1),
             allowed="an int >= 1 or two of them"),
        Attr("padding", "ints", default=(0, 0), doc="(pad_h, pad_w), zero padding on both sides",
             check=lambda v: _is_pair(v, 0), allowed="an int >= 0 or two of them"),
        Attr("dilation", "ints", default=(1, 1), doc="(dil_h, dil_w)", check=lambda v: _is_pair(v, 1),
             allowed="an int >= 1 or two of them"),
        Attr("groups", "int", default=1, doc="convolution groups", check=lambda v: v >= 1, allowed="an int >= 1"),
        Attr("offset_groups", "int", default=1, doc="offset groups (offset has 2*offset_groups*kh*kw channels)",
             check=lambda v: v >= 1, allowed="an int >= 1 (derived from offset's channels)"),
    ),
    eager=_eager,
    shape_rule=_shape_rule,
    decompose=_decompose,
    prepare=_prepare,
    cuda=_cuda,
    launch=_launch,
    optional_inputs=("bias", "mask"),
    doc="modulated deformable convolution (DCNv2), torchvision.ops.deform_conv2d semantics",
)

DEFORM_CONV2D = define_op(SPEC)


def _pair(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value)
    return tuple(value) if isinstance(value, (list, tuple)) else value


def _offset_groups(offset_shape: Sequence[Any], weight_shape: Sequence[Any]) -> int:
    """The offset group count implied by offset's channels (2 offsets per kernel tap and group); at least 1."""
    taps = 2 * int(weight_shape[2]) * int(weight_shape[3])
    return max(1, int(offset_shape[1]) // taps) if taps else 1


def deform_conv2d(input: torch.Tensor, offset: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                  *, mask: torch.Tensor | None = None, stride: int | tuple[int, int] = 1,
                  padding: int | tuple[int, int] = 0, dilation: int | tuple[int, int] = 1,
                  groups: int = 1) -> torch.Tensor:
    """Modulated deformable convolution (``torchvision.ops.deform_conv2d`` semantics); one DeformConv2d node.

    Args:
        input: ``[N, C_in, H, W]``.
        offset: ``[N, 2*offset_groups*kh*kw, H_out, W_out]``, (dy, dx) per kernel tap; offset_groups is derived
            from its channels.
        weight: ``[C_out, C_in/groups, kh, kw]``.
        bias: ``[C_out]``. Default: None (no bias).
        mask: ``[N, offset_groups*kh*kw, H_out, W_out]`` modulation (DCNv2). Default: None (DCNv1, all ones).
        stride, padding, dilation: an int or (h, w). Defaults: 1, 0, 1.
        groups: convolution groups. Default: 1.

    Returns:
        ``[N, C_out, H_out, W_out]`` in input's dtype.
    """
    for name, t in (("offset", offset), ("weight", weight)):
        if not isinstance(t, torch.Tensor):
            raise InvalidInputError(f"{_NAME}: input {name!r} must be a torch.Tensor, got {type(t).__name__}")
    offset_groups = 1
    if weight.dim() == 4 and offset.dim() == 4:
        if torch.jit.is_tracing():  # type: ignore[attr-defined,no-untyped-call]  # dynamo traces this, not _C's
            with warnings.catch_warnings():  # channel counts are static: the legacy tracer's int() warning is moot
                warnings.simplefilter("ignore", torch.jit.TracerWarning)  # type: ignore[attr-defined]
                offset_groups = _offset_groups(offset.shape, weight.shape)
        else:  # catch_warnings costs microseconds per call (and resets the warning registry): only where it matters
            offset_groups = _offset_groups(offset.shape, weight.shape)
    if mask is not None and bias is None and isinstance(weight, torch.Tensor) and weight.dim() >= 1:
        bias = weight.new_zeros(weight.shape[0])  # keep the optional inputs without holes (mask is the last one)
    tensors = (input, offset, weight, bias) + ((mask,) if mask is not None else ())
    if bias is None:
        tensors = tensors[:3]
    y: torch.Tensor = DEFORM_CONV2D(*tensors, stride=_pair(stride), padding=_pair(padding), dilation=_pair(dilation),
                                    groups=groups, offset_groups=offset_groups)
    return y
