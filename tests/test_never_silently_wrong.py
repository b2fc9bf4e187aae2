"""validate with non-finite outputs, the exporter fallback's message, models over protobuf's 2 GiB limit, and the
API's answers to bad input (issue 20, items 3, 4, 12 and 14)."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

import torchtrt_ext
from tests.cli.models import make_branchy
from torchtrt_ext.errors import ExportError, InvalidAttributeError, InvalidInputError


# ------------------------------------------------------------------------ item 3: NaN and inf in both outputs
class WithNonFinite(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        y[0, 0], y[0, 1], y[0, 2] = float("nan"), float("inf"), float("-inf")
        return y


def test_model_with_nan_and_inf_validates_against_itself() -> None:
    model = WithNonFinite()
    report = torchtrt_ext.validate(model, model, (torch.randn(2, 4),))
    assert report.passed, report.to_table()


def test_differing_non_finite_values_still_fail_named() -> None:
    model = WithNonFinite()
    swapped = lambda x: model(x).neg()  # noqa: E731 - inf and -inf trade places; finite values differ too
    report = torchtrt_ext.validate(model, swapped, (torch.randn(2, 4),))
    (out,) = report.outputs
    assert not report.passed and out.name == "output"
    assert "non-finite values differ" in out.reason and "(0, 1)" in out.reason


# ------------------------------------------------------------------------ item 4: why dynamo failed, in one line
def test_auto_fallback_says_what_dynamo_rejected(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        model = torchtrt_ext.export_onnx(make_branchy(), (torch.ones(2, 3),))
    props = {p.key: p.value for p in model.metadata_props}
    assert props["torchtrt_ext.exporter"] == "legacy"
    (record,) = [r for r in caplog.records if r.name == "torchtrt_ext"]
    message = record.getMessage()
    assert "\x1b" not in message and "\n" not in message and "retrying" not in message
    assert "dynamo exporter" in message and "data-dependent" in message.lower()
    assert "legacy TorchScript exporter" in message and "fixed to that branch" in message


def test_both_exporters_failing_say_so_without_retrying() -> None:
    class Bad(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.linalg.eigvals(x).real  # complex intermediate: neither exporter handles it

    with pytest.raises(ExportError) as info:
        torchtrt_ext.export_onnx(Bad(), (torch.randn(2, 2),))
    text = str(info.value)
    assert "dynamo exporter" in text and "legacy exporter" in text and "retrying" not in text
    assert "\x1b" not in text and "Remedy:" in text


# ------------------------------------------------------------------------ item 12: over protobuf's 2 GiB limit
class Wide(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(256, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def test_model_over_the_protobuf_limit_is_saved_with_external_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """The limit is lowered to 64 KiB so a 256 KiB model takes the >2 GiB path (protobuf's real limit cannot be
    reached on a CI machine's memory): shape inference, the checker and the save must not serialize the model."""
    ort = pytest.importorskip("onnxruntime")
    from torchtrt_ext.passes import shapes

    def no_serialize(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("serialized a model over the protobuf limit")

    monkeypatch.setattr(shapes, "PROTOBUF_LIMIT", 1 << 16)
    target = tmp_path / "wide.onnx"
    model = Wide().eval()
    x = torch.randn(2, 256)
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        exported = torchtrt_ext.export_onnx(model, (x,), target)
    assert (tmp_path / "wide.onnx.data").stat().st_size >= 256 * 256 * 4
    assert target.stat().st_size < 1 << 16
    assert "wide.onnx.data" in caplog.text and "2 GiB" in caplog.text
    assert len(exported.graph.initializer[0].raw_data or exported.graph.initializer[0].float_data) > 0  # weights kept
    session = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"x": x.numpy()})
    np.testing.assert_allclose(got, model(x).detach().numpy(), atol=1e-5)


# ------------------------------------------------------------------------ item 14: bad input, clear answers
def test_deform_conv_with_zero_kernel_is_refused() -> None:
    with pytest.raises(InvalidAttributeError, match=r"kernel_size=0 must be >= 1"):
        torchtrt_ext.nn.DeformConv2d(4, 6, 0)


@pytest.mark.parametrize("eps", [1e-50, 1e39])
def test_eps_that_float32_cannot_hold_is_refused(eps: float) -> None:
    with pytest.raises(InvalidAttributeError, match=r"does not survive float32"):
        torchtrt_ext.nn.L2Norm(dim=1, eps=eps)


def test_passes_accept_paths_like_build_engine(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    torchtrt_ext.export_onnx(Wide().eval(), (torch.randn(1, 256),), path)
    passes = torchtrt_ext.passes
    for run in (passes.cleanup, passes.decompose_custom_ops, passes.fuse_l2norm, passes.infer_shapes,
                lambda p: passes.fuse_l2norm_with_report(p)[0]):
        assert isinstance(run(path), onnx.ModelProto)
        assert isinstance(run(str(path)), onnx.ModelProto)
    from torchtrt_ext.doctor import report

    assert report(path, checker="table").to_dict() is not None  # the doctor takes paths too


def test_trtmodule_takes_an_engine_path(tmp_path: Path) -> None:
    from tests.test_deploy import make_engine

    path = tmp_path / "x.engine"
    make_engine().save(path)
    assert torchtrt_ext.TRTModule(path).metadata.output_names == ["boxes", "labels"]
    assert torchtrt_ext.TRTModule(str(path)).input_names == ["image", "scale"]
    with pytest.raises(InvalidInputError, match=r"TRTModule got a int.*Remedy:"):
        torchtrt_ext.TRTModule(3)  # type: ignore[arg-type]


def test_export_without_example_inputs_says_what_to_pass() -> None:
    with pytest.raises(InvalidInputError, match=r"example_inputs is a NoneType.*Remedy: pass example inputs"):
        torchtrt_ext.export_onnx(Wide(), None)


def test_onnxruntime_input_error_keeps_its_detail(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from torchtrt_ext.validate import OnnxRuntimeModule

    path = tmp_path / "m.onnx"
    torchtrt_ext.export_onnx(Wide().eval(), (torch.randn(1, 256),), path)
    with pytest.raises(InvalidInputError) as info:
        OnnxRuntimeModule(path)(torch.randn(1, 128))
    text = str(info.value)
    assert "Expected: 256" in text or "Expected: inputs" in text
    assert "index: 1" in text.lower() or "got: 128" in text.lower(), text
