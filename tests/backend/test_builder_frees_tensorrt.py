"""A failed build leaves no TensorRT builder alive in its exception's traceback (found while testing issue 20): when
a later garbage collection freed one from inside another build's Python callback, TensorRT-RTX deadlocked."""
from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from torchtrt_ext.backend import build_engine
from torchtrt_ext.backend.adapter import load_backend
from torchtrt_ext.errors import BuildError


def test_failed_parse_leaves_no_builder_in_the_traceback(rtx: str) -> None:
    graph = helper.make_graph([helper.make_node("Unique", ["x"], ["u"], name="unique")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
                              [helper.make_tensor_value_info("u", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(BuildError, match="could not parse") as info:
        build_engine(model, backend=rtx, progress=False)
    trt = load_backend(rtx).trt
    kinds = (trt.Builder, trt.INetworkDefinition, trt.OnnxParser)
    tb, alive = info.value.__traceback__, []
    while tb is not None:
        alive += [name for name, value in tb.tb_frame.f_locals.items() if isinstance(value, kinds)]
        tb = tb.tb_next
    assert alive == []
