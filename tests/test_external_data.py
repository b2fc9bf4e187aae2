"""Models over protobuf's 2 GiB limit (issue 33, item 2): saved with external data, they are inspected, built (cached
too) and validated from their path without ever being serialized as one message. The limit is lowered here (as in
tests/passes/test_shapes.py), and ``ModelProto.SerializeToString`` is made to fail above it exactly as protobuf does
above 2 GiB, so a small model with one real external-data file stands for a large one."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from google.protobuf.message import EncodeError

import torchtrt_ext
from torchtrt_ext import cli
from torchtrt_ext._files import save_onnx
from torchtrt_ext.passes import shapes as shapes_module


class TwoLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Linear(128, 256), torch.nn.Linear(256, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


@pytest.fixture
def big(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The path of a model "over the limit", written with its weights in ``model.onnx.data``."""
    model = torchtrt_ext.export_onnx(TwoLinear().eval(), (torch.randn(2, 128),))
    limit = model.ByteSize() // 2  # the weights (132 KB) are over it, the graph without them is far under
    serialize = onnx.ModelProto.SerializeToString

    def limited(self: onnx.ModelProto, *args: object, **kwargs: object) -> bytes:
        if self.ByteSize() >= limit:
            raise EncodeError("Failed to serialize proto")  # protobuf's own words above 2 GiB
        return serialize(self, *args, **kwargs)

    monkeypatch.setattr(shapes_module, "PROTOBUF_LIMIT", limit)
    monkeypatch.setattr(onnx.ModelProto, "SerializeToString", limited)
    path = save_onnx(model, tmp_path / "model.onnx")
    assert (tmp_path / "model.onnx.data").stat().st_size > limit  # a real external-data file
    with pytest.raises(EncodeError):
        onnx.load(path).SerializeToString()  # what failed before: any step re-serializing the loaded model
    yield path


def test_validate_runs_the_file_on_onnxruntime(big: Path) -> None:
    pytest.importorskip("onnxruntime")
    x = torch.randn(3, 128)
    report = torchtrt_ext.validate(TwoLinear().eval(), big, (x,))
    assert report.passed and report.outputs[0].max_abs_diff < 1e-4


def test_build_parses_the_file(rtx: str, big: Path, isolated_cache: Path) -> None:
    engine = torchtrt_ext.build_engine(big, backend=rtx, precision="fp16", progress=False)
    assert engine.metadata.output_names == ["output"] and engine.metadata.input_names == ["x"]
    from torchtrt_ext.cache import cached_build_engine

    first = cached_build_engine(big, backend=rtx, progress=False)
    second = cached_build_engine(big, backend=rtx, progress=False)
    assert first.metadata.model_key == second.metadata.model_key and len(list(isolated_cache.glob("*.engine"))) == 1


def test_the_cache_key_depends_on_the_external_weights(big: Path) -> None:
    from torchtrt_ext.backend.options import BuildOptions, Target
    from torchtrt_ext.cache import cache_keys

    model = onnx.load(big)
    other = onnx.load(big)
    weight = max(other.graph.initializer, key=lambda t: np.prod(t.dims))
    values = onnx.numpy_helper.to_array(weight).copy()
    values.flat[0] += 1.0
    weight.CopyFrom(onnx.numpy_helper.from_array(values, weight.name))
    target = Target("tensorrt_rtx", "1.0", None, None, None)
    options = BuildOptions.of(backend="tensorrt_rtx")
    assert cache_keys(model, options, target) != cache_keys(other, options, target)
    assert cache_keys(model, options, target) == cache_keys(onnx.load(big), options, target)


def test_inspect_reads_the_file(rtx: str, big: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["inspect", str(big), "--backend", rtx, "--json"]) == 0, capsys.readouterr()


def test_the_cli_builds_and_validates_the_file(rtx: str, big: Path, isolated_cache: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnxruntime")
    engine = big.parent / "model.engine"
    assert cli.main(["build", str(big), "--backend", rtx, "-o", str(engine), "-q"]) == 0, capsys.readouterr()
    assert engine.is_file()
    assert cli.main(["validate", "tests.test_external_data:TwoLinear", str(big), "--input-shape", "x:2x128"]) == 0, \
        capsys.readouterr()
