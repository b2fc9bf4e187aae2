"""torchtrt_ext.deploy: Triton model repositories checked with Triton's own model-config schema, trtexec and ONNX
Runtime TensorRT-EP command lines, and the trt.plugins rewrite.

The config.pbtxt is parsed with ``inference.ModelConfig`` from tritonclient (``tritonclient/grpc/model_config_pb2.py``,
loaded from its file so grpcio is not needed; ``pip install tritonclient``); those tests skip with that hint where
tritonclient is missing. A Triton server is not installable from PyPI, so no test serves a repository for real.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import logging
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import onnx
import pytest
import torch

import torchtrt_ext
from torchtrt_ext import deploy
from torchtrt_ext.backend import BuildOptions, Engine, EngineMetadata, Profile, Target, TensorInfo
from torchtrt_ext.backend.plugin_plan import OpPlan, PluginPlan
from torchtrt_ext.errors import InvalidInputError, LibraryNotFoundError
from torchtrt_ext.ops import PluginRef

ROOT = Path(__file__).resolve().parents[1]


def triton_model_config() -> ModuleType:
    """Triton's model_config_pb2 (the ``inference.ModelConfig`` schema), or skip with the install hint."""
    spec = importlib.util.find_spec("tritonclient")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("tritonclient is not installed (pip install tritonclient): it ships Triton's model_config schema")
    path = Path(list(spec.submodule_search_locations)[0]) / "grpc" / "model_config_pb2.py"
    if "torchtrt_test_model_config_pb2" in sys.modules:
        return sys.modules["torchtrt_test_model_config_pb2"]
    module_spec = importlib.util.spec_from_file_location("torchtrt_test_model_config_pb2", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    sys.modules["torchtrt_test_model_config_pb2"] = module
    return module


def parse_config(text: str) -> Any:
    from google.protobuf import text_format

    pb2 = triton_model_config()
    return text_format.Parse(text, pb2.ModelConfig())  # strict: unknown fields or bad enums raise


def make_engine(*, batch: int = -1, dtype: str = "float32", plugins: tuple[str, ...] = ("L2Norm",),
                max_batch: int = 16) -> Engine:
    inputs = (TensorInfo("image", dtype, (batch, 3, 64, 64)), TensorInfo("scale", "float16", (batch, 1)))
    outputs = (TensorInfo("boxes", "float32", (batch, 8, -1)), TensorInfo("labels", "int64", (batch, 8)))
    lo = 1 if batch == -1 else batch
    hi = max_batch if batch == -1 else batch
    profile = Profile({"image": ((lo, 3, 64, 64), (lo, 3, 64, 64), (hi, 3, 64, 64)),
                       "scale": ((lo, 1), (lo, 1), (hi, 1))})
    meta = EngineMetadata(inputs=inputs, outputs=outputs, profiles=(profile,), options=BuildOptions(precision="fp16"),
                          target=Target("tensorrt", "10.13.0", "NVIDIA H200", "9.0"),
                          plugin_plan=PluginPlan("cpp" if plugins else "none",
                                                 ops=tuple(OpPlan(PluginRef(op, "1", "torchtrt_ext"), "cpp")
                                                           for op in plugins)))
    return Engine(b"\x01serialized-plan\x02" * 8, meta)


@pytest.fixture
def fake_lib(tmp_path: Path) -> Path:
    """A stand-in libtorchtrt_ext_plugins.so with its autoload companion beside it, as setup.py builds them."""
    lib = tmp_path / "build" / "libtorchtrt_ext_plugins.so"
    lib.parent.mkdir()
    lib.write_bytes(b"\x7fELF fake library exporting getCreators")
    (lib.parent / "libtorchtrt_ext_plugins_autoload.so").write_bytes(b"\x7fELF fake autoload: getPluginRegistry")
    return lib


@pytest.fixture
def no_built_libraries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """_native finds no library of its own (neither built in the package nor named by the environment)."""
    monkeypatch.setattr("torchtrt_ext._native._PACKAGE_LIB_DIR", tmp_path / "empty")
    for var in ("TORCHTRT_EXT_PLUGIN_LIB", "TORCHTRT_EXT_PLUGIN_AUTOLOAD_LIB"):
        monkeypatch.delenv(var, raising=False)


# ------------------------------------------------------------------------------------------------ config.pbtxt
def test_config_matches_metadata_under_tritons_schema(tmp_path: Path, fake_lib: Path) -> None:
    engine = make_engine()
    repo = deploy.triton_repository(engine, tmp_path / "models", "detector", max_batch_size=16,
                                    plugin_library=fake_lib, preferred_batch_sizes=[4, 8], print_command=False)
    config = parse_config(repo.config_path.read_text())
    assert config.name == "detector" and config.platform == "tensorrt_plan" and config.max_batch_size == 16
    pb2 = triton_model_config()
    got = [(i.name, pb2.DataType.Name(i.data_type), list(i.dims)) for i in config.input]
    assert got == [("image", "TYPE_FP32", [3, 64, 64]), ("scale", "TYPE_FP16", [1])]
    got = [(o.name, pb2.DataType.Name(o.data_type), list(o.dims)) for o in config.output]
    assert got == [("boxes", "TYPE_FP32", [8, -1]), ("labels", "TYPE_INT64", [8])]
    assert config.HasField("dynamic_batching")
    assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]
    assert config.instance_group[0].count == 1
    assert repo.plan_path == (tmp_path / "models" / "detector" / "1" / "model.plan").resolve()
    assert repo.plan_path.read_bytes() == engine.plan  # the bare plan, not the metadata container


