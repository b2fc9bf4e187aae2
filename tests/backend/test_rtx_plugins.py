"""TensorRT-RTX's real builder builds engines that contain our C++ plugins, on a CPU-only machine (running them needs
an RTX GPU, which CI does not have).

Data-driven over the plugin library: every creator it registers in namespace torchtrt_ext needs a ``PluginCase`` here
(``test_every_creator_of_the_library_has_a_case`` fails for a new op until it gets one). Each case is built for every
dtype its OpSpec declares (tests/plugins' harness checks the C++ supportsFormatCombination against that same list),
with dynamic dims over two profiles, with and without the library embedded, and must fail, quoting our plugin's own
log line, for each rejected variant. They need the plugin library, not the headers: an installed wheel carries the
library without any header (scripts/test_wheel.sh runs them so). Where the library is missing they fail if the
TensorRT headers are present (it should have been built) and skip with the reason otherwise; the ``rtx`` fixture skips
where tensorrt_rtx is not installed.
"""
from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import onnx
import pytest
import torch
from onnx import TensorProto, helper

import torchtrt_ext
from tests.conftest import trt_include_dir
from tests.plugins._plugin_harness import built_library
from torchtrt_ext.backend import build_engine, load_backend
from torchtrt_ext.errors import BuildError, LibraryNotFoundError
from torchtrt_ext.ops import DOMAIN, get_op
from torchtrt_ext.ops.spec import onnx_elem_type
from torchtrt_ext.doctor import report

Shape = list[Any]  # ints, or strings naming dynamic dims
Profile = dict[str, tuple[tuple[int, ...], ...]]


@dataclasses.dataclass(frozen=True)
class Rejected:
    """A variant of a case the plugin must refuse, and the regex its log line must match in the BuildError."""

    name: str
    message: str
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)
    inputs: dict[str, Shape] = dataclasses.field(default_factory=dict)
    dtype: torch.dtype | None = None


@dataclasses.dataclass(frozen=True)
class PluginCase:
    """One op: a node whose graph inputs have dynamic dims, two profiles over them, and variants that must fail."""

    inputs: dict[str, Shape]  # per op input; an absent optional input is left out
    attrs: dict[str, Any]
    profiles: tuple[Profile, Profile]
    rejected: tuple[Rejected, ...]
    int_outputs: tuple[str, ...] = ()  # outputs typed int32 whatever the input dtype


def _dcn_profile(batch: tuple[int, int, int], side: tuple[int, int, int]) -> Profile:
    return {name: tuple((n, c, s, s) for n, s in zip(batch, side)) for name, c in (("input", 4), ("offset", 18),
                                                                                   ("mask", 9))}


