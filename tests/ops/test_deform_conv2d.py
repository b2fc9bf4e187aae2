"""DeformConv2d: eager vs a loop reference, both exporters, decomposition in onnxruntime, bad inputs (CPU only)."""
from __future__ import annotations

import importlib
import math
from typing import Any

import onnx
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

import torchtrt_ext
from torchtrt_ext.errors import InvalidAttributeError, InvalidInputError
from torchtrt_ext.ops import deform_conv2d
from torchtrt_ext.nn import DeformConv2d
from torchtrt_ext.ops.deform_conv2d import DEFORM_CONV2D, torch_deform_conv2d
from tests.helpers import node_attrs, op_types, rel_err, run_onnx, single_custom_node

EXPORTERS = ["legacy", "dynamo"]
# the module (the package exports the function under its name)
_DEFORM_MODULE = importlib.import_module("torchtrt_ext.ops.deform_conv2d")


def _bilinear(img: torch.Tensor, y: float, x: float) -> float:
    """torchvision's rule: 0 outside (-1, H) x (-1, W); corners outside the image contribute 0 each."""
    h, w = img.shape
    if y <= -1 or y >= h or x <= -1 or x >= w:
        return 0.0
    y0, x0 = math.floor(y), math.floor(x)
    ly, lx = y - y0, x - x0
    value = 0.0
    for yy, xx, weight in ((y0, x0, (1 - ly) * (1 - lx)), (y0, x0 + 1, (1 - ly) * lx),
                           (y0 + 1, x0, ly * (1 - lx)), (y0 + 1, x0 + 1, ly * lx)):
        if 0 <= yy < h and 0 <= xx < w:
            value += weight * float(img[yy, xx])
    return value


def loop_reference(x: torch.Tensor, offset: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                   mask: torch.Tensor | None, stride: tuple, padding: tuple, dilation: tuple,
                   groups: int) -> torch.Tensor:
    """Slow and plain float64 loops over every output pixel, channel and tap."""
    x, offset, weight = x.double(), offset.double(), weight.double()
    n_batch, c_in, h, w = x.shape
    c_out, c_per_group, kh, kw = weight.shape
    ho = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    offset_groups = offset.shape[1] // (2 * kh * kw)
    out = torch.zeros(n_batch, c_out, ho, wo, dtype=torch.float64)
    outs_per_group = c_out // groups
    for n in range(n_batch):
        for c in range(c_in):
            g_off = c // (c_in // offset_groups)
            group = c // c_per_group
            for i in range(kh):
                for j in range(kw):
                    tap = i * kw + j
                    for oy in range(ho):
                        for ox in range(wo):
                            y = oy * stride[0] - padding[0] + i * dilation[0] + float(offset[n, g_off * 2 * kh * kw + 2 * tap, oy, ox])
                            xx = ox * stride[1] - padding[1] + j * dilation[1] + float(offset[n, g_off * 2 * kh * kw + 2 * tap + 1, oy, ox])
                            v = _bilinear(x[n, c], y, xx)
                            if mask is not None:
                                v *= float(mask[n, g_off * kh * kw + tap, oy, ox])
                            for o in range(group * outs_per_group, (group + 1) * outs_per_group):
                                out[n, o, oy, ox] += float(weight[o, c % c_per_group, i, j]) * v
    if bias is not None:
        out += bias.double().view(1, -1, 1, 1)
    return out