def test_no_batching_keeps_full_dims_and_drops_dynamic_batching(tmp_path: Path) -> None:
    engine = make_engine(batch=2, plugins=())
    repo = deploy.triton_repository(engine, tmp_path, "static", max_batch_size=0, print_command=False)
    config = parse_config(repo.config_text)
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    assert [list(i.dims) for i in config.input] == [[2, 3, 64, 64], [2, 1]]
    assert repo.plugin_library is None and repo.command == f"tritonserver --model-repository={tmp_path.resolve()}"


def test_static_batch_with_batching_is_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"input 'image' has shape \[2, 3, 64, 64\].*no dynamic batch "
                                                r"dimension.*Remedy: pass max_batch_size=0"):
        deploy.triton_config(make_engine(batch=2), "m", max_batch_size=8)


def test_max_batch_beyond_the_profiles_is_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"max_batch_size=64 is outside the engine's profiles \(image: batch "
                                                r"1\.\.16.*Remedy: pass a smaller max_batch_size"):
        deploy.triton_config(make_engine(), "m", max_batch_size=64)


def test_unknown_dtype_is_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"input 'image' has dtype 'float8_e4m3fn'"):
        deploy.triton_config(make_engine(dtype="float8_e4m3fn"), "m", max_batch_size=4)


def triton_io_errors(config: Any) -> list[str]:
    """Triton's own rules for an input's or output's shape (``ValidateIOShape`` in the server's
    ``model_config_utils.cc``): dims are never empty, each dim is >= 1 or -1, and an empty ``reshape`` is allowed only
    with max_batch_size > 0 (with batching, ``dims: [ 1 ]`` + ``reshape: { shape: [ ] }`` is a per-sample scalar)."""
    errors = []
    for io in [*config.input, *config.output]:
        if not io.dims:
            errors.append(f"{io.name}: must specify 'dims'")
        if io.HasField("reshape") and not io.reshape.shape and config.max_batch_size == 0:
            errors.append(f"{io.name}: cannot have empty reshape for non-batching model")
        if any(d < 1 and d != -1 for d in io.dims):
            errors.append(f"{io.name}: dimension must be integer >= 1, or -1")
    return errors


def make_scalar_engine(batch: int = -1) -> Engine:
    shape: tuple[int, ...] = (batch,) if batch == -1 else ()
    meta = EngineMetadata(inputs=(TensorInfo("x", "float32", (batch, 4)),), outputs=(TensorInfo("score", "float32",
                          shape),), profiles=(Profile({"x": ((1, 4), (1, 4), (8, 4))}),), options=BuildOptions(),
                          target=Target("tensorrt", "10.13.0"), plugin_plan=PluginPlan("none"))
    return Engine(b"plan", meta)


def test_per_sample_scalar_output_follows_tritons_dims_rules() -> None:
    """An output of shape [B] is dims [1] reshaped to [] (issue 33, item 8): Triton rejects ``dims: [ ]``."""
    config = parse_config(deploy.triton_config(make_scalar_engine(), "m", max_batch_size=8))
    assert triton_io_errors(config) == []
    (score,) = config.output
    assert list(score.dims) == [1] and score.HasField("reshape") and list(score.reshape.shape) == []
    assert not config.input[0].HasField("reshape")  # only where the batch is the only dim
    assert triton_io_errors(parse_config(deploy.triton_config(make_engine(), "m", max_batch_size=8))) == []


