"""Loading an engine never runs code the user did not choose to run (issue 22).

An engine built with ``embed_plugins=True`` carries our plugin library in its plan; deserializing it runs that code.
Real engines here come from TensorRT-RTX's builder on the CPU. RTX cannot embed our library yet (issue 15), so the
"carries host code" engines of these tests are real RTX engines whose metadata says ``plugins_embedded``: the gate
reads only the metadata, and TensorRT itself refuses host code whenever the flag stays off. The Runtime whose
``engine_host_code_allowed`` is checked is TensorRT-RTX's real one (it exists without a GPU).
"""
from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import onnx
import pytest
import torch

import torchtrt_ext
from torchtrt_ext import cli
from torchtrt_ext.backend import Engine, build_engine
from torchtrt_ext.backend.adapter import load_backend
from torchtrt_ext.backend.plugin_plan import OpPlan, PluginPlan
from torchtrt_ext.cache import cached_build_engine
from torchtrt_ext.errors import ExitCode, HostCodeNotAllowedError, LibraryNotFoundError
from torchtrt_ext.ops import PluginRef
from torchtrt_ext.runtime import TRTModule, create_runtime

L2NORM_CPP = OpPlan(PluginRef("L2Norm", "1", "torchtrt_ext"), "cpp")  # the plan of an engine with our L2Norm plugin inside

OPT_IN = r"pass allow_engine_host_code=True \(CLI: --allow-engine-host-code\)"
PROFILE = {"x": ((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8))}


@pytest.fixture(scope="module")
def plain(rtx: str, conv_onnx: onnx.ModelProto) -> Engine:
    """A real TensorRT-RTX engine without host code."""
    return build_engine(conv_onnx, backend=rtx, progress=False, profiles=PROFILE)


@pytest.fixture(scope="module")
def carrying(plain: Engine) -> Engine:
    """The same engine as a file handed over by someone else would describe itself: plugins embedded."""
    return plain.with_metadata(plugins_embedded=True, plugin_plan=PluginPlan("cpp", ops=(L2NORM_CPP,)))


def test_every_entry_point_refuses_host_code_naming_the_opt_in(carrying: Engine, tmp_path: Path) -> None:
    path = carrying.save(tmp_path / "handed_over.engine")
    with pytest.raises(HostCodeNotAllowedError, match=f"engine file {path} carries host code.*{OPT_IN}"):
        torchtrt_ext.load(path)
    with pytest.raises(HostCodeNotAllowedError, match=f"carries host code.*{OPT_IN}"):
        TRTModule(carrying)
    state = TRTModule(carrying, allow_engine_host_code=True).state_dict()
    with pytest.raises(HostCodeNotAllowedError, match=f"the engine in this state_dict carries host code.*{OPT_IN}"):
        TRTModule().load_state_dict(state)
    assert TRTModule(allow_engine_host_code=True).load_state_dict(state) is not None


