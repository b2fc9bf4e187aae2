"""One file for every runtime, on TensorRT-RTX's real ONNX parser and builder: a model with two nodes of an op (different
attributes and shapes) and the op's ONNX function parses as one PLUGIN_V3 layer per node with our library loaded, and
as the function's standard layers without it (a fresh process: the plugin registry is process-wide), and both build.
EfficientNMS's body parses (an NMS layer) but TensorRT-RTX cannot build NMS: it needs the plugin there.
Our builder decides per op whatever the parser would prefer: plugins='decompose' inlines the function even with the
library loaded."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.backend.test_rtx_plugins import _python, library, plugin_layers  # noqa: F401  (library: a fixture)
from tests.ops.test_function import TWO_CALLS, two_node_model
from torchtrt_ext.backend import build_engine
from torchtrt_ext.ops import DOMAIN, get_op

OPS = sorted(TWO_CALLS)


def _model(op: str, our_namespace: bool = False, dtype: torch.dtype = torch.float32):  # type: ignore[no-untyped-def]
    """The two-node model of ``op`` in ``dtype``; ``our_namespace``: the node names our creator's namespace, as the
    build does for EfficientNMS_TRT on TensorRT-RTX (our fallback plugin), for parsing the graph directly."""
    model = two_node_model(op, TWO_CALLS[op], dtype)
    for node in model.graph.node:
        for attribute in node.attribute:
            if our_namespace and attribute.name == "plugin_namespace":
                attribute.s = DOMAIN.encode()
    return model


@pytest.mark.parametrize("op", OPS)
def test_with_our_library_each_node_is_a_plugin_layer_and_the_engine_builds(rtx: str, library: Path, op: str) -> None:
    build_engine(_model(op), backend=rtx, plugins="cpp", progress=False)  # loads the library; strips the function
    for dtype in get_op(op).spec.dtypes:  # the parser alone, the function in the file
        layers = plugin_layers(rtx, _model(op, our_namespace=True, dtype=dtype))
        assert [(name, plugin) for name, plugin, *_ in layers] == [(f"{op}_0", op), (f"{op}_1", op)], dtype


@pytest.mark.parametrize("op", ["DeformConv2d", "L2Norm"])
def test_decompose_inlines_the_function_even_with_our_library_loaded(rtx: str, library: Path, op: str) -> None:
    engine = build_engine(_model(op), backend=rtx, plugins="decompose", progress=False)
    assert engine.metadata.plugins == () and engine.metadata.plugin_mode == "decompose"


PARSE_WITHOUT_LIBRARY = """
    import tensorrt_rtx as trt
    from tests.backend.test_rtx_functions import OPS, _model
    from torchtrt_ext.ops import get_op
    for op in OPS:
        for dtype in get_op(op).spec.dtypes:
            logger = trt.Logger(trt.Logger.ERROR)
            builder = trt.Builder(logger)
            network = builder.create_network(0)
            parser = trt.OnnxParser(network, logger)
            parsed = parser.parse(_model(op, dtype=dtype).SerializeToString())
            kinds = {network.get_layer(i).type.name for i in range(network.num_layers)}
            config = builder.create_builder_config()
            built = parsed and builder.build_serialized_network(network, config) is not None
            print(op, str(dtype)[6:], parsed, "PLUGIN_V3" in kinds, "NMS" in kinds, built, flush=True)
"""


def test_without_our_library_the_parser_inlines_the_function_and_builds(rtx: str) -> None:
    result = _python(PARSE_WITHOUT_LIBRARY)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.split(" ", 1)[0] in OPS]
    expected = {"DeformConv2d": "True False False True", "L2Norm": "True False False True",
                "EfficientNMS_TRT": "True False True False"}  # parsed, a plugin layer, an NMS layer, built
    assert lines == [f"{op} {str(d)[6:]} {expected[op]}" for op in OPS for d in get_op(op).spec.dtypes]
