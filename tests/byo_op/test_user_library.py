"""Bring your own op, end to end on TensorRT-RTX's real registry, parser and builder: the user's autograd.Function with
``symbolic`` and the user's IPluginV3 library (tests/byo_op) go through export, build, cache key, metadata and the
load-time check (torchtrt_ext.backend.user_libraries, runtime.check_plugin_libraries)."""
from __future__ import annotations

import platform
import shutil
from pathlib import Path

import onnx
import pytest
import torch

import torchtrt_ext
from tests.byo_op.conftest import ConvScale2
from torchtrt_ext import deploy, doctor
from torchtrt_ext.backend.builder import plan_build
from torchtrt_ext.backend.options import BuildOptions
from torchtrt_ext.backend.plugin_plan import UserOpPlan
from torchtrt_ext._files import file_sha256
from torchtrt_ext.backend.user_libraries import UserLibrary, check_library_file
from torchtrt_ext.cache import cache_keys
from torchtrt_ext.errors import EngineCompatibilityError, InvalidInputError, LibraryNotFoundError, OnnxParseError
from torchtrt_ext.runtime import TRTModule, check_plugin_libraries

pytestmark = pytest.mark.trt_headers
NAME = "libmycorp_plugins.so"


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return torchtrt_ext.export_onnx(ConvScale2().eval(), (torch.randn(1, 3, 8, 8),))


@pytest.fixture(scope="module")
def engine(rtx: str, model: onnx.ModelProto, mycorp_library: Path) -> torchtrt_ext.Engine:
    return torchtrt_ext.build_engine(model, backend=rtx, plugin_libraries=[mycorp_library], progress=False)


def other_bytes(library: Path, folder: Path) -> Path:
    """The same library under the same name with one byte more (still loadable, another SHA-256)."""
    folder.mkdir(exist_ok=True)
    copy = folder / library.name
    shutil.copyfile(library, copy)
    with open(copy, "ab") as handle:
        handle.write(b"\0")
    return copy


def test_rtx_builds_the_users_node_with_the_users_library(engine: torchtrt_ext.Engine, mycorp_library: Path) -> None:
    assert b"Scale2" in engine.plan and b"mycorp" in engine.plan  # the plugin's name and namespace are serialized
    assert engine.metadata.plugin_plan.user_ops == (UserOpPlan("Scale2", "1", "mycorp", NAME),)
    assert engine.metadata.options.plugin_libraries == (UserLibrary(NAME, file_sha256(mycorp_library)),)
    record = engine.to_bytes()
    assert f'"plugin_libraries":[{{"name":"{NAME}","sha256":"{file_sha256(mycorp_library)}"}}]'.encode() in record
    assert str(mycorp_library.parent).encode() not in record  # the name and hash, never the build machine's path


def test_the_cache_key_changes_with_the_librarys_bytes(rtx: str, model: onnx.ModelProto, mycorp_library: Path,
                                                       tmp_path: Path) -> None:
    build = plan_build(model, BuildOptions.of(backend=rtx, plugin_libraries=[mycorp_library]))

    def key(library: Path) -> tuple[str, str]:
        return cache_keys(build.model, BuildOptions.of(backend=rtx, plugin_libraries=[library]), build.target, None)

    same_bytes = tmp_path / "elsewhere" / NAME
    same_bytes.parent.mkdir()
    shutil.copyfile(mycorp_library, same_bytes)
    assert key(same_bytes) == key(mycorp_library)  # the path is not part of the key
    assert key(mycorp_library) == cache_keys(build.model, build.options, build.target, None)
    changed = other_bytes(mycorp_library, tmp_path / "changed")
    assert key(changed)[0] != key(mycorp_library)[0]
    with pytest.raises(LibraryNotFoundError, match=r"another libmycorp_plugins\.so \(sha256 \w+\.\.\.\) is in "
                                                   r"tensorrt_rtx's plugin registry of this process already"):
        plan_build(model, BuildOptions.of(backend=rtx, plugin_libraries=[changed]))


def test_loading_needs_the_library_named_with_the_recorded_hash(engine: torchtrt_ext.Engine, mycorp_library: Path,
                                                                tmp_path: Path) -> None:
    recorded = f"{NAME} \\(sha256 {file_sha256(mycorp_library)[:12]}\\.\\.\\.\\)"
    with pytest.raises(EngineCompatibilityError, match=rf"built with the plugin library {recorded}, which was not "
                                                       r"given.*plugin_libraries=\[path to " + NAME):
        TRTModule(engine)
    changed = other_bytes(mycorp_library, tmp_path)
    with pytest.raises(EngineCompatibilityError, match=rf"{recorded}, and a different file was given \({NAME}"):
        TRTModule(engine, plugin_libraries=[changed])
    path = engine.save(tmp_path / "scale2.engine")
    with pytest.raises(EngineCompatibilityError, match=recorded):
        torchtrt_ext.load(path)
    (library,) = check_plugin_libraries(engine.metadata, [mycorp_library])
    assert library.path == mycorp_library.resolve()
    assert TRTModule(engine, plugin_libraries=[mycorp_library]).plugin_libraries == (mycorp_library,)


