"""validate(): shape check first, errors per named output, tolerances by precision, ONNX through onnxruntime, and a
deliberately wrong op caught with the right output named."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnx
import pytest
import torch

import torchtrt_ext
from torchtrt_ext.errors import InvalidInputError, MissingDependencyError
from torchtrt_ext.ops import Attr, Decomposer, OpSpec, define_op
from torchtrt_ext.validate import (DEFAULT_INT_RANGE, TOLERANCES, OnnxRuntimeModule, OutputComparison,
                                   ValidationFailedError, ValidationReport, format_table, validate)


class Head(torch.nn.Module):
    """Conv then an L2Norm head; returns a dict like a detector does."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torchtrt_ext.nn.L2Norm(dim=1)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        feat = self.conv(x)
        return {"features": self.norm(feat), "scores": feat.mean(dim=(2, 3))}


def _shifted(offset: float, key: str = "scores"):
    model = Head()

    def candidate(x: torch.Tensor) -> dict[str, torch.Tensor]:
        out = model(x)
        return {**out, key: out[key] + offset}
    return model, candidate


def test_identical_models_pass_with_zero_error() -> None:
    model = Head()
    report = validate(model, model, (torch.randn(2, 3, 8, 8),))
    assert report.passed and report.trials == 3 and report.precision == "fp32"
    assert [o.name for o in report.outputs] == ["features", "scores"]
    for o in report.outputs:
        assert o.max_abs_diff == 0 and o.min_atol == 0 and o.cosine == pytest.approx(1.0)
    assert "PASS" in report.to_table() and "features" in report.to_table()
    data = json.loads(json.dumps(report.to_json()))
    assert data["passed"] is True and data["outputs"][1]["name"] == "scores"


def test_mismatch_names_the_output_and_the_min_atol() -> None:
    model, candidate = _shifted(0.05)
    report = validate(model, candidate, torch.randn(1, 3, 8, 8), rtol=0.0)
    assert not report.passed and report.failed_outputs == ["scores"]
    scores = report.outputs[1]
    assert scores.max_abs_diff == pytest.approx(0.05, rel=1e-5) and scores.min_atol == pytest.approx(0.05, rel=1e-5)
    assert "max abs diff 0.05 > atol 0.0001" in scores.reason
    assert "FAIL" in report.to_table()
    with pytest.raises(ValidationFailedError, match="scores: max abs diff"):
        report.check()
    assert validate(model, candidate, torch.randn(1, 3, 8, 8), atol=0.06, rtol=0.0).passed


def test_shape_is_checked_first() -> None:
    def candidate(x: torch.Tensor) -> torch.Tensor:
        return x[:, :2]
    report = validate(lambda x: x, candidate, torch.randn(2, 3))
    only = report.outputs[0]
    assert not report.passed and only.name == "output" and "shape [2, 2] != reference [2, 3]" in only.reason
    assert only.max_abs_diff is None and only.cosine is None


def test_nan_in_candidate_fails() -> None:
    def candidate(x: torch.Tensor) -> torch.Tensor:
        return x.clone().index_fill_(1, torch.tensor([0]), float("nan"))
    report = validate(lambda x: x, candidate, torch.randn(2, 3), trials=1)
    assert not report.passed and "2 more NaN than the reference" in report.outputs[0].reason
    assert json.dumps(report.to_json(), allow_nan=False)  # no NaN leaks into the JSON


def test_precision_defaults() -> None:
    assert TOLERANCES["fp16"] == (1e-2, 5e-3)  # issue 33 item 9: rtol scales with magnitude
    model = Head()
    half = Head().half()
    x = torch.randn(2, 3, 16, 16)
    report = validate(model, lambda t: half(t.half()), (x,))
    assert report.precision == "fp16" and report.atol == 1e-2, report.to_table()
    assert report.passed, report.to_table()
    strict = validate(model, lambda t: half(t.half()), (x,), precision="fp32")
    assert not strict.passed and (strict.atol, strict.rtol) == TOLERANCES["fp32"]


def test_candidate_errors_are_reported_not_raised() -> None:
    def broken(x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("engine exploded")
    report = validate(lambda x: x, broken, torch.randn(2))
    assert not report.passed and report.error == "candidate raised RuntimeError: engine exploded"
    fewer = validate(lambda x: (x, x), lambda x: x, torch.randn(2))
    assert not fewer.passed and "returned 1 output(s), the reference 2" in fewer.error


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"trials": 0}, r"trials=0\. Expected: an int >= 1"),
    ({"precision": "fp8"}, r"precision='fp8' is unknown\. Expected: one of \('fp32', 'fp16', 'bf16'\)"),
    ({"atol": -1.0}, r"atol=-1.0\. Expected: a finite number >= 0"),
])
def test_bad_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        validate(lambda x: x, lambda x: x, torch.randn(2), **kwargs)


def test_inputs_none_without_shapes_says_what_to_pass() -> None:
    with pytest.raises(InvalidInputError, match="pass inputs=\\(x,\\)"):
        validate(lambda x: x, lambda x: x)


