"""The walk-through of docs/custom-op.md, done for real: TestScaleBias, a kernel-backed op made of new files only (this
folder) plus one registration line each side, goes through eager, both exporters, the decomposition, the Python plugin
and the C++ plugin; no file of the library changes.

The C++ side builds a plugin library from csrc/plugins with a copy of creator_table.h that has the op's include and
its one table line (marker trt_headers), and drives it as TensorRT does with the test doubles of tests/plugins. The
Python plugin runs on the real tensorrt.plugin package (tests/plugins/real_trtp.py, on TensorRT-RTX's bindings).
Running the kernel needs a GPU (marker gpu); everything else runs here.
"""
from __future__ import annotations

import difflib
import subprocess
from pathlib import Path
from typing import Any

import onnx
import pytest
import torch

import torchtrt_ext
from tests.custom_op.scale_bias import SCALE_BIAS, SPEC, use_kernel_library
from tests.helpers import node_attrs, rel_err, run_onnx, single_custom_node
from tests.plugins import real_trtp
from tests.plugins._plugin_harness import PLUGIN_SOURCES, ROOT, compiler, cuda_home, cuda_lib_dir, run_harness
from torchtrt_ext import _native
from torchtrt_ext.backend import python_plugins
from torchtrt_ext.errors import LibraryNotFoundError
from torchtrt_ext.ops import Buffer

HERE = Path(__file__).resolve().parent
TABLE = ROOT / "csrc" / "plugins" / "creator_table.h"
INCLUDE_LINE = '#include "custom_op/scale_bias_plugin.h"'
TABLE_LINE = "    , ScaleBiasPluginCreator"


