"""compile(): what runs on a CPU machine (argument errors, fusion hook) and, on a GPU with TensorRT, the whole path."""
from __future__ import annotations

import importlib.util
import logging
import warnings

import pytest
import torch

from torchtrt_ext.compile import compile
from torchtrt_ext.passes import pipeline
from torchtrt_ext.errors import InvalidInputError, MissingDependencyError
from torchtrt_ext.export import export_onnx
from torchtrt_ext.errors import NoGPUError
from torchtrt_ext.runtime import TRTModule

HAS_RTX = importlib.util.find_spec("tensorrt_rtx") is not None


class Head(torch.nn.Module):
    """Conv + the hand-written normalization TensorRT runs slowly (fused into one L2Norm node by the passes)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.drop(self.conv(x))
        return y / y.norm(dim=1, keepdim=True).clamp_min(1e-6)


class TwoHeads(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        y = self.conv(x)
        return {"boxes": torch.relu(y), "scores": y.softmax(1)}


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHTRT_EXT_CACHE_DIR", str(tmp_path / "engine_cache"))


# ------------------------------------------------------------------------------------------------ CPU machine
@pytest.mark.skipif(not HAS_RTX, reason="tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')")
def test_no_gpu_is_a_clear_error_after_switching_to_eval() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    model = Head().train()
    with pytest.warns(UserWarning, match="training mode; switching it to eval"), \
            pytest.raises(NoGPUError, match="needs a CUDA GPU.*on a CPU-only machine you can still export"):
        compile(model, (torch.randn(2, 3, 8, 8),), backend="tensorrt_rtx")
    assert not model.training


def test_missing_tensorrt_names_the_pip_extras() -> None:
    if importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("a tensorrt package is importable here")
    with pytest.raises(MissingDependencyError, match=r"pip install 'torchtrt_ext\[trt\]'") as info:
        compile(Head().eval(), (torch.randn(2, 3, 8, 8),), backend="tensorrt")
    if HAS_RTX:
        assert "tensorrt_rtx is installed: pass backend='tensorrt_rtx'" in str(info.value)
    else:
        assert "torchtrt_ext[rtx]" in str(info.value)


def test_bad_arguments() -> None:
    with pytest.raises(InvalidInputError, match="precision='fp8' is not supported"):
        compile(Head().eval(), (torch.randn(2, 3, 8, 8),), precision="fp8")
    with pytest.raises(InvalidInputError, match="example input 0 is a list"):
        compile(Head().eval(), ([1, 2],))
    with pytest.raises(InvalidInputError, match="compile got a function"):
        compile(lambda x: x, (torch.randn(2),))  # type: ignore[arg-type]


def test_fusion_hook_fuses_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    onnx_model = export_onnx(Head().eval(), (torch.randn(2, 3, 8, 8),))
    assert not any(n.domain == "torchtrt_ext" for n in onnx_model.graph.node)
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        fused = pipeline(onnx_model, fuse=True)
    assert [n.op_type for n in fused.graph.node if n.domain == "torchtrt_ext"] == ["L2Norm"]
    assert "fusion: fused 1 L2 normalizations" in caplog.text
    assert pipeline(onnx_model, fuse=False) is onnx_model


# ------------------------------------------------------------------------------------------------ GPU + TensorRT


def _compare(got: torch.Tensor, ref: torch.Tensor, atol: float) -> None:
    assert got.shape == ref.shape and got.dtype == ref.dtype and got.is_cuda
    assert (got.float() - ref.float()).abs().max().item() < atol


@pytest.mark.parametrize(("precision", "atol"), [("fp32", 1e-3), ("fp16", 1e-2)])
@pytest.mark.gpu
@pytest.mark.tensorrt
def test_compiled_module_matches_eager(precision: str, atol: float) -> None:
    torch.manual_seed(0)
    model = Head().eval().cuda()
    x = torch.randn(4, 3, 16, 16, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # validation must not warn
        trt_model = compile(model, (x,), precision=precision, progress=False)
    assert isinstance(trt_model, TRTModule)
    with torch.no_grad():
        ref = model(x)
    _compare(trt_model(x), ref, atol)
    _compare(trt_model(x[:1]), ref[:1], atol)  # dynamic batch


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_cpu_example_inputs_are_fine_for_compile_but_the_module_wants_cuda() -> None:
    model = Head().eval()
    trt_model = compile(model, (torch.randn(2, 3, 8, 8),), progress=False, validate=False)
    with pytest.raises(InvalidInputError, match=r"input 'x' \(shape \(2, 3, 8, 8\)\) is on cpu.*a CUDA tensor"):
        trt_model(torch.randn(2, 3, 8, 8))
    out = trt_model(torch.randn(2, 3, 8, 8, device="cuda"))
    assert out.is_cuda


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_dict_outputs_keep_their_structure() -> None:
    model = TwoHeads().eval().cuda()
    x = torch.randn(2, 3, 8, 8, device="cuda")
    trt_model = compile(model, (x,), progress=False)
    got, ref = trt_model(x), model(x)
    assert isinstance(got, dict) and list(got) == ["boxes", "scores"]
    for key in ref:
        _compare(got[key], ref[key].detach(), 1e-3)


_PLUGIN_MODE_RUN = """
import sys, torch
from tests.test_compile import Head
from torchtrt_ext.compile import compile
from torchtrt_ext.errors import LibraryNotFoundError, MissingDependencyError
torch.manual_seed(0)
model = Head().eval().cuda()
x = torch.randn(4, 3, 16, 16, device="cuda")
try:
    trt_model = compile(model, (x,), plugins=sys.argv[1], progress=False, cache=False)
except (LibraryNotFoundError, MissingDependencyError) as exc:
    print("UNAVAILABLE", exc); sys.exit(0)
print("MODE", trt_model.metadata.plugin_mode, trt_model.metadata.plugins)
print("ERROR", (trt_model(x).float() - model(x).detach().float()).abs().max().item())
"""


@pytest.mark.parametrize("plugins", ["cpp", "python"])
@pytest.mark.gpu
@pytest.mark.tensorrt
def test_l2norm_plugin_modes_match_eager(plugins: str) -> None:
    """Each mode in a fresh process: TensorRT's plugin registry is process-wide and keeps the first creator of a name,
    so a second mode in this process is refused (backend.plugins.load_plugins)."""
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", _PLUGIN_MODE_RUN, plugins], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    if done.stdout.startswith("UNAVAILABLE"):
        pytest.skip(f"plugins={plugins!r} not available here: {done.stdout}")
    assert f"MODE {plugins} ('torchtrt_ext::L2Norm:1',)" in done.stdout, done.stdout
    error = float(done.stdout.split("ERROR ")[1].split()[0])
    assert error < 1e-3, error


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_training_model_is_switched_to_eval_with_a_warning() -> None:
    model = Head().train().cuda()
    with pytest.warns(UserWarning, match="training mode"):
        compile(model, (torch.randn(2, 3, 8, 8, device="cuda"),), progress=False)
    assert not model.training