CASES: dict[str, PluginCase] = {
    "L2Norm": PluginCase(
        inputs={"x": ["N", 4, "W"]},
        attrs={"axis": 1, "eps": 1e-6},
        profiles=({"x": ((1, 4, 8), (2, 4, 8), (4, 4, 16))}, {"x": ((5, 4, 32), (8, 4, 32), (16, 4, 64))}),
        rejected=(Rejected("field", r"\[torchtrt_ext\] L2Norm::createPlugin: field 'eps' is -1, expected a finite "
                                    r"value > 0", attrs={"eps": -1.0}),
                  Rejected("shape", r"\[torchtrt_ext\] L2Norm::getOutputShapes: axis 5 is out of range for an input "
                                    r"of rank 3", attrs={"axis": 5}),
                  Rejected("dtype", r"\[torchtrt_ext\] L2Norm::getOutputDataTypes: the input has type kINT32",
                           dtype=torch.int32)),
    ),
    "DeformConv2d": PluginCase(
        inputs={"input": ["N", 4, "H", "W"], "offset": ["N", 18, "H", "W"], "weight": [6, 4, 3, 3], "bias": [6],
                "mask": ["N", 9, "H", "W"]},
        attrs={"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1, "offset_groups": 1},
        profiles=(_dcn_profile((1, 2, 2), (8, 8, 16)), _dcn_profile((3, 4, 4), (24, 32, 32))),
        rejected=(Rejected("field", r"\[torchtrt_ext\] DeformConv2d::createPlugin: field 'stride'",
                           attrs={"stride": (0, 1)}),
                  Rejected("shape", r"\[torchtrt_ext\] DeformConv2d::configurePlugin: weight has shape \[6, 5, 3, 3\]",
                           inputs={"weight": [6, 5, 3, 3]})),
    ),
    "EfficientNMS_TRT": PluginCase(  # bound to TensorRT's plugin; on RTX our fallback creator (namespace torchtrt_ext)
        inputs={"boxes": ["N", "A", 4], "scores": ["N", "A", 3]},
        attrs={"max_output_boxes": 5},
        profiles=({"boxes": ((1, 8, 4), (2, 8, 4), (4, 16, 4)), "scores": ((1, 8, 3), (2, 8, 3), (4, 16, 3))},
                  {"boxes": ((5, 32, 4), (8, 32, 4), (8, 64, 4)), "scores": ((5, 32, 3), (8, 32, 3), (8, 64, 3))}),
        rejected=(Rejected("field", r"\[torchtrt_ext\] EfficientNMS_TRT::createPlugin: field 'iou_threshold'",
                           attrs={"iou_threshold": 2.0}),),
        int_outputs=("num_detections", "detection_classes"),
    ),
}
DTYPE_CASES = [(op, dtype) for op in sorted(CASES) for dtype in get_op(op).spec.dtypes]
REJECTED_CASES = [(op, r) for op in sorted(CASES) for r in CASES[op].rejected]


def case_graph(op: str, dtype: torch.dtype = torch.float32, rejected: Rejected | None = None,
               our_namespace: bool = False) -> onnx.ModelProto:
    """A one-node graph of ``op``: typed graph inputs (dynamic dims named), the node as docs/design.md#onnx-contract
    writes it.
    ``our_namespace``: name our creator's namespace in the node, as the build does for an op bound to TensorRT's plugin
    that our fallback serves (for parsing the graph directly, without the build's plan)."""
    case, spec = CASES[op], get_op(op).spec
    shapes = {**case.inputs, **(rejected.inputs if rejected else {})}
    attrs = {**spec.validate_attrs(case.attrs), **(rejected.attrs if rejected else {})}
    elem = onnx_elem_type(rejected.dtype if rejected and rejected.dtype else dtype)
    inputs = [n if n in shapes else "" for n in spec.inputs]
    while inputs and not inputs[-1]:
        inputs.pop()
    node_attrs = spec.node_attributes(attrs)
    if our_namespace:
        node_attrs["plugin_namespace"] = DOMAIN
    node = helper.make_node(spec.name, inputs, list(spec.outputs), name=f"{op}_0", domain=DOMAIN, **node_attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(n, elem, s) for n, s in shapes.items()],
                              [helper.make_tensor_value_info(n, TensorProto.INT32 if n in case.int_outputs else elem,
                                                             None) for n in spec.outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])


def spec_outputs(op: str) -> tuple[str, ...]:
    """The op's output names, in order."""
    return tuple(get_op(op).spec.outputs)


@pytest.fixture(scope="module")
def library(rtx: str) -> Path:
    try:
        return torchtrt_ext._native.plugin_library_path()
    except LibraryNotFoundError as exc:
        if trt_include_dir()[0] is None:
            pytest.skip(f"the C++ plugin library is not built here and no TensorRT headers exist to build it: {exc}")
    return built_library(torchtrt_ext._native.plugin_library_path, "plugin library")  # fails: it should be built


def plugin_layers(rtx: str, model: onnx.ModelProto) -> list[tuple[str, str, str, str, str]]:
    """(layer name, plugin name, namespace, version, output dtype) of each PLUGIN_V3 layer TensorRT-RTX's own parser
    makes of ``model``, with the plugin library loaded."""
    trt = load_backend(rtx).trt
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)  # kept alive while its network is in use
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    assert parser.parse(model.SerializeToString()), [parser.get_error(i).desc() for i in range(parser.num_errors)]
    found = []
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        if layer.type != trt.LayerType.PLUGIN_V3:
            continue
        layer.__class__ = trt.IPluginV3Layer  # the bindings hand out the base class
        core = layer.plugin.get_capability_interface(trt.PluginCapabilityType.CORE)
        found.append((layer.name, core.plugin_name, core.plugin_namespace, core.plugin_version,
                      layer.get_output(0).dtype.name))
    return found


