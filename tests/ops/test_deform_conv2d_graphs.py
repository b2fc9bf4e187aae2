"""DeformConv2d's decomposition on hand-built nodes (no exporter, so it runs in a second): every attribute, the
optional inputs in each combination (bias absent, bias as an empty name before the mask), float16 inputs, and
spatial sizes other than the ones the graph declares, computed on onnxruntime against the eager op."""
from __future__ import annotations

import onnx
import pytest
import torch
from onnx import TensorProto as T
from onnx import helper

from tests.helpers import rel_err, run_onnx
from tests.ops.test_deform_conv2d import CASES, _case, _run
from torchtrt_ext.ops.deform_conv2d import SPEC, torch_deform_conv2d
from torchtrt_ext.passes import decompose_custom_ops

NAMES = ("x", "offset", "weight", "bias", "mask")


def _graph(case: dict, *, empty_bias: bool = False, elem: int = T.FLOAT) -> onnx.ModelProto:
    """One DeformConv2d node on graph inputs of symbolic shape; offset_groups from offset's channels, as the op
    derives it. ``empty_bias``: no bias, written as the empty name in front of the mask (how an exporter skips it)."""
    kh, kw = case["weight"].shape[2:]
    offset_groups = case["offset"].shape[1] // (2 * kh * kw)
    present = [name for name in NAMES if case[name] is not None]
    inputs = [name if case[name] is not None else "" for name in NAMES]
    if case["mask"] is None:
        inputs = inputs[:4] if case["bias"] is not None else inputs[:3]
    assert empty_bias == (inputs[3:4] == [""])
    node = SPEC.make_node(inputs, ["y"], name="dcn", stride=case["stride"], padding=case["padding"],
                          dilation=case["dilation"], groups=case["groups"], offset_groups=offset_groups)
    ranks = {"x": 4, "offset": 4, "weight": 4, "bias": 1, "mask": 4}
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info(n, elem, [f"{n}{i}" for i in range(ranks[n])])
                               for n in present],
                              [helper.make_tensor_value_info("y", elem, ["n", "c", "h", "w"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("torchtrt_ext", 1)])


def _feeds(case: dict, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    return {n: case[n].to(dtype) for n in NAMES if case[n] is not None}


@pytest.mark.parametrize("name", [*CASES, "bias_no_mask"])
def test_the_decomposition_of_a_node_computes_the_op(name: str) -> None:
    case = _case(**CASES.get(name, {"mask": "none"}))
    empty_bias = case["bias"] is None and case["mask"] is not None
    decomposed = decompose_custom_ops(_graph(case, empty_bias=empty_bias))
    assert {n.domain for n in decomposed.graph.node} == {""}
    (got,) = run_onnx(decomposed, _feeds(case))
    ref = _run(case)
    assert got.shape == tuple(ref.shape) and rel_err(got, ref) < 1e-5


def test_the_graph_serves_other_batch_and_spatial_sizes() -> None:
    """Every size is read from the tensors at run time: one graph, several input sizes (also an odd, strided one)."""
    decomposed = decompose_custom_ops(_graph(_case(**CASES["mixed"])))
    for n, h, w in ((1, 5, 6), (3, 9, 4), (2, 2, 11)):
        case = _case(n=n, h=h, w=w, seed=n, **CASES["mixed"])
        (got,) = run_onnx(decomposed, _feeds(case))
        ref = _run(case)
        assert got.shape == tuple(ref.shape) and rel_err(got, ref) < 1e-5, (n, h, w)


def test_float16_inputs_give_a_float16_result_computed_in_float32() -> None:
    case = _case(**CASES["groups2_offset_groups4"])
    decomposed = decompose_custom_ops(_graph(case, elem=T.FLOAT16))
    (got,) = run_onnx(decomposed, _feeds(case, torch.float16))
    assert got.dtype == "float16"
    ref = _run({k: v.half() if isinstance(v, torch.Tensor) else v for k, v in case.items()}).float()
    assert rel_err(torch.from_numpy(got).float(), ref) < 2e-3


@pytest.mark.parametrize("point", [(-1.0, 1.0), (1.0, -1.0), (-1.0, -1.0), (-1.0, 0.5), (-5.0, 1.0), (1.0, 9.0),
                                   (3.0, 1.0)])
def test_a_point_outside_reads_nothing_beside_inf_pixels(point: tuple[float, float]) -> None:
    """torchvision samples the open (-1, H) x (-1, W) and skips each corner outside the image: such a point gives 0,
    also where the pixels it would be clamped to are inf (0 times the clamped pixel was NaN), and so does a point
    exactly on y = -1 or x = -1 (its in-image corners have weight 0): the eager math and the decomposition."""
    x = torch.full((1, 1, 3, 3), float("inf"))
    x[0, 0, 1, 1] = 1.0  # inf all around the one finite pixel
    case = {"x": x, "offset": torch.tensor(point).view(1, 2, 1, 1), "weight": torch.ones(1, 1, 1, 1), "bias": None,
            "mask": None, "stride": (3, 3), "padding": (0, 0), "dilation": (1, 1), "groups": 1}
    eager = torch_deform_conv2d(case["x"], case["offset"], case["weight"], None, None, (3, 3), (0, 0), (1, 1), 1, 1)
    (decomposed,) = run_onnx(decompose_custom_ops(_graph(case)), _feeds(case))
    assert eager.item() == 0.0 and decomposed.item() == 0.0, (eager, decomposed)