class UsesIt(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return SCALE_BIAS(x.relu(), scale=2.5, bias=-1.0) * 3


def test_eager_and_autograd() -> None:
    x = torch.randn(4, 5, requires_grad=True)
    y = SCALE_BIAS(x, scale=2.5, bias=-1.0)
    assert torch.equal(y, x * 2.5 - 1.0)
    y.sum().backward()
    assert torch.allclose(x.grad, torch.full_like(x, 2.5))


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
def test_both_exporters_and_the_decomposition(exporter: str) -> None:
    model = torchtrt_ext.export_onnx(UsesIt().eval(), (torch.randn(2, 5),), exporter=exporter)
    node = single_custom_node(model)
    assert node.op_type == "TestScaleBias"
    assert node_attrs(node) == {"scale": 2.5, "bias": -1.0, "plugin_version": b"1", "plugin_namespace": b"torchtrt_ext"}
    portable = torchtrt_ext.passes.decompose_custom_ops(model)
    x = torch.randn(6, 5)
    (got,) = run_onnx(portable, {onnx_input(portable): x})
    assert rel_err(got, UsesIt()(x)) < 1e-6


def onnx_input(model: onnx.ModelProto) -> str:
    return model.graph.input[0].name


ID = "torchtrt_ext::TestScaleBias"


@pytest.fixture
def trt_and_trtp(monkeypatch: pytest.MonkeyPatch) -> Any:
    python_plugins._dtype_maps.cache_clear()
    trt, trtp = real_trtp.install(monkeypatch)
    yield trt, trtp
    real_trtp.deregister(trt, trtp)
    python_plugins._dtype_maps.cache_clear()


def test_the_python_plugin_comes_from_the_definition(trt_and_trtp: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real tensorrt.plugin: registration, signature, output types and shapes, and the float32-only formats."""
    trt, trtp = trt_and_trtp
    assert ID in python_plugins.register_python_plugins()
    definition = trtp._lib.QDP_REGISTRY[ID]
    assert definition.input_tensor_names == ["x"] and list(definition.input_attrs) == ["scale", "bias"]
    assert [(f.name, f.type) for f in trtp._lib.QDP_CREATORS[ID].field_names] == [
        ("scale", trt.PluginFieldType.FLOAT64), ("bias", trt.PluginFieldType.FLOAT64)]  # as a float annotation gives
    plugin = real_trtp.create_plugin(trt, trtp, ID, {"scale": 2.5, "bias": -1.0})
    assert plugin.get_output_data_types([trt.DataType.FLOAT], [2]) == [trt.DataType.FLOAT]
    (dims,) = real_trtp.output_shapes(trt, plugin, [("N", 5)], monkeypatch)
    assert [str(d) for d in dims] == ["N", "5"]
    combos = plugin.get_supported_format_combinations([real_trtp.tensor_desc(trt, (2, 5), trt.DataType.FLOAT)] * 2, 1)
    assert [(c.type, c.format) for c in combos] == [(trt.DataType.FLOAT, trt.TensorFormat.LINEAR)] * 2


def test_without_its_kernel_library_the_launcher_names_the_remedy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tests.custom_op.scale_bias._KERNELS", [])
    with pytest.raises(LibraryNotFoundError, match="use_kernel_library"):
        buffer = Buffer(0, (2,), torch.float32)  # never touched: the library lookup fails first
        SPEC.launch([buffer], [buffer], 0, scale=1.0, bias=0.0)


# ------------------------------------------------------------------------------------------------ the kernel (GPU)
@pytest.fixture(scope="module")
def kernel_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scale_bias") / "libtest_scale_bias.so"
    subprocess.run([str(cuda_home() / "bin" / "nvcc"), "-shared", "-std=c++17", "-Xcompiler", "-fPIC", "-I",
                    str(ROOT / "tests"), str(HERE / "scale_bias.cu"), "-o", str(out)], check=True)
    use_kernel_library(out)
    return out


@pytest.mark.gpu
def test_eager_cuda_and_the_python_plugin_run_the_kernel(kernel_library: Path, trt_and_trtp: Any) -> None:
    trt, trtp = trt_and_trtp
    x = torch.randn(3, 1000, device="cuda")
    torch.testing.assert_close(SCALE_BIAS(x, scale=2.5, bias=-1.0), x * 2.5 - 1.0)
    python_plugins.register_python_plugins()
    plugin = real_trtp.create_plugin(trt, trtp, ID, {"scale": 2.5, "bias": -1.0})
    plugin.get_output_data_types([trt.DataType.FLOAT], [2])
    y = torch.full_like(x, float("nan"))
    stream = torch.cuda.Stream()
    real_trtp.enqueue(trt, plugin, [(tuple(x.shape), trt.DataType.FLOAT, x.data_ptr())],
                      [(tuple(y.shape), trt.DataType.FLOAT, y.data_ptr())], stream.cuda_stream)
    stream.synchronize()
    torch.testing.assert_close(y, x * 2.5 - 1.0)


# ---------------------------------------------------------------------------------------------- the C++ plugin
def table_with_the_op() -> str:
    """creator_table.h with the op's include and its one table line, the two lines docs/custom-op.md says to add."""
    lines = TABLE.read_text().splitlines()
    lines.insert(lines.index('#include "plugins/l2norm/l2norm_plugin.h"') + 1, INCLUDE_LINE)
    lines.insert(lines.index("    >;"), TABLE_LINE)
    return "\n".join(lines) + "\n"


def test_adding_the_op_to_the_table_adds_two_lines_and_changes_none() -> None:
    diff = [d for d in difflib.ndiff(TABLE.read_text().splitlines(), table_with_the_op().splitlines())
            if d[:1] in "+-"]
    assert diff == [f"+ {INCLUDE_LINE}", f"+ {TABLE_LINE}"]


@pytest.fixture(scope="module")
def plugin_library(tmp_path_factory: pytest.TempPathFactory, trt_include: Path) -> tuple[Path, Path]:
    """(library, include folder of the extended table): csrc/plugins plus the op, linked against the library's
    kernels (libtorchtrt_ext_kernels.so) and the op's own."""
    try:
        kernels = _native.kernels_library_path()
    except LibraryNotFoundError as exc:
        pytest.fail(f"TensorRT headers are present but the kernels library is not built: {exc}")
    out = tmp_path_factory.mktemp("scale_bias_plugins")
    include = out / "include"
    (include / "plugins").mkdir(parents=True)
    (include / "plugins" / "creator_table.h").write_text(table_with_the_op())
    home = cuda_home()
    flags = ["-std=c++17", "-O0", "-fPIC", "-fvisibility=hidden", "-I", str(include), "-I", str(ROOT / "csrc"),
             "-I", str(ROOT / "tests"), "-isystem", str(trt_include), "-isystem", str(home / "include")]
    objects = []
    sources = [s for s in PLUGIN_SOURCES if "autoload" not in s.parts] + [HERE / "scale_bias_plugin.cpp"]
    for source in sources:
        objects.append(out / f"{source.stem}.o")
        subprocess.run([compiler(), *flags, "-c", str(source), "-o", str(objects[-1])], check=True)
    objects.append(out / "scale_bias_kernel.o")
    subprocess.run([str(home / "bin" / "nvcc"), "-c", "-std=c++17", "-Xcompiler", "-fPIC", "-I", str(ROOT / "tests"),
                    str(HERE / "scale_bias.cu"), "-o", str(objects[-1])], check=True)
    library = out / "libtest_plugins.so"
    libdir = cuda_lib_dir(home)
    subprocess.run([compiler(), "-shared", *map(str, objects), "-o", str(library), f"-L{kernels.parent}",
                    f"-l:{kernels.name}", f"-Wl,-rpath,{kernels.parent}", f"-L{libdir}", "-lcudart",
                    f"-Wl,-rpath,{libdir}"], check=True)
    return library, include


@pytest.mark.trt_headers
def test_the_cpp_plugin_is_listed_and_behaves(plugin_library: tuple[Path, Path], trt_include: Path,
                                              tmp_path: Path) -> None:
    library, include = plugin_library
    home = cuda_home()
    check = tmp_path / "check_scale_bias"
    subprocess.run([compiler(), "-std=c++17", "-O0", "-Wall", "-Wextra", "-I", str(include), "-I", str(ROOT / "csrc"),
                    "-I", str(ROOT / "tests"), "-I", str(ROOT / "tests" / "plugins"), "-isystem", str(trt_include),
                    "-isystem", str(home / "include"), str(HERE / "check_scale_bias.cpp"), "-o", str(check), "-ldl",
                    f"-L{cuda_lib_dir(home)}", "-lcudart", f"-Wl,-rpath,{cuda_lib_dir(home)}"], check=True)
    run = run_harness(check, library, "cpu")
    assert run.returncode == 0 and not run.lines("FAIL"), run.output
    assert run.summary() == ("cpu", 9, 0), run.output