def test_every_creator_of_the_library_has_a_case(rtx: str, library: Path) -> None:
    api = load_backend(rtx)
    api.load_plugin_library(str(library))
    creators = {(c.name, c.plugin_version, type(c).__name__) for c in api.trt.get_plugin_registry().all_creators
                if c.plugin_namespace == DOMAIN}
    assert {name for name, _, _ in creators} == set(CASES), "add a PluginCase for every op of the plugin library"
    assert {(kind, get_op(name).spec.version) for name, version, kind in creators} == {
        ("IPluginCreatorV3One", version) for _, version, _ in creators}


@pytest.mark.parametrize(("op", "dtype"), DTYPE_CASES, ids=[f"{op}-{str(d)[6:]}" for op, d in DTYPE_CASES])
def test_plugin_engine_for_every_declared_dtype_over_two_dynamic_profiles(rtx: str, library: Path, op: str,
                                                                         dtype: torch.dtype) -> None:
    model = case_graph(op, dtype)
    engine = build_engine(model, backend=rtx, plugins="cpp", profiles=list(CASES[op].profiles), progress=False)
    meta = engine.metadata
    assert meta.plugin_mode == "cpp" and meta.plugins == (f"{DOMAIN}::{op}:1",) and not meta.plugins_embedded
    assert meta.target.plugin_library_sha256 is not None and len(meta.profiles) == 2
    first = next(iter(CASES[op].inputs))
    assert [p[first].max for p in meta.profiles] == [p[first][2] for p in CASES[op].profiles]
    assert {t.dtype for t in meta.inputs + meta.outputs if t.name not in CASES[op].int_outputs} == {str(dtype)[6:]}
    trt_dtype = load_backend(rtx).trt.DataType
    expected_out = {torch.float32: trt_dtype.FLOAT, torch.float16: trt_dtype.HALF, torch.bfloat16: trt_dtype.BF16}
    first_out = trt_dtype.INT32 if spec_outputs(op)[0] in CASES[op].int_outputs else expected_out[dtype]
    layers = plugin_layers(rtx, case_graph(op, dtype, our_namespace=True))
    assert layers == [(f"{op}_0", op, DOMAIN, "1", first_out.name)]
    assert library.read_bytes() not in engine.plan  # the plan refers to the plugin; the library stays outside


@pytest.mark.parametrize("op", sorted(CASES))
def test_plugin_engine_with_the_library_embedded(rtx: str, library: Path, op: str) -> None:
    engine = build_engine(case_graph(op), backend=rtx, plugins="cpp", embed_plugins=True,
                          profiles=list(CASES[op].profiles), progress=False)
    assert engine.metadata.plugins_embedded and engine.metadata.plugin_mode == "cpp"
    assert library.read_bytes() in engine.plan  # plugins_to_serialize, without VERSION_COMPATIBLE on RTX


@pytest.mark.parametrize(("op", "rejected"), REJECTED_CASES, ids=[f"{op}-{r.name}" for op, r in REJECTED_CASES])
def test_a_rejected_node_fails_quoting_our_plugin(rtx: str, library: Path, op: str, rejected: Rejected) -> None:
    with pytest.raises(BuildError, match=rejected.message):
        build_engine(case_graph(op, rejected=rejected), backend=rtx, plugins="cpp",
                     profiles=list(CASES[op].profiles), progress=False)


