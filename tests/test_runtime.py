"""TRTModule and load(): CPU-checkable parts here (structure, persistence, compatibility checks); the engine runs in
the tests marked gpu + tensorrt, which skip with the reason where those are missing."""
from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import onnx
import pytest
import torch

import torchtrt_ext
from torchtrt_ext.backend import Engine, build_engine
from torchtrt_ext.backend.profiles import Profile, choose_profile
from torchtrt_ext.errors import EngineCompatibilityError, InvalidInputError
from torchtrt_ext.export import output_tree
from torchtrt_ext.runtime import TRTModule, build_outputs, load


# ------------------------------------------------------------------------------------------------ CPU machine
@pytest.mark.parametrize("value", [
    torch.zeros(1),
    (torch.zeros(1), torch.ones(2)),
    [torch.zeros(1), {"a": torch.ones(1), "b": (torch.zeros(3),)}],
    {"boxes": torch.zeros(2), "scores": torch.ones(2)},
])
def test_output_tree_round_trip(value: object) -> None:
    tree = output_tree(value)
    leaves = torch.utils._pytree.tree_leaves(value)  # the exporter's output order
    rebuilt = build_outputs(tree, leaves)
    assert torch.utils._pytree.tree_structure(rebuilt) == torch.utils._pytree.tree_structure(value)
    assert all(a is b for a, b in zip(torch.utils._pytree.tree_leaves(rebuilt), leaves))


def test_output_tree_refuses_non_tensors() -> None:
    with pytest.raises(InvalidInputError, match="the model returned a str"):
        output_tree((torch.zeros(1), "label"))


def test_profile_choice() -> None:
    profiles = [Profile({"x": ((1, 3), (2, 3), (4, 3))}), Profile({"x": ((5, 3), (8, 3), (16, 3))})]
    assert choose_profile(profiles, {"x": (3, 3)}) == 0
    assert choose_profile(profiles, {"x": (9, 3)}) == 1
    assert choose_profile(profiles, {"x": (17, 3)}) is None


@pytest.fixture(scope="module")
def rtx_engine(rtx: str, conv_onnx: onnx.ModelProto) -> Engine:
    return build_engine(conv_onnx, backend=rtx, progress=False, output_tree={"type": "tensor", "index": 0},
                        profiles={"x": ((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8))})


def test_state_dict_carries_the_engine(rtx_engine: Engine) -> None:
    state = TRTModule(rtx_engine).state_dict()
    restored = TRTModule()
    restored.load_state_dict(state)
    assert restored.engine.to_bytes() == rtx_engine.to_bytes()
    assert "profiles=1" in repr(restored)


def test_save_and_load_round_trip(rtx_engine: Engine, tmp_path: Path) -> None:
    path = TRTModule(rtx_engine).save(tmp_path / "model.engine")
    module = load(path)
    assert module.engine.to_bytes() == rtx_engine.to_bytes()
    assert module.input_names == ["x"]


def test_load_refuses_another_tensorrt_version(rtx_engine: Engine, tmp_path: Path) -> None:
    path = rtx_engine.with_metadata(target=dataclasses.replace(rtx_engine.metadata.target, trt_version="0.9.0")).save(tmp_path / "old.engine")
    with pytest.raises(EngineCompatibilityError, match=r"built with tensorrt_rtx 0\.9\.0, this machine has "
                                                       r"tensorrt_rtx 1\..*Remedy: rebuild the engine on the target"):
        load(path)


def test_cpu_inputs_are_refused_with_the_input_named(rtx_engine: Engine) -> None:
    module = TRTModule(rtx_engine)
    with pytest.raises(InvalidInputError, match=r"input 'x' \(shape \(2, 3, 8, 8\)\) is on cpu"):
        module(torch.randn(2, 3, 8, 8))
    with pytest.raises(InvalidInputError, match=r"missing input\(s\) \['x'\]"):
        module()
    with pytest.raises(InvalidInputError, match="unexpected input 'y'"):
        module(y=torch.randn(1))


# ------------------------------------------------------------------------------------------------ GPU + TensorRT
class Conv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


TWO_PROFILES = [{"x": ((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16))},
                {"x": ((5, 3, 16, 16), (8, 3, 16, 16), (16, 3, 16, 16))}]