def test_embedded_the_library_needs_no_name_at_load(rtx: str, model: onnx.ModelProto, mycorp_library: Path,
                                                    engine: torchtrt_ext.Engine) -> None:
    embedded = torchtrt_ext.build_engine(model, backend=rtx, plugin_libraries=[mycorp_library], embed_plugins=True,
                                         progress=False)
    assert embedded.metadata.plugins_embedded
    assert len(embedded.plan) > len(engine.plan) + mycorp_library.stat().st_size // 2  # the library is in the plan
    assert check_plugin_libraries(embedded.metadata, None) == ()


def test_a_file_the_registry_cannot_load_is_named(mycorp_library: Path, tmp_path: Path) -> None:
    text = tmp_path / "libnotes.so"
    text.write_text("not a library")
    with pytest.raises(LibraryNotFoundError, match=rf"plugin library {text} is not a shared library"):
        check_library_file(text)
    kernels = torchtrt_ext._native.kernels_library_path()
    with pytest.raises(LibraryNotFoundError, match=rf"{kernels} does not export getCreators, setLoggerFinder"):
        check_library_file(kernels)
    foreign = tmp_path / NAME
    data = bytearray(mycorp_library.read_bytes())
    data[18:20] = (183 if platform.machine() != "aarch64" else 62).to_bytes(2, "little")
    foreign.write_bytes(bytes(data))
    here = platform.machine()
    with pytest.raises(LibraryNotFoundError, match=rf"{foreign} is built for \w+, this machine is {here}"):
        check_library_file(foreign)
    with pytest.raises(InvalidInputError, match=r"plugin library .*missing\.so does not exist"):
        BuildOptions.of(plugin_libraries=[tmp_path / "missing.so"])


def test_the_doctor_lists_each_librarys_creators_and_the_nodes_they_serve(rtx: str, model: onnx.ModelProto,
                                                                          mycorp_library: Path) -> None:
    served = doctor.report(model, backend=rtx, plugin_libraries=[mycorp_library])
    assert served.ok and served.libraries == {NAME: {("Scale2", "1", "mycorp"): ["/Scale2"]}}
    assert f"plugin library {NAME}: mycorp::Scale2 v1 (serves /Scale2)" in served.to_table()
    (finding,) = [f for f in served.findings if f.op_type == "Scale2"]
    assert (finding.status, finding.detail) == ("plugin available", f"plugin Scale2 v1 (mycorp): {NAME}")
    unserved = doctor.report(model, backend=rtx)
    (problem,) = unserved.problems
    assert problem.status == "unknown custom op" and "plugin_libraries=[path]" in problem.remedies[-1]


def test_deploy_ships_and_names_the_users_library(engine: torchtrt_ext.Engine, mycorp_library: Path,
                                                  tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(EngineCompatibilityError, match=rf"built with the plugin library {NAME}"):
        deploy.triton_repository(engine, tmp_path / "refused", "scale2", max_batch_size=8, print_command=False)
    repo = deploy.triton_repository(engine, tmp_path / "models", "scale2", max_batch_size=8, print_command=False,
                                    plugin_libraries=[mycorp_library])
    shipped = tmp_path / "models" / "scale2" / NAME
    assert repo.user_libraries == (shipped,) and shipped.read_bytes() == mycorp_library.read_bytes()
    assert repo.command.endswith(f"--backend-config=tensorrt,plugins={shipped}")
    # Triton only dlopens: a library registering through getCreators alone is shipped with a warning saying so
    assert "registers its plugin creators through getCreators" in caplog.text
    plan = deploy.export_plan(engine, tmp_path / "model.plan")
    assert deploy.trtexec_command(plan, plugin_libraries=[mycorp_library]) == \
        f"trtexec --loadEngine={plan} --staticPlugins={mycorp_library}"


def test_a_state_dict_restores_only_into_a_module_naming_the_library(engine: torchtrt_ext.Engine,
                                                                      mycorp_library: Path) -> None:
    state = TRTModule(engine, plugin_libraries=[mycorp_library]).state_dict()
    restored = TRTModule(plugin_libraries=[mycorp_library])
    restored.load_state_dict(state)
    assert restored.engine.metadata == engine.metadata
    with pytest.raises(EngineCompatibilityError, match=rf"built with the plugin library {NAME}"):
        TRTModule().load_state_dict(state)