def test_refusal_comes_before_any_runtime_exists(rtx: str, carrying: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    api = load_backend(rtx)
    created: list[object] = []
    monkeypatch.setattr(api.trt, "Runtime", lambda *args: created.append(args))
    with pytest.raises(HostCodeNotAllowedError, match=OPT_IN):
        create_runtime(api, carrying.metadata, allow_engine_host_code=False, source="x.engine")
    assert created == []


def test_the_opt_in_reaches_the_real_runtime_flag(rtx: str, plain: Engine, carrying: Engine) -> None:
    api = load_backend(rtx)
    allowed = create_runtime(api, carrying.metadata, allow_engine_host_code=True, source="x.engine")
    assert isinstance(allowed, api.trt.Runtime) and allowed.engine_host_code_allowed is True
    # an engine without host code never turns the flag on, opt-in or not
    for opt_in in (False, True):
        runtime = create_runtime(api, plain.metadata, allow_engine_host_code=opt_in, source="x.engine")
        assert runtime.engine_host_code_allowed is False


def test_load_with_the_opt_in(carrying: Engine, tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("with a GPU, load() deserializes at once, which TensorRT-RTX cannot do with this stand-in plan")
    module = torchtrt_ext.load(carrying.save(tmp_path / "mine.engine"), allow_engine_host_code=True)
    assert module.allow_engine_host_code and module.metadata.plugins_embedded


def test_cli_inspect_needs_no_opt_in_and_run_commands_refuse(carrying: Engine, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = str(carrying.save(tmp_path / "handed_over.engine"))
    assert cli.main(["inspect", path]) == ExitCode.OK
    assert "carries host code (embedded plugin library): running it needs --allow-engine-host-code" in \
        capsys.readouterr().out
    model = "tests.cli.models:make_head"
    for argv in (["validate", model, path], ["bench", path, "--input-shape", "x:1x3x8x8"]):
        assert cli.main(argv) == ExitCode.USAGE
        err = capsys.readouterr().err
        assert "carries host code" in err and "--allow-engine-host-code" in err, err
    if not torch.cuda.is_available():  # with the opt-in, the next thing missing here is the GPU
        assert cli.main(["validate", model, path, "--allow-engine-host-code"]) == ExitCode.MISSING
        assert "needs a CUDA GPU" in capsys.readouterr().err


def _plant_host_code(cache_dir: Path) -> Path:
    """Rewrite the one cached engine so that it carries host code (as a file someone else put there would)."""
    (path,) = sorted(cache_dir.glob("*.engine"))
    engine = Engine.load(path)
    plan = dataclasses.replace(engine.metadata.plugin_plan, ops=(L2NORM_CPP,))  # needs torchtrt_ext::L2Norm:1
    engine.with_metadata(plugins_embedded=True, plugin_plan=plan).save(path)
    return path


def test_cached_host_code_nobody_asked_for_is_refused(rtx: str, conv_onnx: onnx.ModelProto,
                                                      isolated_cache: Path) -> None:
    cached_build_engine(conv_onnx, backend=rtx, progress=False, profiles=PROFILE)
    _plant_host_code(isolated_cache)
    hit = cached_build_engine(conv_onnx, backend=rtx, progress=False, profiles=PROFILE)
    assert hit.metadata.plugins_embedded
    with pytest.raises(HostCodeNotAllowedError, match=OPT_IN):
        TRTModule(hit)  # what compile(embed_plugins=False) does with it


def test_cached_host_code_of_another_user_is_rebuilt(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    cached_build_engine(conv_onnx, backend=rtx, progress=False, profiles=PROFILE)
    path = _plant_host_code(isolated_cache)
    monkeypatch.setattr(os, "getuid", lambda: path.stat().st_uid + 1)  # this process plays another user
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        rebuilt = cached_build_engine(conv_onnx, backend=rtx, progress=False, profiles=PROFILE)
    assert "carries host code (an embedded plugin library) and belongs to another user" in caplog.text
    assert not rebuilt.metadata.plugins_embedded and not Engine.load(path).metadata.plugins_embedded


def test_compile_with_embedding_runs_its_cached_engine_without_the_opt_in(
        rtx: str, monkeypatch: pytest.MonkeyPatch, isolated_cache: Path) -> None:
    """compile(embed_plugins=True) twice: the second call is a cache hit and needs no opt-in. The GPU steps are
    stand-ins (require_gpu gives the CPU, load_engine only creates the real RTX Runtime), since no GPU runs RTX here."""
    import importlib

    from torchtrt_ext import _native

    compile_module = importlib.import_module("torchtrt_ext.compile")  # the package's `compile` is the function

    if not load_backend(rtx).can_embed_plugins():
        pytest.skip("TensorRT-RTX does not embed plugin libraries in this version of torchtrt_ext (issue 15)")
    try:
        _native.plugin_library_path()  # the C++ library must be built
    except LibraryNotFoundError as exc:
        pytest.skip(f"the C++ plugin library is not built here: {exc}")
    flags: list[bool] = []

    def load_engine(self: TRTModule, device: object = None) -> None:
        runtime = create_runtime(load_backend(self.metadata.backend), self.metadata,
                                 allow_engine_host_code=self.allow_engine_host_code, source=repr(self.engine))
        flags.append(runtime.engine_host_code_allowed)

    monkeypatch.setattr(compile_module, "require_gpu", lambda what="": torch.device("cpu"))
    monkeypatch.setattr(TRTModule, "load_engine", load_engine)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torchtrt_ext.nn.L2Norm(1)).eval()
    for _ in range(2):
        torchtrt_ext.compile(model, torch.randn(2, 3, 8, 8), backend=rtx, plugins="cpp", embed_plugins=True,
                             validate=False, progress=False)
    assert len(list(isolated_cache.glob("*.engine"))) == 1 and flags == [True, True]