@pytest.fixture
def conv_cuda() -> Conv:
    torch.manual_seed(0)
    return Conv().eval().cuda()


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_profiles_switch_with_the_batch(conv_cuda: Conv) -> None:
    trt_model = torchtrt_ext.compile(conv_cuda, (torch.randn(2, 3, 16, 16, device="cuda"),), profiles=TWO_PROFILES,
                                     progress=False)
    for batch in (2, 8, 3, 16, 1):
        x = torch.randn(batch, 3, 16, 16, device="cuda")
        assert (trt_model(x) - conv_cuda(x)).abs().max().item() < 1e-3
    with pytest.raises(InvalidInputError, match=r"input shapes x \(17, 3, 16, 16\) fit no optimization profile.*"
                                                r"profile 1: x min \(5, 3, 16, 16\), opt \(8, 3, 16, 16\), "
                                                r"max \(16, 3, 16, 16\)"):
        trt_model(torch.randn(17, 3, 16, 16, device="cuda"))


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_input_checks_name_the_input(conv_cuda: Conv) -> None:
    trt_model = torchtrt_ext.compile(conv_cuda, (torch.randn(2, 3, 16, 16, device="cuda"),), progress=False)
    with pytest.raises(InvalidInputError, match=r"input 'x' has dtype torch.float16.*torch.float32"):
        trt_model(torch.randn(2, 3, 16, 16, device="cuda", dtype=torch.float16))
    with pytest.raises(InvalidInputError, match=r"input 'x' has shape \(3, 16, 16\) \(rank 3\).*rank 4"):
        trt_model(torch.randn(3, 16, 16, device="cuda"))


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_runs_on_the_current_stream(conv_cuda: Conv) -> None:
    trt_model = torchtrt_ext.compile(conv_cuda, (torch.randn(2, 3, 16, 16, device="cuda"),), progress=False)
    stream = torch.cuda.Stream()
    x = torch.randn(2, 3, 16, 16, device="cuda")
    with torch.cuda.stream(stream):
        y = trt_model(x)
    stream.synchronize()
    assert (y - conv_cuda(x)).abs().max().item() < 1e-3


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_cuda_graph_replay_matches(conv_cuda: Conv) -> None:
    trt_model = torchtrt_ext.compile(conv_cuda, (torch.randn(2, 3, 16, 16, device="cuda"),), cuda_graphs=True,
                                     progress=False)
    for _ in range(3):  # capture, then replay twice with new data
        x = torch.randn(2, 3, 16, 16, device="cuda")
        assert (trt_model(x) - conv_cuda(x)).abs().max().item() < 1e-3
    x = torch.randn(3, 3, 16, 16, device="cuda")  # another shape: another graph
    assert (trt_model(x) - conv_cuda(x)).abs().max().item() < 1e-3


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_threads_each_get_a_context(conv_cuda: Conv) -> None:
    trt_model = torchtrt_ext.compile(conv_cuda, (torch.randn(2, 3, 16, 16, device="cuda"),), progress=False)
    errors: list[float] = []

    def work() -> None:
        for _ in range(20):
            x = torch.randn(2, 3, 16, 16, device="cuda")
            errors.append((trt_model(x) - conv_cuda(x)).abs().max().item())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 80 and max(errors) < 1e-3


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_save_load_runs(conv_cuda: Conv, tmp_path: Path) -> None:
    x = torch.randn(2, 3, 16, 16, device="cuda")
    trt_model = torchtrt_ext.compile(conv_cuda, (x,), progress=False)
    restored = load(trt_model.save(tmp_path / "conv.engine"))
    assert torch.equal(restored(x), trt_model(x))


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_cuda_graphs_replay_older_graphs_across_profiles(conv_cuda: Conv) -> None:
    """Capture batch 2 (profile 0), then batch 8 (profile 1), then replay both in turn, with eager calls between."""
    trt_model = torchtrt_ext.compile(conv_cuda, (torch.randn(2, 3, 16, 16, device="cuda"),), profiles=TWO_PROFILES,
                                     cuda_graphs=True, progress=False)
    for batch in (2, 8, 2, 8, 3, 2, 16, 8):
        x = torch.randn(batch, 3, 16, 16, device="cuda")
        assert (trt_model(x) - conv_cuda(x)).abs().max().item() < 1e-3, batch


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_unaligned_and_default_stream_inputs(conv_cuda: Conv) -> None:
    """A contiguous slice 4 bytes into its storage (not 256-byte aligned), run from the legacy default stream."""
    trt_model = torchtrt_ext.compile(conv_cuda, (torch.randn(2, 3, 16, 16, device="cuda"),), progress=False)
    x = torch.randn(2 * 3 * 16 * 16 + 1, device="cuda")[1:].view(2, 3, 16, 16)
    assert x.is_contiguous() and x.data_ptr() % 256 == 4
    with torch.cuda.stream(torch.cuda.default_stream()):
        assert (trt_model(x) - conv_cuda(x)).abs().max().item() < 1e-3