def _case(n: int = 2, c_in: int = 4, c_out: int = 4, h: int = 5, w: int = 6, k: tuple = (3, 3), stride: tuple = (1, 1),
          padding: tuple = (1, 1), dilation: tuple = (1, 1), groups: int = 1, offset_groups: int = 1,
          sigma: float = 2.0, bias: bool = True, mask: str = "rand", seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    ho = (h + 2 * padding[0] - dilation[0] * (k[0] - 1) - 1) // stride[0] + 1
    wo = (w + 2 * padding[1] - dilation[1] * (k[1] - 1) - 1) // stride[1] + 1
    taps = k[0] * k[1]
    masks = {"rand": lambda: torch.rand(n, offset_groups * taps, ho, wo, generator=gen),
             "zeros": lambda: torch.zeros(n, offset_groups * taps, ho, wo), "none": lambda: None}
    return dict(
        x=torch.randn(n, c_in, h, w, generator=gen),
        offset=torch.randn(n, 2 * offset_groups * taps, ho, wo, generator=gen) * sigma,
        weight=torch.randn(c_out, c_in // groups, *k, generator=gen),
        bias=torch.randn(c_out, generator=gen) if bias else None,
        mask=masks[mask](), stride=stride, padding=padding, dilation=dilation, groups=groups)


CASES = {
    "basic": {},
    "far_outside": {"sigma": 6.0},  # many points beyond (-1, H) x (-1, W), some with one corner inside
    "zero_mask": {"mask": "zeros"},
    "no_mask_no_bias": {"mask": "none", "bias": False},
    "groups2": {"groups": 2, "c_out": 6},
    "offset_groups2": {"offset_groups": 2},
    "groups2_offset_groups4": {"groups": 2, "offset_groups": 4, "c_out": 2},
    "stride2": {"stride": (2, 2), "h": 7, "w": 8},
    "dilation2": {"dilation": (2, 2), "padding": (2, 2)},
    "mixed": {"k": (2, 3), "stride": (2, 1), "padding": (0, 2), "dilation": (1, 2), "offset_groups": 2},
}


def _run(case: dict, **overrides) -> torch.Tensor:
    return deform_conv2d(case["x"], case["offset"], case["weight"], case["bias"], mask=case["mask"],
                         stride=case["stride"], padding=case["padding"], dilation=case["dilation"],
                         groups=case["groups"], **overrides)


def _without_torchvision(monkeypatch: pytest.MonkeyPatch) -> None:
    """The eager op as where torchvision does not import: its own PyTorch math."""
    monkeypatch.setattr(_DEFORM_MODULE, "_torchvision_op", lambda: None)


@pytest.mark.parametrize("name", list(CASES))
def test_eager_matches_loop_reference(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The eager op (torchvision's where it imports), then the PyTorch math torchvision's absence leaves."""
    case = _case(**CASES[name])
    ref = loop_reference(**case)
    got = _run(case)
    _without_torchvision(monkeypatch)
    own = _run(case)
    for out in (got, own):
        assert out.shape == ref.shape and out.dtype == torch.float32
        assert rel_err(out, ref) < 1e-5 if ref.norm() > 0 else out.abs().max() < 1e-6


def test_torchvision_is_used_where_it_imports() -> None:
    """Where torchvision imports, the eager op is torchvision.ops.deform_conv2d on float32 inputs (real torchvision)."""
    tv = _DEFORM_MODULE._torchvision_op()
    if tv is None:
        pytest.skip("torchvision does not import here (absent, or built for another torch: PyPI's torchvision 0.28.0 "
                    "wheel is a CUDA build that needs libtorch_cuda.so, which the CPU torch lacks)")
    case = _case(**CASES["mixed"])
    expected = tv(case["x"], case["offset"], case["weight"], case["bias"], stride=case["stride"],
                  padding=case["padding"], dilation=case["dilation"], mask=case["mask"])
    assert torch.equal(_run(case), expected)


class TorchvisionStandIn:
    """A stand-in for ``torchvision.ops.deform_conv2d`` (torchvision cannot run here): for the orchestration of the
    eager op's torchvision branch only, that every argument reaches torchvision's slot. torchvision 0.28's signature
    and argument handling (stride/padding/dilation as an int or a pair of ints, groups and offset groups from the
    shapes), one float dtype as its CPU kernel needs (stricter: float32 only); the math is the op's PyTorch one."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, input: torch.Tensor, offset: torch.Tensor, weight: torch.Tensor,
                 bias: torch.Tensor | None = None, stride: Any = (1, 1), padding: Any = (0, 0),
                 dilation: Any = (1, 1), mask: torch.Tensor | None = None) -> torch.Tensor:
        self.calls += 1
        for t in (input, offset, weight, bias, mask):
            if t is not None and not (isinstance(t, torch.Tensor) and t.dtype == torch.float32):
                raise TypeError(f"stand-in torchvision: expected float32 tensors, got {t!r:.40}")
        pairs = [torch.nn.modules.utils._pair(v) for v in (stride, padding, dilation)]
        if not all(isinstance(v, int) for pair in pairs for v in pair):
            raise TypeError(f"stand-in torchvision: stride, padding, dilation must be ints, got {pairs}")
        kh, kw = weight.shape[-2:]
        return torch_deform_conv2d(input, offset, weight, bias, mask, *pairs, input.shape[1] // weight.shape[1],
                                   offset.shape[1] // (2 * kh * kw))


@pytest.mark.parametrize("name,dtype", [("mixed", torch.float32), ("no_mask_no_bias", torch.float32),
                                        ("groups2_offset_groups4", torch.float32), ("offset_groups2", torch.float16)])
def test_the_torchvision_branch_passes_every_argument(name: str, dtype: torch.dtype,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a stand-in torchvision (see TorchvisionStandIn): the result is the loop reference's, in the inputs'
    dtype, so no argument was dropped, swapped or left in another dtype."""
    stand_in = TorchvisionStandIn()
    monkeypatch.setattr(_DEFORM_MODULE, "_torchvision_op", lambda: stand_in)
    case = _case(**CASES[name])
    ref = loop_reference(**case)
    got = _run({k: v.to(dtype) if isinstance(v, torch.Tensor) else v for k, v in case.items()})
    assert stand_in.calls == 1 and got.dtype == dtype
    assert rel_err(got, ref) < (1e-5 if dtype == torch.float32 else 1e-2)


def test_border_rules_point_by_point() -> None:
    """One 1x1 tap on a 3x3 image of ones: the result is the sum of in-image corner weights."""
    x = torch.ones(1, 1, 3, 3)
    weight = torch.ones(1, 1, 1, 1)
    points = [(-1.0, 0.0, 0.0), (-0.5, 0.0, 0.5), (0.0, -0.25, 0.75), (2.5, 2.5, 0.25), (3.0, 1.0, 0.0),
              (2.0, 2.0, 1.0), (-0.999, 1.0, 0.001), (1.25, 1.5, 1.0), (-2.0, 1.0, 0.0)]
    for y, xx, expected in points:
        offset = torch.tensor([y, xx]).view(1, 2, 1, 1)  # sampling at (0, 0) + offset with a 1x1 output
        got = deform_conv2d(x[:, :, :, :], offset, weight, padding=0, stride=3)
        assert got.shape == (1, 1, 1, 1)
        assert abs(got.item() - expected) < 1e-5, (y, xx, got.item(), expected)


def test_float32_math_keeps_its_accuracy_on_wide_images() -> None:
    """Past 2048 pixels, base + offset in float32 rounds the sampling point's fraction to 1/4096 of a pixel (3e-5 of
    relative error at width 2111); the floor and fraction are taken from the offset itself (as the CUDA kernels do)."""
    g = torch.Generator().manual_seed(0)
    x, offset = torch.randn(1, 4, 3, 2111, generator=g), torch.randn(1, 18, 3, 2111, generator=g) * 2
    mask, weight = torch.rand(1, 9, 3, 2111, generator=g), torch.randn(8, 4, 3, 3, generator=g) * 0.1
    got = torch_deform_conv2d(x, offset, weight, None, mask, (1, 1), (1, 1), (1, 1), 1, 1)
    cols = _DEFORM_MODULE.sample_columns(x.double(), offset.double(), mask.double(), (3, 3), (1, 1), (1, 1), (1, 1), 1)
    ref = _DEFORM_MODULE.columns_to_output(cols, weight.double(), None, 1, (3, 2111))
    assert got.dtype == torch.float32 and rel_err(got.double(), ref) < 1e-5


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 2e-3), (torch.bfloat16, 1e-2)])
def test_low_precision(dtype: torch.dtype, tol: float) -> None:
    case = _case(**CASES["offset_groups2"])
    ref = loop_reference(**case)
    low = {k: (v.to(dtype) if isinstance(v, torch.Tensor) else v) for k, v in case.items()}
    got = _run(low)
    assert got.dtype == dtype
    assert rel_err(got, ref) < tol * 5  # inputs rounded to dtype too


@pytest.mark.parametrize("name", ["mixed", "groups2", "stride2"])
def test_meta_tensors_get_the_eager_output_shape(name: str) -> None:
    """Shape propagation without data (meta tensors, as torch.export and torch.compile trace) gives the shape and
    dtype the math gives: batch from the input, channels from the weight, a non-square kernel's own sizes."""
    # h = 8: "mixed"'s 2x3 kernel gives 4 rows, 3 if the kernel's width were taken for its height (7 gives 3 both ways)
    case = _case(**{"n": 3, "c_in": 4, "c_out": 6, "h": 8, "w": 9, **CASES[name]})
    ref = _run(case)
    meta = _run({k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in case.items()})
    assert (meta.device.type, meta.shape, meta.dtype) == ("meta", ref.shape, ref.dtype)


# One input dim at a time made symbolic (torch.export's dynamic dims, torch.compile(dynamic=True)): the input and its
# dim. Kernel 3x3 without padding, so the output is 2 smaller than the input (a comparison of H_out with 1 is open).
_SYMBOLIC_EXAMPLE = {"input": (2, 4, 8, 9), "offset": (2, 18, 6, 7), "weight": (6, 4, 3, 3), "bias": (6,),
                     "mask": (2, 9, 6, 7)}
_SYMBOLIC_DIMS = [(name, dim) for name, shape in _SYMBOLIC_EXAMPLE.items() for dim in range(len(shape))]


def _symbolic_inputs(symbolic: tuple[str, int], shapes: dict) -> tuple[FakeTensorMode, list[torch.Tensor]]:
    """Fake tensors of ``shapes`` in a fresh ShapeEnv, only the dim ``symbolic`` = (input, dim) symbolic."""
    mode = FakeTensorMode(shape_env=ShapeEnv())
    fakes = []
    for name, shape in shapes.items():
        dims = [DimDynamic.DYNAMIC if (name, d) == symbolic else DimDynamic.STATIC for d in range(len(shape))]
        fakes.append(mode.from_tensor(torch.rand(shape), symbolic_context=StatelessSymbolicContext(dynamic_sizes=dims)))
    return mode, fakes


@pytest.mark.parametrize("symbolic", _SYMBOLIC_DIMS, ids=[f"{n}{d}" for n, d in _SYMBOLIC_DIMS])
def test_a_symbolic_dim_is_traced_without_guards(symbolic: tuple[str, int]) -> None:
    """A dim the tracer keeps symbolic stays free: the op's checks compare concrete dims only (a comparison with a
    symbolic one would add a guard that specializes the dim or narrows its range, and torch.export then refuses the
    dynamic dim). The only guards are those of allocating the output itself; its shape follows the symbol."""
    mode, (x, offset, weight, bias, mask) = _symbolic_inputs(symbolic, _SYMBOLIC_EXAMPLE)
    env = mode.shape_env
    with mode:
        ho, wo = x.shape[2] - weight.shape[2] + 1, x.shape[3] - weight.shape[3] + 1
        torch.empty(x.shape[0], weight.shape[0], ho, wo)  # the output's own guards (sizes >= 0, strides)
        allocation_guards = [str(g.expr) for g in env.guards]
        out = DEFORM_CONV2D(x, offset, weight, bias, mask, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                            offset_groups=1)
    assert [str(g.expr) for g in env.guards] == allocation_guards
    assert not env.replacements  # no dim specialized to its example size
    assert tuple(out.shape) == (x.shape[0], weight.shape[0], ho, wo)


def test_bad_concrete_dims_are_refused_beside_symbolic_ones() -> None:
    """Symbolic dims are not checked, the concrete ones still are: with a symbolic batch, a wrong offset channel count
    is refused naming the offset."""
    shapes = dict(_SYMBOLIC_EXAMPLE, offset=(2, 17, 6, 7))
    mode, tensors = _symbolic_inputs(("input", 0), shapes)
    with mode, pytest.raises(InvalidInputError, match=r"'offset' has 17 channels"):
        DEFORM_CONV2D(*tensors, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, offset_groups=1)


def test_gradient_flows_to_every_input() -> None:
    case = _case(n=1, c_in=2, c_out=2, h=4, w=4)
    leaves = {k: case[k].requires_grad_(True) for k in ("x", "offset", "weight", "bias", "mask")}
    _run(case).square().sum().backward()
    for name, t in leaves.items():
        assert t.grad is not None and torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0, name
    # the weight gradient against a central finite difference on one element
    w = case["weight"].detach().clone()
    eps = 1e-3

    def loss(weight: torch.Tensor) -> float:
        c = dict(case, weight=weight, **{k: case[k].detach() for k in ("x", "offset", "bias", "mask")})
        return _run(c).double().square().sum().item()

    plus, minus = w.clone(), w.clone()
    plus[1, 0, 2, 1] += eps
    minus[1, 0, 2, 1] -= eps
    numeric = (loss(plus) - loss(minus)) / (2 * eps)
    assert abs(numeric - leaves["weight"].grad[1, 0, 2, 1].item()) < 2e-2 * max(1.0, abs(numeric))


# ----------------------------------------------------------------------------------------------------- export
class OpModel(torch.nn.Module):
    def __init__(self, mask: bool = True, bias: bool = True, **kwargs) -> None:
        super().__init__()
        case = _case(**kwargs, bias=bias)
        self.conv = DeformConv2d(case["x"].shape[1], case["weight"].shape[0], tuple(case["weight"].shape[2:]),
                                 stride=case["stride"], padding=case["padding"], dilation=case["dilation"],
                                 groups=case["groups"], bias=bias)
        self.use_mask = mask

    def forward(self, x: torch.Tensor, offset: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.conv(x * 2.0, offset, mask.sigmoid() if self.use_mask else None) + 1.0


def _inputs(batch: int = 2, **kwargs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    case = _case(n=batch, **kwargs, mask="rand")
    return case["x"], case["offset"], case["mask"]


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_export_emits_one_node(exporter: str) -> None:
    kwargs = CASES["mixed"]
    model = OpModel(**kwargs).eval()
    onnx_model = torchtrt_ext.export_onnx(model, _inputs(**kwargs), exporter=exporter)
    node = single_custom_node(onnx_model)
    assert node.op_type == "DeformConv2d" and len(node.input) == 5
    assert node_attrs(node) == {"stride": [2, 1], "padding": [0, 2], "dilation": [1, 2], "groups": 1,
                            "offset_groups": 2, "plugin_version": b"1", "plugin_namespace": b"torchtrt_ext"}
    kinds = {t for _, t in op_types(onnx_model)}
    assert not kinds & {"GatherND", "GridSample", "MatMul"}
    onnx.checker.check_model(onnx_model, full_check=True)
    out_type = onnx_model.graph.output[0].type.tensor_type
    dims = [d.dim_value or d.dim_param for d in out_type.shape.dim]
    assert dims[1:] == [4, 2, 6]  # H_out, W_out from the shape rule: (5-1-1)//2+1, (6+4-2*2-1)//1+1


def test_both_exporters_agree_on_thesingle_custom_node() -> None:
    model = OpModel(**CASES["groups2_offset_groups4"]).eval()
    inputs = _inputs(**CASES["groups2_offset_groups4"])
    nodes = [single_custom_node(torchtrt_ext.export_onnx(model, inputs, exporter=e)) for e in EXPORTERS]
    assert node_attrs(nodes[0]) == node_attrs(nodes[1])
    assert node_attrs(nodes[0])["groups"] == 2 and node_attrs(nodes[0])["offset_groups"] == 4


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("name,mask,bias", [("basic", True, True), ("far_outside", True, False),
                                            ("groups2_offset_groups4", False, True), ("stride2", True, True),
                                            ("dilation2", False, False), ("mixed", True, True)])
def test_decomposition_matches_eager(exporter: str, name: str, mask: bool, bias: bool) -> None:
    kwargs = CASES[name]
    model = OpModel(mask=mask, bias=bias, **kwargs).eval()
    onnx_model = torchtrt_ext.export_onnx(model, _inputs(**kwargs), exporter=exporter)
    decomposed = torchtrt_ext.passes.decompose_custom_ops(onnx_model)
    assert all(d == "" for d, _ in op_types(decomposed))
    names = [i.name for i in decomposed.graph.input]
    for batch in (2, 3):  # also a batch size different from the exported one
        x, offset, m = _inputs(batch, seed=batch, **{k: v for k, v in kwargs.items() if k != "seed"})
        feeds = {k: v for k, v in {"x": x, "offset": offset, "mask": m}.items() if k in names}
        (got,) = run_onnx(decomposed, feeds)
        with torch.no_grad():
            ref = model(x, offset, m)
        assert got.shape == tuple(ref.shape)
        assert rel_err(got, ref) < 1e-5


def test_decomposition_keeps_float32_accuracy_on_wide_images() -> None:
    """The decomposed graph (onnxruntime, float32) at width 2111 against float64: within 1e-5, the sampling point's
    floor and fraction taken from the offset (base + offset in float32 gave 1.5e-5 here)."""
    case = dict(h=3, w=2111, sigma=2.0)
    model = OpModel(**case).eval()
    decomposed = torchtrt_ext.passes.decompose_custom_ops(torchtrt_ext.export_onnx(model, _inputs(1, **case)))
    x, offset, m = _inputs(1, seed=7, **case)
    (got,) = run_onnx(decomposed, {"x": x, "offset": offset, "mask": m})
    conv = model.conv
    cols = _DEFORM_MODULE.sample_columns(x.double() * 2.0, offset.double(), m.double().sigmoid(), (3, 3),
                                         conv.stride, conv.padding, conv.dilation, 1)
    ref = _DEFORM_MODULE.columns_to_output(cols, conv.weight.double(), conv.bias.double(), 1, (3, 2111)) + 1.0
    assert rel_err(got, ref) < 1e-5


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_decomposition_with_dynamic_spatial_size(exporter: str) -> None:
    """Dynamic batch and spatial dims (the offset's and mask's named apart from the input's) through either exporter:
    the decomposed graph runs at another batch and spatial size."""
    model = OpModel(**CASES["stride2"]).eval()
    dynamic = {"x": {0: "batch", 2: "h", 3: "w"}, "offset": {0: "batch", 2: "ho", 3: "wo"},
               "mask": {0: "batch", 2: "ho", 3: "wo"}}
    onnx_model = torchtrt_ext.export_onnx(model, _inputs(**CASES["stride2"]), dynamic_shapes=dynamic,
                                          exporter=exporter)
    decomposed = torchtrt_ext.passes.decompose_custom_ops(onnx_model)
    x, offset, m = _inputs(3, **dict(CASES["stride2"], h=9, w=12))
    (got,) = run_onnx(decomposed, {"x": x, "offset": offset, "mask": m})
    with torch.no_grad():
        assert rel_err(got, model(x, offset, m)) < 1e-5


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_float16_export_decomposes(exporter: str) -> None:
    model = OpModel().eval()
    inputs = [t.half() for t in _inputs()]
    onnx_model = torchtrt_ext.export_onnx(model.half(), tuple(inputs), exporter=exporter)
    x, offset, m = _inputs(3)
    (got,) = run_onnx(torchtrt_ext.passes.decompose_custom_ops(onnx_model),
                      {"x": x.half(), "offset": offset.half(), "mask": m.half()})
    assert got.dtype.name == "float16"
    with torch.no_grad():
        ref = OpModel.forward(model.float(), x.half().float(), offset.half().float(), m.half().float())
    assert rel_err(got, ref) < 2e-3


# ------------------------------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("kwargs,match", [
    ({"stride": 0}, r"argument stride=\(0, 0\) is not allowed. Allowed: an int >= 1 or two of them"),
    ({"stride": 1.5}, r"argument stride must be of type ints"),
    ({"padding": -1}, r"argument padding=\(-1, -1\) is not allowed"),
    ({"dilation": (1, 2, 3)}, r"argument dilation=\(1, 2, 3\) is not allowed"),
    ({"groups": 0}, r"argument groups=0 is not allowed. Allowed: an int >= 1"),
])
def test_bad_attributes(kwargs: dict, match: str) -> None:
    case = _case()
    with pytest.raises(InvalidAttributeError, match=match):
        deform_conv2d(case["x"], case["offset"], case["weight"], **kwargs)


def test_a_mask_without_bias_exports_a_zero_bias_not_a_hole() -> None:
    """TensorRT plugins take no empty input before a present one: the bias slot gets zeros of [C_out]."""
    model = OpModel(mask=True, bias=False, c_out=6, groups=2).eval()
    onnx_model = torchtrt_ext.export_onnx(model, _inputs(c_out=6, groups=2), exporter="legacy")
    node = single_custom_node(onnx_model)
    assert len(node.input) == 5 and all(node.input)
    bias = {t.name: onnx.numpy_helper.to_array(t) for t in onnx_model.graph.initializer}.get(node.input[3])
    if bias is None:  # folded into a Constant node instead of an initializer
        (const,) = [n for n in onnx_model.graph.node if node.input[3] in n.output]
        bias = onnx.numpy_helper.to_array(const.attribute[0].t)
    assert bias.shape == (6,) and not bias.any()


def test_non_tensor_inputs_are_named() -> None:
    case = _case()
    with pytest.raises(InvalidInputError, match=r"input 'offset' must be a torch.Tensor, got list"):
        deform_conv2d(case["x"], [0.0], case["weight"])
    with pytest.raises(InvalidInputError, match=r"input 'weight' must be a torch.Tensor, got float"):
        deform_conv2d(case["x"], case["offset"], 1.0)


def _bad_case(change: str) -> dict:
    case = _case(padding=(1, 1))
    n, c, h, w = case["x"].shape
    if change == "offset_channels":
        case["offset"] = torch.randn(n, 17, h, w)
    elif change == "offset_size":
        case["offset"] = torch.randn(n, 18, h + 1, w)
    elif change == "mask_channels":
        case["mask"] = torch.rand(n, 18, h, w)
    elif change == "mask_batch":
        case["mask"] = torch.rand(n + 1, 9, h, w)
    elif change == "weight_groups":
        case["groups"] = 3
    elif change == "weight_channels":
        case["weight"] = torch.randn(4, 3, 3, 3)
    elif change == "bias_shape":
        case["bias"] = torch.randn(5)
    elif change == "dtype":
        case["offset"] = case["offset"].half()
    elif change == "rank":
        case["x"] = case["x"][0]
    elif change == "offset_rank":
        case["offset"] = torch.randn(5)
    elif change == "offset_groups_divide":
        case["offset"] = torch.randn(n, 18 * 3, h, w)
        case["mask"] = torch.rand(n, 27, h, w)
    elif change == "empty_output":
        case["padding"] = (0, 0)
        case["x"] = torch.randn(n, c, 2, 2)
    elif change == "empty_width":
        case["padding"] = (0, 0)
        case["x"] = torch.randn(n, c, 5, 2)
    return case


@pytest.mark.parametrize("change,match", [
    ("offset_channels", r"'offset' has 17 channels; expected 2 \* offset_groups \* kh \* kw channels, a positive "
                        r"multiple of 2\*3\*3 = 18"),
    ("offset_size", r"'offset' has spatial size 6x6; expected the output size 5x6"),
    ("mask_channels", r"'mask' has 18 channels; expected offset_groups \* kh \* kw = 9"),
    ("mask_batch", r"'mask' has batch 3; expected the batch of 'input' \(2\)"),
    ("weight_groups", r"'weight' has 4 output channels; expected a multiple of groups=3"),
    ("weight_channels", r"'weight' has shape \[4, 3, 3, 3\] \(3 input channels per group\)"),
    ("bias_shape", r"'bias' has shape \[5\]; expected \[C_out\] = \[4\]\. Remedy: one bias per output channel"),
    ("dtype", r"'offset' has dtype torch.float16; expected the dtype of 'input' \(torch.float32\)"),
    ("rank", r"'input' has shape \[4, 5, 6\]; expected a rank-4 tensor"),
    ("offset_rank", r"'offset' has shape \[5\]; expected a rank-4 tensor"),
    ("offset_groups_divide", r"'offset' implies offset_groups=3; expected a divisor of the input's 4 channels"),
    ("empty_output", r"'input' of spatial size 2x2 gives an empty output \(0x0\)"),
    ("empty_width", r"'input' of spatial size 5x2 gives an empty output \(3x0\)"),
])
def test_bad_shapes(change: str, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        _run(_bad_case(change))


def test_module_checks_attributes_at_construction() -> None:
    with pytest.raises(InvalidAttributeError, match="stride"):
        DeformConv2d(4, 4, 3, stride=0)
    with pytest.raises(InvalidAttributeError, match="divisible by groups=3"):
        DeformConv2d(4, 6, 3, groups=3)