def test_rank_zero_output_without_batching_is_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"output 'score' is a scalar.*Triton.*Remedy: .*max_batch_size"):
        deploy.triton_config(make_scalar_engine(batch=1), "m", max_batch_size=0)


def test_rtx_plan_says_tritons_tensorrt_backend_cannot_load_it(caplog: pytest.LogCaptureFixture) -> None:
    engine = make_engine(plugins=())
    target = dataclasses.replace(engine.metadata.target, backend="tensorrt_rtx")
    rtx = Engine(engine.plan, dataclasses.replace(engine.metadata, target=target))
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext.deploy"):
        deploy.triton_config(engine, "m", max_batch_size=4)
        assert not caplog.records
        deploy.triton_config(rtx, "m", max_batch_size=4)
    assert re.search(r"TensorRT-RTX plan.*Triton.s TensorRT backend.*cannot load it.*backend='tensorrt'",
                     caplog.text), caplog.text


# -------------------------------------------------------------------------------------------- plugin library
def test_plugin_libraries_copied_and_loaded_through_backend_config(tmp_path: Path, fake_lib: Path,
                                                                   caplog: pytest.LogCaptureFixture,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext.deploy"):
        repo = deploy.triton_repository(make_engine(), tmp_path / "repo", "det", max_batch_size=8,
                                        plugin_library=fake_lib)
    model_dir = (tmp_path / "repo" / "det").resolve()
    main, autoload = model_dir / "libtorchtrt_ext_plugins.so", model_dir / "libtorchtrt_ext_plugins_autoload.so"
    assert repo.plugin_files == (main, autoload)
    assert main.read_bytes() == fake_lib.read_bytes()
    assert autoload.read_bytes() == (fake_lib.parent / autoload.name).read_bytes()
    # the backend dlopens the autoload library, which registers the creators of the plugin library beside it
    assert repo.plugin_library == autoload and repo.plugin_registers_on_load is True
    assert repo.command == (f"tritonserver --model-repository={(tmp_path / 'repo').resolve()} "
                            f"--backend-config=tensorrt,plugins={autoload}")
    assert "LD_PRELOAD" not in repo.command
    assert capsys.readouterr().out.strip() == repo.command
    assert caplog.text == ""


def test_backend_config_is_quoted_for_the_shell(tmp_path: Path, fake_lib: Path) -> None:
    repo = deploy.triton_repository(make_engine(), tmp_path / "my models", "det", max_batch_size=8,
                                    plugin_library=fake_lib, print_command=False)
    autoload = (tmp_path / "my models" / "det" / "libtorchtrt_ext_plugins_autoload.so").resolve()
    assert repo.command.endswith(f"'--backend-config=tensorrt,plugins={autoload}'")


def test_autoload_library_given_ships_the_plugin_library_beside_it(tmp_path: Path, fake_lib: Path) -> None:
    given = fake_lib.parent / "libtorchtrt_ext_plugins_autoload.so"
    repo = deploy.triton_repository(make_engine(), tmp_path / "repo", "det", max_batch_size=8, plugin_library=given,
                                    print_command=False)
    assert [p.name for p in repo.plugin_files] == ["libtorchtrt_ext_plugins.so", "libtorchtrt_ext_plugins_autoload.so"]
    assert repo.plugin_library is not None and repo.plugin_library.name == given.name
    fake_lib.unlink()
    with pytest.raises(LibraryNotFoundError, match=r"loads libtorchtrt_ext_plugins.so from its own folder.*Remedy:"):
        deploy.triton_repository(make_engine(), tmp_path / "repo2", "det", max_batch_size=8, plugin_library=given,
                                 print_command=False)


def test_plugin_library_without_its_autoload_companion_is_refused(tmp_path: Path, fake_lib: Path,
                                                                  no_built_libraries: None) -> None:
    (fake_lib.parent / "libtorchtrt_ext_plugins_autoload.so").unlink()
    with pytest.raises(LibraryNotFoundError, match=r"Triton's TensorRT backend \(plugins=\) only loads libraries "
                                                   r"\(dlopen\).*libtorchtrt_ext_plugins_autoload.so.*Remedy: rebuild "
                                                   r"with TensorRT headers"):
        deploy.triton_repository(make_engine(), tmp_path / "repo", "det", max_batch_size=8, plugin_library=fake_lib,
                                 print_command=False)


def test_package_autoload_library_serves_a_plugin_library_given_elsewhere(tmp_path: Path, fake_lib: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    companion = fake_lib.parent / "libtorchtrt_ext_plugins_autoload.so"
    package = tmp_path / "package_lib"
    package.mkdir()
    companion.rename(package / companion.name)
    monkeypatch.setenv("TORCHTRT_EXT_PLUGIN_AUTOLOAD_LIB", str(package))
    plugins = deploy.dlopen_plugin_libraries(fake_lib)
    assert plugins.load == package / companion.name and plugins.files == (fake_lib, package / companion.name)


def test_self_registering_library_gives_no_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lib = tmp_path / "libself.so"
    lib.write_bytes(b"\x7fELF ... getPluginRegistry ...")
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext.deploy"):
        repo = deploy.triton_repository(make_engine(), tmp_path / "r", "m", max_batch_size=4, plugin_library=lib,
                                        print_command=False)
    assert repo.plugin_registers_on_load is True and caplog.text == ""
    assert repo.plugin_files == (repo.plugin_library,) and repo.command.endswith(f"plugins={repo.plugin_library}")


def test_foreign_library_registering_only_through_getcreators_warns(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    lib = tmp_path / "libother_plugins.so"
    lib.write_bytes(b"\x7fELF ... getCreators ...")
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext.deploy"):
        repo = deploy.triton_repository(make_engine(), tmp_path / "r", "m", max_batch_size=4, plugin_library=lib,
                                        print_command=False)
    assert repo.plugin_registers_on_load is False
    assert "registers its plugin creators through getCreators" in caplog.text and "plugins=" in caplog.text


def test_missing_plugin_library_names_the_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHTRT_EXT_PLUGIN_LIB", str(tmp_path / "nowhere" / "libx.so"))
    monkeypatch.setattr("torchtrt_ext._native._PACKAGE_LIB_DIR", tmp_path / "empty")
    with pytest.raises(LibraryNotFoundError, match=r"needs the plugins \['torchtrt_ext::L2Norm:1'\].*Remedy: pass "
                                                   r"plugin_library=\.\.\., or rebuild the engine with "
                                                   r"plugins='decompose'"):
        deploy.triton_repository(make_engine(), tmp_path, "m", max_batch_size=4, print_command=False)


def test_engine_file_path_is_accepted(tmp_path: Path, fake_lib: Path) -> None:
    path = make_engine().save(tmp_path / "det.engine")
    repo = deploy.triton_repository(path, tmp_path / "repo", "det", max_batch_size=4, plugin_library=fake_lib,
                                    print_command=False)
    assert repo.plan_path.read_bytes() == make_engine().plan


@pytest.mark.skipif(not (ROOT / "torchtrt_ext" / "lib" / "libtorchtrt_ext_plugins.so").is_file(),
                    reason="libtorchtrt_ext_plugins.so is not built here (needs nvcc and TensorRT headers)")
def test_the_built_libraries_register_as_deployed() -> None:
    """Deployment facts of the real libraries: the plugin library registers only through getCreators, its autoload
    companion beside it registers when loaded, and that pair is what a dlopen-only loader gets."""
    lib = ROOT / "torchtrt_ext" / "lib" / "libtorchtrt_ext_plugins.so"
    autoload = lib.parent / "libtorchtrt_ext_plugins_autoload.so"
    assert b"getCreators" in lib.read_bytes()
    assert not deploy.plugin_library_registers_on_load(lib)
    assert deploy.plugin_library_registers_on_load(autoload)
    plugins = deploy.dlopen_plugin_libraries(lib)
    assert plugins.load == autoload and plugins.files == (lib, autoload) and plugins.registers_on_load


# ---------------------------------------------------------------------------------------------------- trtexec
def test_trtexec_command(tmp_path: Path) -> None:
    plan = deploy.export_plan(make_engine(), tmp_path / "model.plan")
    assert plan.read_bytes() == make_engine().plan
    assert deploy.trtexec_command(plan, "/opt/lib/libtorchtrt_ext_plugins.so") == (
        f"trtexec --loadEngine={plan} --staticPlugins=/opt/lib/libtorchtrt_ext_plugins.so")
    assert deploy.trtexec_command(plan, extra=["--shapes=image:4x3x64x64"]) == (
        f"trtexec --loadEngine={plan} --shapes=image:4x3x64x64")


def test_trtexec_refuses_our_engine_container(tmp_path: Path) -> None:
    path = make_engine().save(tmp_path / "det.engine")
    with pytest.raises(InvalidInputError, match=r"is a torchtrt_ext engine file.*Remedy: write it with "
                                                r"torchtrt_ext\.deploy\.export_plan"):
        deploy.trtexec_command(path)


# ------------------------------------------------------------------------------------------ ONNX Runtime TRT EP
class Head(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)
        self.norm = torchtrt_ext.nn.L2Norm(dim=1, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(x))


def test_to_ort_trt_plugins_moves_our_nodes_and_keeps_attributes(tmp_path: Path) -> None:
    model = torchtrt_ext.export_onnx(Head().eval(), (torch.randn(2, 3, 8, 8),))
    converted = deploy.export_for_ort_trt(Head().eval(), (torch.randn(2, 3, 8, 8),), tmp_path / "ort.onnx")
    ours = [n for n in converted.graph.node if n.op_type == "L2Norm"]
    assert [n.domain for n in ours] == ["trt.plugins"]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in ours[0].attribute}
    assert attrs["axis"] == 1 and attrs["eps"] == pytest.approx(1e-5)
    assert attrs["plugin_version"] == b"1" and attrs["plugin_namespace"] == b"torchtrt_ext"
    domains = {e.domain: e.version for e in converted.opset_import}
    assert domains.get("trt.plugins") == 1 and "torchtrt_ext" not in domains
    assert not any(n.domain == "torchtrt_ext" for n in converted.graph.node)
    assert any(n.domain == "torchtrt_ext" for n in model.graph.node)  # the input is not modified
    onnx.checker.check_model(onnx.load(str(tmp_path / "ort.onnx")))


def test_ort_trt_providers(fake_lib: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext.deploy"):
        providers = deploy.ort_trt_providers(fake_lib, trt_options={"trt_fp16_enable": True})
    name, options = providers[0]
    assert name == "TensorrtExecutionProvider"
    # the EP only dlopens: it gets the library that registers the creators when loaded
    autoload = (fake_lib.parent / "libtorchtrt_ext_plugins_autoload.so").resolve()
    assert options == {"device_id": 0, "trt_extra_plugin_lib_paths": str(autoload), "trt_fp16_enable": True}
    assert providers[1:] == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert caplog.text == ""
    with pytest.raises(LibraryNotFoundError, match="does not exist"):
        deploy.ort_trt_providers(fake_lib.parent / "missing.so")


def test_ort_trt_providers_without_the_autoload_library(fake_lib: Path, no_built_libraries: None) -> None:
    (fake_lib.parent / "libtorchtrt_ext_plugins_autoload.so").unlink()
    with pytest.raises(LibraryNotFoundError, match=r"ONNX Runtime's trt_extra_plugin_lib_paths only loads libraries"):
        deploy.ort_trt_providers(fake_lib)


# ------------------------------------------------------------------------------------------ a real engine (RTX)
@pytest.fixture(scope="module")
def rtx_engine() -> Engine:
    if importlib.util.find_spec("tensorrt_rtx") is None:
        pytest.skip("tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')")
    from torchtrt_ext.backend import build_engine

    onnx_model = torchtrt_ext.export_onnx(Head().eval(), (torch.randn(2, 3, 8, 8),))
    return build_engine(onnx_model, backend="tensorrt_rtx", plugins="decompose", progress=False, max_batch=8)


def test_real_engine_repository_parses_and_matches(tmp_path: Path, rtx_engine: Engine) -> None:
    repo = deploy.triton_repository(rtx_engine, tmp_path, "head", max_batch_size=8, print_command=False)
    config = parse_config(repo.config_text)
    meta = rtx_engine.metadata
    assert [(i.name, list(i.dims)) for i in config.input] == [(t.name, list(t.shape[1:])) for t in meta.inputs]
    assert [(o.name, list(o.dims)) for o in config.output] == [(t.name, list(t.shape[1:])) for t in meta.outputs]
    assert {triton_model_config().DataType.Name(x.data_type) for x in [*config.input, *config.output]} == {"TYPE_FP32"}
    assert repo.plugin_library is None and repo.plugin_files == ()  # decomposed: no plugin library to load
    assert repo.plan_path.read_bytes() == rtx_engine.plan
    with pytest.raises(InvalidInputError, match="outside the engine's profiles"):
        deploy.triton_config(rtx_engine, "head", max_batch_size=9)