class BothOps(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.offset = torch.nn.Conv2d(4, 18, 3, padding=1)
        self.dcn = torchtrt_ext.nn.DeformConv2d(4, 6, 3, padding=1)
        self.norm = torchtrt_ext.nn.L2Norm(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.dcn(x, self.offset(x)))


@pytest.mark.parametrize("embed", [False, True])
def test_exported_model_with_both_ops_builds_with_plugins_auto(rtx: str, library: Path, embed: bool,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    torch.manual_seed(0)
    model = torchtrt_ext.export_onnx(BothOps().eval(), (torch.randn(2, 4, 8, 8),))
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        engine = build_engine(model, backend=rtx, plugins="auto", embed_plugins=embed, max_batch=4, progress=False)
    assert "plugins='auto': using the C++ plugin library" in caplog.text
    meta = engine.metadata
    assert meta.plugin_mode == "cpp" and meta.plugins_embedded == embed
    assert meta.plugins == (f"{DOMAIN}::DeformConv2d:1", f"{DOMAIN}::L2Norm:1")
    assert (library.read_bytes() in engine.plan) == embed


def test_doctor_parses_the_real_graph_with_our_plugins(rtx: str, library: Path) -> None:
    good = report(case_graph("L2Norm"), backend=rtx, checker="parser")
    assert good.ok and "with the C++ plugin library loaded" in good.checked_with
    assert [(f.node, f.status) for f in good.findings] == [("L2Norm_0", "plugin available")]
    bad = report(case_graph("L2Norm", rejected=CASES["L2Norm"].rejected[0]), backend=rtx, checker="parser")
    assert [(f.node, f.status, f.problem) for f in bad.problems] == [("L2Norm_0", "plugin rejected", True)]
    assert "Could not create the plugin" in bad.problems[0].detail


def _python(*snippets: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter running the snippets (each dedented) one after the other, from the checkout's root."""
    code = "\n".join(textwrap.dedent(snippet) for snippet in snippets)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])


PARSE_L2NORM = """
    from tests.backend.test_rtx_plugins import case_graph
    trt = tensorrt_rtx
    logger = trt.Logger(trt.Logger.ERROR)
    trt.get_plugin_registry().load_library({library!r})
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    print("parsed", parser.parse(case_graph("L2Norm").SerializeToString()), flush=True)
"""


def test_without_the_alias_rtx_parser_ends_the_process(rtx: str, library: Path) -> None:
    """The root cause, shown on the real parser: our library loaded straight into the registry, no alias."""
    result = _python("import tensorrt_rtx", PARSE_L2NORM.format(library=str(library)))
    assert result.returncode < 0 and "parsed" not in result.stdout, result.stdout + result.stderr
    assert "terminate called" in result.stderr


def test_alias_makes_the_linker_name_resolve_to_the_loaded_library_in_a_fresh_process(rtx: str,
                                                                                      library: Path) -> None:
    result = _python("""
        import logging, os, sys
        logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
        import tensorrt_rtx, tensorrt_rtx_libs
        from torchtrt_ext.backend import load_backend
        wheel = os.path.dirname(os.path.realpath(tensorrt_rtx_libs.__file__))
        before = sorted(os.listdir(wheel))
        load_backend("tensorrt_rtx").load_plugin_library({library!r})
        """.format(library=str(library)), PARSE_L2NORM.format(library=str(library)), """
        maps = {line.split()[-1] for line in open("/proc/self/maps") if "libtensorrt_rtx.so" in line}
        print("one copy", maps == {os.path.join(wheel, "libtensorrt_rtx.so.1")})
        print("wheel unchanged", sorted(os.listdir(wheel)) == before)
    """)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "parsed True" in result.stdout
    assert "TensorRT-RTX: libtensorrt_rtx.so now resolves to the loaded" in result.stdout  # the log line
    assert "one copy True" in result.stdout  # the wheel's library only, mapped once: no second instance
    assert "wheel unchanged True" in result.stdout  # nothing written into site-packages


def test_alias_before_tensorrt_rtx_is_imported_says_what_to_do(rtx: str, library: Path) -> None:
    result = _python("""
        from torchtrt_ext.backend.rtx_alias import ensure_rtx_linker_name
        ensure_rtx_linker_name()
    """)
    assert result.returncode == 1
    assert ("BuildError: libtensorrt_rtx.so.1 is not loaded in this process. Expected: the TensorRT-RTX library "
            "imported by the tensorrt_rtx package. Remedy: import tensorrt_rtx first") in result.stderr


def test_a_rejected_node_is_quoted_while_a_runtime_is_alive(rtx: str, library: Path, conv_onnx: onnx.ModelProto
                                                            ) -> None:
    """TensorRT logs through the logger of the first builder or runtime still alive (a later one is ignored, with a
    warning) and our plugin logs through TensorRT's: with a TRTModule's runtime held, a failing build must still quote
    TensorRT's messages, our plugin's among them (real TensorRT-RTX runtime and builder)."""
    from torchtrt_ext.runtime import create_runtime

    engine = build_engine(conv_onnx, backend=rtx, progress=False)
    runtime = create_runtime(load_backend(rtx), engine.metadata, allow_engine_host_code=False, source="test")
    rejected = CASES["L2Norm"].rejected[1]
    with pytest.raises(BuildError, match=rejected.message):
        build_engine(case_graph("L2Norm", rejected=rejected), backend=rtx, plugins="cpp",
                     profiles=list(CASES["L2Norm"].profiles), progress=False)
    del runtime
