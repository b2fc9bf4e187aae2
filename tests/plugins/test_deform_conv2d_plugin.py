"""The DeformConv2d IPluginV3 in libtorchtrt_ext_plugins.so, driven the way TensorRT drives it, without TensorRT.

tests/plugins/harness_deform_conv2d.cpp is compiled here against the TensorRT headers and dlopens the library:
getCreators (L2Norm and DeformConv2d) -> createPlugin from fields (defaults, ONNX-style extra fields, unknown fields)
-> getOutputDataTypes -> getOutputShapes (static shapes, and dynamic N/H/W whose symbolic H_out/W_out the test
IExprBuilder evaluates against the formula) -> the supportsFormatCombination matrix for 3, 4 and 5 inputs ->
configurePlugin/onShapeChange channel checks -> getWorkspaceSize -> serialization round trip -> clone and context
independence -> bad fields -> registration. On a GPU: enqueue for float32/float16/bfloat16 with and without bias and
mask, stride 2, dilation 2, groups 2, offset groups 2, offsets far outside the image, against a float64 CPU reference
in the harness, and here against torchtrt_ext's PyTorch implementation. Marker trt_headers (+ gpu for enqueue).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers import rel_err
from tests.plugins._plugin_harness import (HERE, asan_harness, built_library, check_conformance_cpu, check_fields_match,
                                           compile_harness, run_harness)
from torchtrt_ext._native import plugin_library_path
from torchtrt_ext.ops.deform_conv2d import SPEC, columns_to_output, sample_columns

pytestmark = pytest.mark.trt_headers

SOURCE = HERE / "harness_deform_conv2d.cpp"
# Python attribute kind (OpSpec) -> (PluginFieldType, length) the C++ creator reads and writes; "ints" are (h, w) pairs.
FIELD_OF_KIND = {"int": ("kINT32", 1), "ints": ("kINT32", 2)}
TOLERANCE = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}
TORCH_DTYPE = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(plugin_library_path, "plugin library")


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, trt_include: Path) -> Path:
    """The harness under AddressSanitizer/UBSan (for the CPU checks), where the compiler supports them."""
    return asan_harness(tmp_path_factory, trt_include, "harness_dcn", source=SOURCE)


def test_conformance_cpu(harness: Path, library: Path) -> None:
    check_conformance_cpu(harness, library, min_checks=120)


def test_cpp_fields_match_op_definition(harness: Path, library: Path) -> None:
    """The creator's name/version/namespace and field list (advertised and serialized) follow the op definition."""
    check_fields_match(harness, library, SPEC,
                       [f"{a.name} {FIELD_OF_KIND[a.kind][0]} {FIELD_OF_KIND[a.kind][1]}" for a in SPEC.attrs])


def _pair(text: str) -> tuple[int, int]:
    a, b = text.split(",")
    return int(a), int(b)


@pytest.mark.gpu
def test_conformance_gpu_enqueue(tmp_path: Path, trt_include: Path, library: Path) -> None:
    """enqueue on real buffers: the harness checks a float64 CPU reference; here the same data against the PyTorch
    implementation of torchtrt_ext.ops.deform_conv2d (sample_columns + columns_to_output in float64)."""
    binary = compile_harness(tmp_path / "harness_dcn", trt_include, sanitize=False, source=SOURCE)  # ASan vs CUDA
    dump = tmp_path / "dump"
    dump.mkdir()
    run = run_harness(binary, library, "gpu", "--dump", str(dump))
    print(run.output)
    assert run.returncode == 0 and not run.lines("FAIL"), run.output
    summary = run.summary()
    assert summary is not None and summary[0] == "gpu" and summary[2] == 0, run.output

    checked = {name: 0 for name in TOLERANCE}
    for line in filter(None, (dump / "cases.txt").read_text().split("\n")):
        index, dtype_name, nb, x_shape, w_shape, stride, padding, dilation, groups, og = line.split()
        xs = tuple(int(d) for d in x_shape.split("x"))
        ws = tuple(int(d) for d in w_shape.split("x"))
        stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
        ho = (xs[2] + 2 * padding[0] - dilation[0] * (ws[2] - 1) - 1) // stride[0] + 1
        wo = (xs[3] + 2 * padding[1] - dilation[1] * (ws[3] - 1) - 1) // stride[1] + 1
        taps = ws[2] * ws[3]
        shapes = {"input": xs, "offset": (xs[0], 2 * int(og) * taps, ho, wo), "weight": ws, "bias": (ws[0],),
                  "mask": (xs[0], int(og) * taps, ho, wo)}
        names = list(shapes)[:int(nb)]
        t = {name: torch.from_numpy(np.fromfile(dump / f"case{index}_{name}.f32", dtype=np.float32)
                                    .reshape(shapes[name])).double() for name in names}
        y = torch.from_numpy(np.fromfile(dump / f"case{index}_y.f32", dtype=np.float32).reshape(xs[0], ws[0], ho, wo))
        cols = sample_columns(t["input"], t["offset"], t.get("mask"), (ws[2], ws[3]), stride, padding, dilation,
                              int(og))
        expected = columns_to_output(cols, t["weight"], t.get("bias"), int(groups), (ho, wo))
        err = rel_err(y, expected)
        assert err < TOLERANCE[dtype_name], f"case {line}: relative error {err:.3g} vs the PyTorch implementation"
        checked[dtype_name] += 1
    assert all(n >= 10 for n in checked.values()), checked  # 8 cases NCHW + 2 channels-last per type
