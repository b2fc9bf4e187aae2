"""onnxruntime runs in a process of its own for validate (issue 33, item 4): a crash inside it (seen: a segfault while
optimizing the FP16 graph of a transformer block) becomes RuntimeCrashError naming the model and the remedy, after one
retry with graph optimizations off, never a dead interpreter.

The crash is a real one of the worker process: the test kills it with SIGSEGV, as the segfault does."""
from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import torchtrt_ext
from torchtrt_ext.errors import InvalidInputError, RuntimeCrashError
from torchtrt_ext.validate import OnnxRuntimeModule, validate

pytest.importorskip("onnxruntime")


class Block(torch.nn.Module):
    """A small transformer block: layernorm, attention with a causal -inf mask and softmax, an MLP."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.heads = heads
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).chunk(3, dim=-1))
        att = (q @ k.transpose(-1, -2)) * (d // self.heads) ** -0.5
        att = att.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        x = x + self.proj((F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


@pytest.fixture(scope="module")
def fp16_block(tmp_path_factory: pytest.TempPathFactory) -> tuple[torch.nn.Module, torch.Tensor, Path]:
    model, x = Block().eval().half(), torch.randn(2, 16, 32).half()
    path = tmp_path_factory.mktemp("block") / "block.onnx"
    torchtrt_ext.export_onnx(model, (x,), path)
    return model, x, path


def _segfault(module: OnnxRuntimeModule) -> None:
    assert module._worker is not None
    os.kill(module._worker.proc.pid, signal.SIGSEGV)
    module._worker.proc.wait()


def test_fp16_transformer_block_validates_against_onnxruntime(fp16_block) -> None:
    model, x, path = fp16_block
    report = validate(model, path, (x,))
    assert report.passed and report.precision == "fp16", report.to_table()


def test_a_crash_is_retried_with_graph_optimizations_off(fp16_block, caplog: pytest.LogCaptureFixture) -> None:
    model, x, path = fp16_block
    runner = OnnxRuntimeModule(path)
    expected = runner(x)
    _segfault(runner)
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        again = runner(x)
    assert torch.equal(again, expected) and runner.graph_optimization == "disable"
    assert "onnxruntime crashed (signal SIGSEGV) running block.onnx" in caplog.text
    assert "retrying with onnxruntime's graph optimizations off" in caplog.text


def test_a_crash_without_optimizations_is_a_named_error(fp16_block) -> None:
    model, x, path = fp16_block
    runner = OnnxRuntimeModule(path, graph_optimization="disable")
    runner(x)
    _segfault(runner)
    with pytest.raises(RuntimeCrashError, match=r"onnxruntime crashed \(signal SIGSEGV\) running block\.onnx.*"
                                                r"Remedy: validate with onnxruntime's graph optimizations off.*"
                                                r"validate the engine against the PyTorch model"):
        validate(model, runner, (x,), trials=1)


def test_a_model_onnxruntime_refuses_is_a_named_error(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "bad",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    path = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(InvalidInputError, match=r"onnxruntime cannot load bad\.onnx: .*Remedy: check the export"):
        OnnxRuntimeModule(path)


def test_onnxruntime_log_lines_stay_out_of_the_terminal(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """onnxruntime prints a coloured `[E:onnxruntime:...]` line on stderr before raising (issue 33, item 14); the
    user gets the project's one-line error only."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"])], "reshape",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
                              [numpy_helper.from_array(np.array([2, 2], np.int64), "s")])
    path = tmp_path / "reshape.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    runner = OnnxRuntimeModule(path)
    capfd.readouterr()
    with pytest.raises(InvalidInputError, match=r"onnxruntime failed to run reshape\.onnx: .*Reshape"):
        runner(torch.ones(3))
    err = capfd.readouterr().err
    assert "onnxruntime" not in err and "\x1b[" not in err, err
