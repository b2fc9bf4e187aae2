"""One naming rule for nested outputs (issue 20, item 2): export, validate, the engine metadata, TRTModule's output
tree and the Triton config all name and order the leaves of ``{"a": (x+1, x*2), "b": {"c": x-1}}`` alike."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

import torchtrt_ext
from tests.cli.models import make_nested
from torchtrt_ext.export import output_names, output_tree
from torchtrt_ext.runtime import build_outputs
from torchtrt_ext.validate import flatten_outputs

EXPECTED = ["a.0", "a.1", "b.c"]


def test_names_follow_the_path_to_each_leaf() -> None:
    t = torch.zeros(1)
    assert output_names(t) == ["output"]
    assert output_names((t, t)) == ["output_0", "output_1"]
    assert output_names({"boxes": t, "scores": t}) == ["boxes", "scores"]
    assert output_names({"a": (t, t), "b": {"c": t}}) == EXPECTED
    assert output_names((t, {"k": t}, [t])) == ["output_0", "output_1.k", "output_2.0"]


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
def test_export_and_validate_name_nested_outputs_alike(exporter: str) -> None:
    ort = pytest.importorskip("onnxruntime")
    model, x = make_nested(), torch.randn(2, 3)
    onnx_model = torchtrt_ext.export_onnx(model, (x,), exporter=exporter)
    assert [o.name for o in onnx_model.graph.output] == EXPECTED
    eager = model(x)
    assert [name for name, _ in flatten_outputs(eager)] == EXPECTED
    session = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"x": x.numpy()})))
    np.testing.assert_allclose(got["a.1"], (x * 2).numpy())  # the output named a.1 holds a[1]
    np.testing.assert_allclose(got["b.c"], (x - 1).numpy())
    rebuilt = build_outputs(output_tree(eager), [torch.from_numpy(got[n]) for n in EXPECTED])
    assert torch.allclose(rebuilt["a"][1], x * 2) and torch.allclose(rebuilt["b"]["c"], x - 1)
    report = torchtrt_ext.validate(model, onnx_model, (x,))
    assert report.passed and [o.name for o in report.outputs] == EXPECTED


@pytest.mark.skipif(importlib.util.find_spec("tensorrt_rtx") is None,
                    reason="tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')")
def test_engine_metadata_and_triton_config_use_the_same_names() -> None:
    from tests.test_deploy import parse_config
    from torchtrt_ext import deploy

    onnx_model = torchtrt_ext.export_onnx(make_nested(), (torch.randn(2, 3),))
    engine = torchtrt_ext.build_engine(onnx_model, backend="tensorrt_rtx", progress=False)
    assert engine.metadata.output_names == EXPECTED
    config = parse_config(deploy.triton_config(engine, "nested", max_batch_size=4))
    assert [o.name for o in config.output] == EXPECTED


def test_colliding_paths_get_unique_names_by_one_rule() -> None:
    """``{"a.b": t, "a": {"b": t}}`` joins to "a.b" twice (issue 33, item 7): a repeated name takes the first free
    "_<n>" suffix, in pytree order."""
    t = torch.zeros(1)
    assert output_names({"a.b": t, "a": {"b": t}}) == ["a.b", "a.b_1"]
    assert output_names({"a.b": t, "a": {"b": t}, "a.b_1": t}) == ["a.b", "a.b_2", "a.b_1"]


class Colliding(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> dict[str, object]:
        return {"a.b": x + 1, "a": {"b": x * 2}}


@pytest.mark.parametrize("exporter", ["auto", "legacy"])
def test_colliding_outputs_export_and_validate_under_the_same_names(exporter: str,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    ort = pytest.importorskip("onnxruntime")
    model, x = Colliding(), torch.randn(2, 3)
    with caplog.at_level("WARNING", logger="torchtrt_ext"):
        onnx_model = torchtrt_ext.export_onnx(model, (x,), exporter=exporter)
    assert "legacy" not in caplog.text  # "auto" exports with dynamo: no fallback
    assert [o.name for o in onnx_model.graph.output] == ["a.b", "a.b_1"]
    session = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"x": x.numpy()})))
    np.testing.assert_allclose(got["a.b_1"], (x * 2).numpy())
    report = torchtrt_ext.validate(model, onnx_model, (x,))
    assert report.passed and [o.name for o in report.outputs] == ["a.b", "a.b_1"]