def test_export_validated_on_onnxruntime(tmp_path) -> None:
    pytest.importorskip("onnxruntime")
    model = Head().eval()
    path = tmp_path / "head.onnx"
    torchtrt_ext.export_onnx(model, (torch.randn(2, 3, 8, 8),), path)
    report = validate(model, path)  # shapes from the ONNX graph (dynamic batch -> 1), custom nodes decomposed
    assert report.passed, report.to_table()
    assert report.candidate == "head.onnx (onnxruntime)" and [o.name for o in report.outputs] == ["features", "scores"]
    assert report.outputs[0].ref_shape == (1, 8, 8, 8)
    runner = OnnxRuntimeModule(path)
    assert runner.output_names == ["features", "scores"] and len(runner(torch.randn(3, 3, 8, 8))) == 2


# A deliberately wrong op: its decomposition (what ONNX runtimes and TensorRT run) differs from its eager math in the
# second output only. validate must fail, naming that output and no other.
def _wrong_eager(x: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    return x * scale, torch.tanh(x)


def _wrong_shapes(shapes: list, dtypes: list, scale: float) -> list:
    return [(shapes[0], dtypes[0]), (shapes[0], dtypes[0])]


def _wrong_decompose(d: Decomposer, inputs: list[str], outputs: list[str], scale: float) -> None:
    d.op("Mul", inputs[0], d.op("CastLike", d.const(scale), inputs[0]), out=outputs[0])
    d.op("Sigmoid", inputs[0], out=outputs[1])  # the bug: sigmoid is not tanh


SCALE_AND_SQUASH = define_op(OpSpec(
    name="TestWrongSquash", inputs=("x",), outputs=("scaled", "squashed"),
    attrs=(Attr("scale", "float", default=2.0),), eager=_wrong_eager, shape_rule=_wrong_shapes,
    decompose=_wrong_decompose, doc="(x * scale, tanh(x)), decomposed wrongly on purpose"))


class UsesWrongOp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        scaled, squashed = SCALE_AND_SQUASH(x, scale=3.0)
        return {"scaled": scaled, "squashed": squashed}


def test_wrong_decomposition_is_caught_and_named() -> None:
    pytest.importorskip("onnxruntime")
    model = UsesWrongOp().eval()
    onnx_model = torchtrt_ext.export_onnx(model, (torch.randn(4, 6),))
    report = validate(model, onnx_model)
    assert not report.passed
    assert report.failed_outputs == ["squashed"], report.to_table()
    by_name = {o.name: o for o in report.outputs}
    assert by_name["scaled"].passed and by_name["squashed"].max_abs_diff > 0.1
    assert "squashed" in report.to_table() and "FAIL: max abs diff" in report.to_table()


def test_engine_metadata_gives_input_shapes_and_the_gpu() -> None:
    from types import SimpleNamespace

    from torchtrt_ext.backend import BuildOptions, Profile, TensorInfo
    from torchtrt_ext.validate import input_specs_of, preferred_device

    metadata = SimpleNamespace(inputs=(TensorInfo("x", "float16", (-1, 3, 8, 8)),),
                               profiles=(Profile({"x": ((1, 3, 8, 8), (4, 3, 8, 8), (8, 3, 8, 8))}),),
                               options=BuildOptions(precision="fp16"))
    fake_trt_module = SimpleNamespace(metadata=metadata)
    assert input_specs_of(fake_trt_module) == [((4, 3, 8, 8), torch.float16)]  # the first profile's opt shape
    assert preferred_device(fake_trt_module) == torch.device("cuda")
    assert preferred_device(Head()) == torch.device("cpu") and preferred_device(lambda x: x) is None


# ------------------------------------------------------------------------------------- the report, as printed
BOXES = OutputComparison("boxes", (1, 4), (1, 4), "float32", "float32", 1e-4, 1e-3, True, "", 1.23456e-5, 0.0,
                         0.99999912, 1.23456e-5)
SCORES = OutputComparison("scores", (6,), (1, 6), "float16", "float32", 1e-2, 1e-2, False, "shape (1, 6) != (6,)",
                          None, float("nan"), None, None)
COUNT = OutputComparison("count", (), None, "int64", None, 0.0, 0.0, False, "missing")


def test_the_report_table_says_per_output_what_was_compared() -> None:
    report = ValidationReport((BOXES, SCORES, COUNT), "fp16", 1e-2, 0.5, 2, "model.py:make", "model.engine",
                              "the candidate returned 2 outputs, the reference 3")
    assert report.to_table() == "\n".join([
        "validate model.engine against model.py:make: FAIL (fp16: atol=0.01, rtol=0.5; 2 trial(s))",
        "output  shape        max abs   max rel  cosine    min atol  result",
        "------  -----------  --------  -------  --------  --------  --------------------------",
        "boxes   1x4          1.23e-05  0        0.999999  1.23e-05  pass",
        "scores  1x6 (ref 6)  -         nan      -         -         FAIL: shape (1, 6) != (6,)",
        "count   scalar       -         -        -         -         FAIL: missing",
        "error: the candidate returned 2 outputs, the reference 3"])
    assert str(report) == report.to_table()
    passed = ValidationReport((BOXES,), "fp32", 1e-4, 1e-3, 1, "a", "b")
    assert passed.to_table().splitlines()[0] == "validate b against a: PASS (fp32: atol=0.0001, rtol=0.001; 1 trial(s))"
    assert passed.check() is passed and not passed.failed_outputs
    scalar = dataclasses.replace(COUNT, got_shape=(1,))
    assert "1 (ref scalar)" in ValidationReport((scalar,), "fp32", 0, 0, 1, "a", "b").to_table()


def test_the_report_as_json_is_strict_json() -> None:
    report = ValidationReport((BOXES, SCORES, COUNT), "fp16", 1e-2, 0.5, 2, "ref", "cand")
    data = json.loads(json.dumps(report.to_json(), allow_nan=False))  # NaN becomes null
    assert {k: v for k, v in data.items() if k != "outputs"} == {
        "passed": False, "precision": "fp16", "atol": 0.01, "rtol": 0.5, "trials": 2, "reference": "ref",
        "candidate": "cand", "error": None}
    assert data["outputs"][1] == {"name": "scores", "ref_shape": [6], "got_shape": [1, 6], "ref_dtype": "float16",
                                  "got_dtype": "float32", "atol": 0.01, "rtol": 0.01, "passed": False,
                                  "reason": "shape (1, 6) != (6,)", "max_abs_diff": None, "max_rel_diff": None,
                                  "cosine": None, "min_atol": None}
    assert data["outputs"][0]["max_abs_diff"] == 1.23456e-5 and data["outputs"][2]["got_shape"] is None
    assert report.failed_outputs == ["scores", "count"]
    assert ValidationReport((BOXES,), "fp32", 1, 1, 1, "a", "b", error="boom").to_json()["error"] == "boom"


def test_check_names_every_failed_output_or_the_error() -> None:
    report = ValidationReport((BOXES, SCORES, COUNT), "fp16", 1e-2, 0.5, 2, "ref", "cand")
    with pytest.raises(ValidationFailedError) as info:
        report.check()
    assert info.value.what == "cand does not match ref (scores: shape (1, 6) != (6,); count: missing)"
    assert info.value.expected == "every output within atol=0.01, rtol=0.5 (fp16)"
    assert "compare in FP32 first" in info.value.remedy
    with pytest.raises(ValidationFailedError, match=r"^cand does not match ref \(it raised\)"):
        dataclasses.replace(report, outputs=(BOXES,), error="it raised").check()


def test_format_table_aligns_columns() -> None:
    assert format_table(["a", "long header"], [["wide cell", "x"], ["b", ""]]) == "\n".join([
        "a          long header", "---------  -----------", "wide cell  x", "b"])
    assert format_table(["a", "long header"], []) == "a  long header\n-  -----------"


def test_inputs_are_a_tensor_or_a_sequence_of_tensors() -> None:
    model = torch.nn.Linear(3, 2)
    x = torch.randn(2, 3)
    assert validate(model, model, x).passed and validate(model, model, [x]).passed
    assert validate(model, model, (x,)).passed
    for bad in ({"x": x}, (x, 3)):
        with pytest.raises(InvalidInputError, match=f"inputs is a {type(bad).__name__}"):
            validate(model, model, bad)


def test_onnx_runtime_module_of_a_path_or_a_model(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torchtrt_ext.nn.L2Norm(dim=1)).eval()
    x = torch.randn(2, 3)
    exported = torchtrt_ext.export_onnx(model, (x,), exporter="legacy")
    exported.graph.name = "head"
    path = tmp_path / "head.onnx"
    onnx.save(exported, str(path))
    for source, name in ((str(path), "head.onnx"), (path, "head.onnx"), (exported, "head")):
        module = OnnxRuntimeModule(source)
        assert module.source == name and module.providers == ["CPUExecutionProvider"]
        assert repr(module) == f"OnnxRuntimeModule({name}, providers=['CPUExecutionProvider'])"
        assert not [n for n in module.model.graph.node if n.domain == "torchtrt_ext"]  # the L2Norm decomposed
        assert len(module.input_names) == 1 and len(module.output_names) == 1
        torch.testing.assert_close(module(x), model(x).detach(), rtol=1e-5, atol=1e-6)
    assert OnnxRuntimeModule(exported, providers=("CPUExecutionProvider",)).providers == ["CPUExecutionProvider"]
    with pytest.raises(InvalidInputError, match="OnnxRuntimeModule got a bytes"):
        OnnxRuntimeModule(exported.SerializeToString())


def _add_mul_onnx() -> onnx.ModelProto:
    """a, b: float [2, 3] -> s = a + b, p = a * b (graph name 'addmul')."""
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("a", "b")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("s", "p")]
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["a", "b"], ["p"])]
    return helper.make_model(helper.make_graph(nodes, "addmul", inputs, outputs),
                             opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("isolated", [True, False], ids=["worker", "in_process"])
def test_onnx_runtime_module_runs_in_a_worker_or_in_this_process(isolated: bool) -> None:
    """isolated=True runs onnxruntime in a process of its own, False in this one (what timing needs); the results are
    the same: feeds by position or name, NumPy arrays as they are, a bfloat16 tensor given to a float input (NumPy has
    no bfloat16: it meets the graph's type), at every graph optimization level."""
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    for level in ("all", "basic", "disable"):
        module = OnnxRuntimeModule(_add_mul_onnx(), isolated=isolated, graph_optimization=level)
        assert module.isolated is isolated and module.graph_optimization == level
        assert module.input_names == ["a", "b"] and module.output_names == ["s", "p"]
        total, product = module(a, b=b)
        torch.testing.assert_close(total, a + b)
        torch.testing.assert_close(product, a * b)
        from_numpy, _ = module(a.numpy(), b.numpy())
        assert isinstance(from_numpy, torch.Tensor) and from_numpy.device.type == "cpu"
        torch.testing.assert_close(from_numpy, a + b)
        from_bf16, _ = module(a.to(torch.bfloat16), b)
        torch.testing.assert_close(from_bf16, a.to(torch.bfloat16).float() + b)
        # the session lives in this process only when not isolated: no worker was started for it
        assert (module._worker is not None) is isolated and (module._session is not None) is not isolated


def test_the_report_names_onnx_models_by_file_and_modules_by_class(tmp_path: Path) -> None:
    class AddMul(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return a + b, a * b

    path = tmp_path / "addmul.onnx"
    onnx.save(_add_mul_onnx(), str(path))
    inputs = (torch.randn(2, 3), torch.randn(2, 3))
    report = torchtrt_ext.validate(str(path), AddMul(), inputs)
    assert (report.reference, report.candidate) == ("addmul.onnx (onnxruntime)", "AddMul")
    assert report.passed and report.error == ""
    assert all(o.max_abs_diff is not None and o.cosine is not None for o in report.outputs)  # measured
    report = torchtrt_ext.validate(AddMul(), path, inputs)
    assert (report.reference, report.candidate) == ("AddMul", "addmul.onnx (onnxruntime)")


def test_an_output_missing_from_one_trial_is_compared_in_the_others() -> None:
    calls: list[int] = []

    def reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + 1, x * 2

    def candidate(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        calls.append(1)
        return (x + 1,) if len(calls) == 1 else (x + 1, x * 3)  # the second output wrong where it is given

    report = torchtrt_ext.validate(reference, candidate, (torch.ones(4),), trials=2)
    assert report.error.startswith("candidate returned 1 output(s), the reference 2")
    second = report.outputs[1]
    assert not second.passed and second.reason != "not produced by the candidate" and second.max_abs_diff is not None


def test_a_negative_rtol_is_named() -> None:
    with pytest.raises(InvalidInputError, match=r"rtol=-1\.0"):
        torchtrt_ext.validate(torch.nn.Identity(), torch.nn.Identity(), (torch.ones(2),), rtol=-1.0)


def test_as_callable_runs_onnx_files_in_a_worker_and_refuses_other_paths(tmp_path: Path) -> None:
    from torchtrt_ext.validate import as_callable

    path = tmp_path / "addmul.onnx"
    onnx.save(_add_mul_onnx(), str(path))
    assert as_callable(path).isolated is True and as_callable(path, isolated=False).isolated is False
    assert as_callable(_add_mul_onnx()).isolated is True
    with pytest.raises(InvalidInputError, match="cannot run a str"):
        as_callable(str(tmp_path / "model.pt"))


def test_without_onnxruntime_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real_import = importlib.import_module

    def without_onnxruntime(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "onnxruntime":
            raise ImportError("No module named 'onnxruntime'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", without_onnxruntime)
    with pytest.raises(MissingDependencyError) as raised:
        OnnxRuntimeModule(_add_mul_onnx(), isolated=False)
    message = str(raised.value)
    assert "onnxruntime is not installed" in message and "onnxruntime >= 1.20" in message
    assert "pip install onnxruntime" in message and raised.value.__cause__ is None


# ------------------------------------------------------------------------------------ inputs made by validate
def test_random_like_keeps_shape_dtype_and_the_examples_value_range() -> None:
    from torchtrt_ext.validate import random_like

    def draw(example: torch.Tensor, seed: int = 0) -> torch.Tensor:
        return random_like(example, torch.Generator().manual_seed(seed))

    floats = draw(torch.zeros(100, 100, dtype=torch.float16))
    assert floats.dtype == torch.float16 and floats.shape == (100, 100)
    assert abs(floats.float().mean()) < 0.05 and 0.95 < floats.float().std() < 1.05  # N(0, 1)
    assert torch.equal(draw(torch.zeros(5), 3), draw(torch.zeros(5), 3))
    assert not torch.equal(draw(torch.zeros(5), 3), draw(torch.zeros(5), 4))
    flags = draw(torch.zeros(1000, dtype=torch.bool))
    assert flags.dtype == torch.bool and 400 < int(flags.sum()) < 600
    ints = draw(torch.tensor([3, 7, 5], dtype=torch.int32).repeat(400))
    assert ints.dtype == torch.int32 and set(ints.tolist()) == {3, 4, 5, 6, 7}  # both ends of the example's range
    empty = draw(torch.zeros(0, dtype=torch.int64))
    assert empty.shape == (0,) and empty.dtype == torch.int64


def test_random_like_draws_bools_from_the_generator_on_the_examples_device() -> None:
    from torchtrt_ext.validate import random_like

    def draw(example: torch.Tensor, seed: int = 0) -> torch.Tensor:
        return random_like(example, torch.Generator().manual_seed(seed))

    flags = torch.zeros(1000, dtype=torch.bool)
    assert torch.equal(draw(flags, 3), draw(flags, 3)) and not torch.equal(draw(flags, 3), draw(flags, 4))
    for dtype in (torch.float16, torch.bool):  # drawn on the CPU, handed over on the example's device
        out = draw(torch.zeros(3, dtype=dtype, device="meta"))
        assert out.device.type == "meta" and out.dtype == dtype


def test_random_input_draws_each_kind_in_its_range_from_the_generator() -> None:
    """Floats ~ N(0, 1) or uniform over value_range, integers uniform in [low, high) (DEFAULT_INT_RANGE unless a range
    is given), bools of both values: of the dtype and on the device asked, the same for the same generator seed."""
    from torchtrt_ext.validate import random_input

    def draw(dtype: torch.dtype, seed: int = 0, value_range: tuple[float, float] | None = None,
             device: str = "cpu") -> torch.Tensor:
        return random_input((4000,), dtype, device, torch.Generator().manual_seed(seed), value_range)

    normal = draw(torch.float16)
    assert normal.dtype == torch.float16 and normal.shape == (4000,)
    assert abs(float(normal.float().mean())) < 0.1 and 0.9 < float(normal.float().std()) < 1.1
    uniform = draw(torch.float16, value_range=(-3.0, 5.0))
    assert uniform.dtype == torch.float16
    assert -3.0 <= float(uniform.min()) < -2.9 and 4.9 < float(uniform.max()) <= 5.0  # spans the whole range
    ids = draw(torch.int32)
    assert ids.dtype == torch.int32 and set(ids.tolist()) == set(range(*DEFAULT_INT_RANGE))
    assert set(draw(torch.int64, value_range=(5, 9)).tolist()) == {5, 6, 7, 8}
    flags = draw(torch.bool)
    assert flags.dtype == torch.bool and 1800 < int(flags.sum()) < 2200
    for dtype, value_range in ((torch.float16, None), (torch.float32, (-3.0, 5.0)), (torch.int32, None),
                               (torch.bool, None)):
        assert torch.equal(draw(dtype, 1, value_range), draw(dtype, 1, value_range))
        assert not torch.equal(draw(dtype, 1, value_range), draw(dtype, 2, value_range))
        on_meta = draw(dtype, value_range=value_range, device="meta")
        assert on_meta.device.type == "meta" and on_meta.dtype == dtype


def test_later_trials_draw_new_inputs_of_the_examples_kind() -> None:
    seen: list[tuple[torch.Tensor, ...]] = []

    def reference(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        seen.append((x, idx))
        return x * 2

    x, idx = torch.randn(2, 3), torch.tensor([[0, 9]])
    assert validate(reference, reference, (x, idx), trials=3, seed=5).passed
    assert len(seen) == 6 and torch.equal(seen[0][0], x) and torch.equal(seen[1][0], x)  # examples first
    for trial in (seen[2], seen[4]):
        assert trial[0].shape == x.shape and not torch.equal(trial[0], x)
        assert trial[1].dtype == idx.dtype and 0 <= int(trial[1].min()) and int(trial[1].max()) <= 9
    assert not torch.equal(seen[2][0], seen[4][0])
    seen.clear()
    validate(reference, reference, (x, idx), trials=2, seed=5)
    again = seen[2][0]
    seen.clear()
    validate(reference, reference, (x, idx), trials=2, seed=6)
    assert not torch.equal(seen[2][0], again)


def _three_input_onnx() -> onnx.ModelProto:
    """x: float [N, 3] (N dynamic), idx: int64 [2], flag: bool [2], and a weight listed among the graph inputs."""
    from onnx import TensorProto, helper, numpy_helper

    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
              helper.make_tensor_value_info("idx", TensorProto.INT64, [2]),
              helper.make_tensor_value_info("flag", TensorProto.BOOL, [2]),
              helper.make_tensor_value_info("w", TensorProto.FLOAT, [3])]
    outputs = [helper.make_tensor_value_info(n, t, None) for n, t in (("y", TensorProto.FLOAT),
                                                                     ("idx_out", TensorProto.INT64),
                                                                     ("flag_out", TensorProto.BOOL))]
    nodes = [helper.make_node("Mul", ["x", "w"], ["y"]), helper.make_node("Identity", ["idx"], ["idx_out"]),
             helper.make_node("Identity", ["flag"], ["flag_out"])]
    weight = numpy_helper.from_array(np.full(3, 2.0, dtype=np.float32), "w")
    graph = helper.make_graph(nodes, "three", inputs, outputs, initializer=[weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_inputs_none_takes_shapes_and_dtypes_from_the_onnx_graph() -> None:
    from torchtrt_ext.validate import input_specs_of

    module = OnnxRuntimeModule(_three_input_onnx())
    assert module.input_specs() == [("x", (1, 3), torch.float32), ("idx", (2,), torch.int64),
                                    ("flag", (2,), torch.bool)]  # dynamic dims 1, the weight is no input
    assert input_specs_of(module) == [((1, 3), torch.float32), ((2,), torch.int64), ((2,), torch.bool)]
    seen: list[tuple[torch.Tensor, ...]] = []

    def reference(x: torch.Tensor, idx: torch.Tensor, flag: torch.Tensor) -> tuple[torch.Tensor, ...]:
        seen.append((x, idx, flag))
        return x * 2, idx, flag

    for candidate in (module, _three_input_onnx()):  # the candidate, or the reference, declares the inputs
        seen.clear()
        assert validate(reference, candidate, trials=1).passed
        x, idx, flag = seen[0]
        assert x.shape == (1, 3) and x.dtype == torch.float32 and bool((x != 0).all())
        low, high = DEFAULT_INT_RANGE  # integer inputs are drawn in the documented range
        assert idx.dtype == torch.int64 and bool(((idx >= low) & (idx < high)).all()) and flag.dtype == torch.bool
    seen.clear()
    assert validate(module, reference, trials=1).passed and seen[0][0].shape == (1, 3)
    first = seen[0][0]
    seen.clear()
    validate(module, reference, trials=1, seed=1)
    assert not torch.equal(seen[0][0], first)  # the seed draws the inputs


def test_engine_inputs_outside_the_profile_take_their_exported_dims() -> None:
    from types import SimpleNamespace

    from torchtrt_ext.backend import TensorInfo
    from torchtrt_ext.validate import input_specs_of

    metadata = SimpleNamespace(inputs=(TensorInfo("x", "float32", (-1, 3)), TensorInfo("n", "int32", (2,))),
                               profiles=())
    assert input_specs_of(SimpleNamespace(metadata=metadata)) == [((1, 3), torch.float32), ((2,), torch.int32)]
    assert input_specs_of(SimpleNamespace(metadata=SimpleNamespace(inputs=(), profiles=()))) is None
    assert input_specs_of(lambda x: x) is None and input_specs_of(torch.nn.Linear(2, 2)) is None


class _Compiled:
    """A candidate that says its precision the ways validate reads it: its own attribute, an engine's, metadata."""

    def __init__(self, **where: object) -> None:
        self.__dict__.update(where)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x


@pytest.mark.parametrize("candidate, precision", [
    (_Compiled(precision="bf16"), "bf16"),
    (_Compiled(precision="as_exported"), "fp32"),
    (_Compiled(engine=SimpleNamespace(precision="fp16")), "fp16"),
    (_Compiled(metadata=SimpleNamespace(options=SimpleNamespace(precision="bf16"))), "bf16"),
    (_Compiled(engine=SimpleNamespace(metadata=SimpleNamespace(options=SimpleNamespace(precision="fp16")))), "fp16"),
    (lambda x: x.half(), "fp16"),
    (lambda x: x.bfloat16(), "bf16"),
    (lambda x: (x.half(), x.bfloat16()), "bf16"),
    (lambda x: x, "fp32"),
], ids=["attribute", "not a precision", "engine attribute", "metadata", "engine metadata", "fp16 outputs",
        "bf16 outputs", "both", "fp32 outputs"])
def test_the_precision_comes_from_the_candidate_or_its_outputs(candidate: Any, precision: str) -> None:
    report = validate(candidate, candidate, torch.randn(4), trials=1)
    assert report.precision == precision and (report.atol, report.rtol) == TOLERANCES[precision]


def test_describe_names_what_was_compared(tmp_path: Path) -> None:
    from torchtrt_ext.validate import describe

    onnx.save(_three_input_onnx(), str(tmp_path / "three.onnx"))
    assert describe(OnnxRuntimeModule(tmp_path / "three.onnx")) == "three.onnx (onnxruntime)"
    assert describe(tmp_path / "model.engine") == "model.engine" and describe("dir/model.onnx") == "model.onnx"
    assert describe(Head()) == "Head" and describe(_shifted) == "_shifted" and describe(_Compiled()) == "_Compiled"
    report = validate(Head(), Head(), torch.randn(1, 3, 8, 8), trials=1)
    assert (report.reference, report.candidate) == ("Head", "Head")


# ------------------------------------------------------------------------------- how one output is compared
def _compare_one(reference: torch.Tensor, got: Any, **kwargs: Any) -> OutputComparison:
    report = validate(lambda x: reference, lambda x: got, torch.zeros(1), trials=1, **kwargs)
    (only,) = report.outputs
    assert report.passed == only.passed
    return only


def test_the_same_non_finite_values_at_the_same_places_match() -> None:
    inf, nan = float("inf"), float("nan")
    same = _compare_one(torch.tensor([[1.0, inf], [nan, -inf]]), torch.tensor([[1.0, inf], [nan, -inf]]),
                        atol=0.0, rtol=0.0)
    assert same.passed and same.max_abs_diff == 0 and same.min_atol == 0
    near = _compare_one(torch.tensor([inf, 1.0]), torch.tensor([inf, 1.0005]), atol=0.0, rtol=1e-3)
    assert near.passed and near.max_abs_diff == pytest.approx(5e-4, rel=1e-3)


INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize("reference, got, reason", [
    ([1.0, 2.0, 3.0], [1.0, 2.0, NAN], "1 more NaN than the reference (first at index (0, 2))"),
    ([1.0, 2.0, 3.0], [1.0, INF, 3.0], "non-finite values differ from the reference (first at index (0, 1))"),
    ([INF, 2.0, 3.0], [-INF, 2.0, 3.0], "non-finite values differ from the reference (first at index (0, 0))"),
    ([NAN, 1.0, 3.0], [0.0, 1.0, 3.0], "non-finite values differ from the reference (first at index (0, 0))"),
], ids=["one NaN more", "inf for a number", "-inf for inf", "a number for NaN"])
def test_non_finite_values_that_differ_fail_naming_the_first(reference: list[float], got: list[float],
                                                            reason: str) -> None:
    result = _compare_one(torch.tensor([reference, [4.0, 5.0, 6.0]]), torch.tensor([got, [4.0, 5.0, 6.0]]))
    assert not result.passed and result.reason == reason


def test_cosine_and_relative_error_on_zero_and_small_tensors() -> None:
    zeros = _compare_one(torch.zeros(3), torch.zeros(3))
    assert zeros.cosine == 1.0 and zeros.max_rel_diff == 0.0 and zeros.passed
    against_zeros = _compare_one(torch.zeros(3), torch.tensor([0.5, 0.0, 0.0]), atol=1.0)
    assert against_zeros.cosine == 0.0 and against_zeros.max_rel_diff == 0.0 and against_zeros.max_abs_diff == 0.5
    small = _compare_one(torch.tensor([0.1, 0.2]), torch.tensor([0.2, 0.1]), atol=1.0)
    assert small.cosine == pytest.approx(0.8) and small.max_rel_diff == pytest.approx(1.0)
    assert _compare_one(torch.zeros(0), torch.zeros(0)).passed


def test_integer_outputs_compare_exactly_whatever_the_tolerance() -> None:
    off_by_one = _compare_one(torch.tensor([100, 2]), torch.tensor([101, 2]), atol=10.0, rtol=0.5)
    assert not off_by_one.passed and off_by_one.reason == "max abs diff 1 > atol 0"
    assert off_by_one.min_atol == 1.0 and off_by_one.got_dtype == "int64"
    floats = _compare_one(torch.tensor([100.0]), torch.tensor([101.0]), atol=0.5, rtol=0.001)
    assert floats.reason == "max abs diff 1 > atol 0.5 + rtol 0.001*|ref|" and floats.min_atol == pytest.approx(0.9)
    no_rtol = _compare_one(torch.tensor([1.0]), torch.tensor([2.0]), atol=0.5, rtol=0.0)
    assert no_rtol.reason == "max abs diff 1 > atol 0.5"


def test_an_output_that_is_not_a_tensor_fails() -> None:
    result = _compare_one(torch.ones(2), 3)
    assert not result.passed and result.reason == "candidate returned a int, not a tensor"
    half = _compare_one(torch.ones(2), torch.ones(2, dtype=torch.float16))
    assert half.got_dtype == "float16" and half.ref_dtype == "float32" and half.got_shape == (2,)


class _Doubles(torch.nn.Module):
    """Doubles its input in place (a module with a parameter: validate runs it on copies on that device)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul_(self.scale.detach())


def test_each_model_runs_on_its_own_copy_of_the_inputs() -> None:
    x = torch.ones(3)
    report = validate(_Doubles(), _Doubles(), (x,), trials=2)
    assert report.passed and torch.equal(x, torch.ones(3))
    assert validate(lambda t: t * 2, lambda t: t.mul_(2), (x,), trials=1).passed and torch.equal(x, torch.ones(3))


def test_onnx_paths_and_models_are_run_by_onnxruntime(tmp_path: Path) -> None:
    path = tmp_path / "three.onnx"
    onnx.save(_three_input_onnx(), str(path))

    def reference(x: torch.Tensor, idx: torch.Tensor, flag: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x * 2, idx, flag

    for candidate, name in ((str(path), "three.onnx"), (path, "three.onnx"), (_three_input_onnx(), "three")):
        report = validate(reference, candidate, trials=1)
        assert report.passed and report.candidate == f"{name} (onnxruntime)"
    with pytest.raises(InvalidInputError, match="cannot run a int"):
        validate(reference, 3)


def test_onnx_runtime_module_checks_what_it_is_given() -> None:
    module = OnnxRuntimeModule(_three_input_onnx())
    x, idx, flag = torch.randn(2, 3), torch.tensor([1, 2]), torch.tensor([True, False])
    y, idx_out, flag_out = module(x, flag=flag, idx=idx)  # positional and named
    torch.testing.assert_close(y, x * 2)
    assert torch.equal(idx_out, idx) and torch.equal(flag_out, flag) and y.device == x.device
    with pytest.raises(InvalidInputError, match=r"three got 4 inputs\. Expected: at most \['x', 'idx', 'flag'\]"):
        module(x, idx, flag, x)
    with pytest.raises(InvalidInputError, match=r"three: inputs \['flag'\] were not given\. Expected: inputs "
                                                r"\['x', 'idx', 'flag'\]"):
        module(x, idx)
    with pytest.raises(InvalidInputError, match=r"onnxruntime failed to run three: .*given \{'x': \(\(2, 3\), "
                                                r"'float64'\), 'idx'") as info:
        module(x.double(), idx, flag)
    assert "'x': (('N', 3), 'tensor(float)')" in info.value.expected


def test_what_the_report_records_per_output() -> None:
    report = validate(lambda x: (x, x.long()), lambda x: (x, x.long()), torch.randn(3), trials=2, atol=0.5, rtol=0.1)
    floats, ints = report.outputs
    assert (floats.atol, floats.rtol, ints.atol, ints.rtol) == (0.5, 0.1, 0.0, 0.0)  # integers compare exactly
    assert (floats.ref_dtype, ints.ref_dtype, ints.got_dtype) == ("float32", "int64", "int64")
    assert report.trials == 2 and (report.atol, report.rtol) == (0.5, 0.1)
    missing = validate(lambda x: (x, x + 1), lambda x: (x,), torch.randn(3), trials=2).outputs[1]
    assert not missing.passed and missing.reason == "not produced by the candidate" and missing.got_shape is None
    assert missing.max_abs_diff is None and missing.min_atol is None and missing.max_rel_diff is None
    shape = validate(lambda x: x, lambda x: x[:2], torch.randn(3)).outputs[0]
    assert shape.max_rel_diff is None and shape.min_atol is None and shape.got_shape == (2,)


def test_a_candidate_that_raises_ends_the_trials() -> None:
    calls: list[int] = []

    def broken(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        raise ValueError()

    report = validate(lambda x: x, broken, torch.randn(2), trials=3)
    assert report.error == "candidate raised ValueError: " and report.trials == 1 and len(calls) == 1
    assert report.outputs[0].reason == "not produced by the candidate"

    def refuses(x: torch.Tensor) -> torch.Tensor:
        raise InvalidInputError("our own error")

    with pytest.raises(InvalidInputError, match="our own error"):  # the project's errors are not a failed candidate
        validate(lambda x: x, refuses, torch.randn(2))


def test_the_default_seed_is_0() -> None:
    seen: list[torch.Tensor] = []

    def reference(x: torch.Tensor) -> torch.Tensor:
        seen.append(x)
        return x

    for seed in ({}, {"seed": 0}):
        validate(reference, reference, torch.randn(2), trials=2, **seed)
    assert torch.equal(seen[2], seen[6])


def test_the_seed_alone_draws_the_inputs() -> None:
    """Not torch's global random state: trial t of seed s draws from seed s + t, for given and derived inputs."""
    seen: list[tuple[torch.Tensor, ...]] = []

    def reference(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        seen.append(inputs)
        return inputs[0] * 2, inputs[1], inputs[2]

    examples = (torch.randn(2, 3), torch.tensor([0, 5]), torch.tensor([True, False]))
    draws = []
    for global_seed, seed, trials in ((1, 5, 2), (2, 4, 3), (3, 5, 1)):
        torch.manual_seed(global_seed)
        seen.clear()
        validate(reference, reference, examples, trials=trials, seed=seed)
        draws.append([t for inputs in seen[::2] for t in inputs])
    assert all(torch.equal(a, b) for a, b in zip(draws[0][3:6], draws[1][6:9]))  # both drawn from seed 6
    module = OnnxRuntimeModule(_three_input_onnx())
    derived = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        seen.clear()
        validate(reference, module, trials=1, seed=1)
        derived.append(seen[0])
    assert all(torch.equal(a, b) for a, b in zip(*derived))
    flag = derived[0][2]
    assert flag.dtype == torch.bool and flag.shape == (2,)  # a bool input is drawn as bools, of its declared shape


def test_an_onnx_input_of_another_type_needs_inputs_given() -> None:
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["s"], ["t"])], "strings",
                              [helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
                              [helper.make_tensor_value_info("t", TensorProto.STRING, [2])])
    module = OnnxRuntimeModule(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(InvalidInputError, match=r"ONNX input 's' has element type 8\. Expected: a float, int or bool "
                                                r"input\. Remedy: pass inputs explicitly"):
        module.input_specs()


def test_engine_metadata_without_profiles_gives_the_exported_dims() -> None:
    from torchtrt_ext.backend import TensorInfo
    from torchtrt_ext.validate import input_specs_of

    metadata = SimpleNamespace(inputs=(TensorInfo("x", "bfloat16", (-1, 4)),))
    assert input_specs_of(SimpleNamespace(metadata=metadata)) == [((1, 4), torch.bfloat16)]
