"""Engine cache: hits without building, corrupted files rebuilt, mismatched machines reported, concurrent builders."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import onnx
import pytest

from torchtrt_ext import cache as engine_cache
from torchtrt_ext.backend import Engine
from torchtrt_ext.backend.engine import canonical_json
from torchtrt_ext.backend import builder as builder_module
from torchtrt_ext.backend.options import BuildOptions, Target
from torchtrt_ext import _native
from torchtrt_ext.cache import cached_build_engine, default_cache_dir, resolve_cache_dir
from torchtrt_ext.errors import LibraryNotFoundError

REPO = Path(__file__).resolve().parents[1]


def _engines(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.engine"))


def _forbid_building(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_builder(*args: object, **kwargs: object) -> None:
        raise AssertionError("the TensorRT builder was invoked on what should be a cache hit")

    monkeypatch.setattr(builder_module, "engine_from_network", no_builder)


def test_second_identical_call_is_a_cache_hit(rtx: str, l2norm_onnx: onnx.ModelProto, isolated_cache: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    first = cached_build_engine(l2norm_onnx, backend=rtx, plugins="decompose", progress=False)
    assert len(_engines(isolated_cache)) == 1 and first.metadata.plugin_mode == "decompose"
    _forbid_building(monkeypatch)
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        second = cached_build_engine(l2norm_onnx, backend=rtx, plugins="decompose", progress=False)
    assert "engine cache hit" in caplog.text
    assert second.plan == first.plan and second.metadata_bytes == first.metadata_bytes


def test_other_settings_are_other_keys(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path) -> None:
    cached_build_engine(conv_onnx, backend=rtx, progress=False)
    cached_build_engine(conv_onnx, backend=rtx, progress=False, profiles={"x": ((1, 3, 8, 8),) * 3})
    assert len(_engines(isolated_cache)) == 2


def test_corrupted_cache_file_is_rebuilt_not_loaded(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    good = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    (path,) = _engines(isolated_cache)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the plan
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        rebuilt = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert "is corrupted (" in caplog.text and "checksum mismatch" in caplog.text and "rebuilding" in caplog.text
    assert f"({path} is not a valid torchtrt_ext engine file: checksum mismatch" in caplog.text  # the file, named
    assert Engine.load(path).metadata == good.metadata  # the file is valid again
    assert rebuilt.metadata == good.metadata

    path.write_bytes(path.read_bytes()[:100])  # truncated
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert "sizes in the header" in caplog.text
    Engine.load(path)



@pytest.mark.parametrize("change, logged", [
    (lambda m: m["target"].pop("trt_version"),
     "engine file: engine metadata does not parse (KeyError: 'trt_version')); deleting"),
    (lambda m: m.pop("format_version"), "engine file: engine metadata without a format_version); deleting"),
    (lambda m: m.update(format_version=1), "was written by another torchtrt_ext (engine metadata format 1"),
], ids=["a key missing", "no format_version", "another format"])
def test_cached_metadata_that_does_not_parse_is_rebuilt(change: Any, logged: str, rtx: str,
                                                        conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """A file with a valid checksum whose metadata misses a key or is of another format is a miss (rebuilt and
    replaced), not a crash of the build that finds it."""
    good = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    (path,) = _engines(isolated_cache)
    data = json.loads(good.metadata_bytes)
    change(data)
    Engine(good.plan, good.metadata, _metadata_bytes=canonical_json(data)).save(path)
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        rebuilt = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert logged in caplog.text and "rebuilding" in caplog.text
    assert rebuilt.metadata == good.metadata and Engine.load(path).metadata == good.metadata

def test_engine_for_another_machine_is_reported_plainly_and_rebuilt(rtx: str, conv_onnx: onnx.ModelProto,
                                                                     isolated_cache: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    cached_build_engine(conv_onnx, backend=rtx, progress=False)
    (path,) = _engines(isolated_cache)
    engine = Engine.load(path)
    # the same key's file, but its content claims another GPU and TensorRT version (e.g. copied from another box)
    engine.with_metadata(target=Target(engine.metadata.backend, "0.9.0", "NVIDIA H200", "9.0", "ab" * 32)).save(path)
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        rebuilt = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert ("was built for tensorrt_rtx 0.9.0 on NVIDIA H200 (compute capability 9.0), plugin library abababababab, "
            "but this machine has tensorrt_rtx") in caplog.text and "rebuilding" in caplog.text
    gpu_name, cc = builder_module.current_gpu()
    here = "no GPU" if cc is None else f"{gpu_name} (compute capability {cc})"
    assert f"this machine has tensorrt_rtx {rebuilt.metadata.trt_version} on {here}; rebuilding" in caplog.text
    assert rebuilt.metadata.trt_version != "0.9.0"
    assert Engine.load(path).metadata.trt_version == rebuilt.metadata.trt_version


def test_sibling_engine_of_another_machine_is_mentioned(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    cached_build_engine(conv_onnx, backend=rtx, progress=False)
    (path,) = _engines(isolated_cache)
    model_key = path.name.split("-")[0]
    engine = Engine.load(path)
    other = engine.with_metadata(target=dataclasses.replace(engine.metadata.target, gpu_name="NVIDIA H200",
                                                            compute_capability="9.0"))
    other.save(isolated_cache / f"{model_key}-0000000000000000.engine")
    (isolated_cache / f"{model_key}-0000.engine").write_bytes(b"unreadable")  # listed first, skipped
    path.unlink()
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert "an engine of this model exists for tensorrt_rtx" in caplog.text and "NVIDIA H200" in caplog.text


def test_cache_switches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TORCHTRT_EXT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "torchtrt_ext"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path(os.path.expanduser("~")) / ".cache" / "torchtrt_ext"
    monkeypatch.setenv("TORCHTRT_EXT_CACHE_DIR", str(tmp_path / "mine"))
    assert resolve_cache_dir(True) == tmp_path / "mine"
    assert resolve_cache_dir(tmp_path / "explicit") == tmp_path / "explicit"
    assert resolve_cache_dir(False) is None
    monkeypatch.setenv("TORCHTRT_EXT_CACHE", "0")
    assert resolve_cache_dir(True) is None
    for off in ("off", "FALSE", " No "):  # any case, surrounding spaces ignored
        monkeypatch.setenv("TORCHTRT_EXT_CACHE", off)
        assert default_cache_dir() is None, off
    monkeypatch.setenv("TORCHTRT_EXT_CACHE", "1")
    assert default_cache_dir() == tmp_path / "mine"


def test_disabled_cache_always_builds(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = builder_module.engine_from_network

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builder_module, "engine_from_network", counting)
    tree = {"type": "tensor", "index": 0}
    for _ in range(2):
        engine = cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=False, output_tree=tree)
        assert engine.metadata.output_tree == tree  # what the caller asked for reaches the build
    assert len(calls) == 2 and not isolated_cache.exists()


def test_two_processes_building_one_key_build_it_once_and_leave_one_valid_file(real_engine: Engine,
                                                                               conv_onnx: onnx.ModelProto,
                                                                               tmp_path: Path) -> None:
    """The builders of one key take an exclusive lock: of two processes asking at once, one builds and the other
    waits and loads its file. Each process's build is a stand-in that waits for a second builder to show up (after
    both processes are ready, up to 10 s): two builders inside the lock at once (a shared lock, or none) both build."""
    model_path = tmp_path / "conv.onnx"
    onnx.save(conv_onnx, str(model_path))
    engine_path = real_engine.save(tmp_path / "real.engine")
    folder, marks = tmp_path / "shared_cache", tmp_path / "marks"
    marks.mkdir()
    script = textwrap.dedent(f"""
        import os, time
        from pathlib import Path
        from torchtrt_ext.backend import Engine, builder
        from torchtrt_ext.cache import cached_build_engine

        marks = Path({str(marks)!r})

        def wait_for(pattern, count, seconds):
            deadline = time.monotonic() + seconds
            while len(list(marks.glob(pattern))) < count and time.monotonic() < deadline:
                time.sleep(0.05)

        def stand_in(build, *, output_tree=None, **options):
            (marks / f"building-{{os.getpid()}}").touch()
            wait_for("ready-*", 2, 120)
            wait_for("building-*", 2, 10)
            print("built")
            return Engine.load({str(engine_path)!r}).with_metadata(options=build.options, target=build.target)

        builder.build_from_plan = stand_in
        (marks / f"ready-{{os.getpid()}}").touch()
        engine = cached_build_engine({str(model_path)!r}, backend="tensorrt_rtx", progress=False,
                                     cache={str(folder)!r})
        print("plan", len(engine.plan))
    """)
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outs):
        assert proc.returncode == 0, err[-2000:]
        assert out.splitlines()[-1] == f"plan {len(real_engine.plan)}"
    assert sum(out.splitlines().count("built") for out, _ in outs) == 1, "both processes built the engine"
    engines = _engines(folder)
    assert len(engines) == 1
    Engine.load(engines[0])  # valid (checksum verified)
    leftovers = [p.name for p in folder.iterdir() if p.suffix not in (".engine", ".lock")]
    assert leftovers == []


def test_two_threads_building_one_key_build_it_once(real_engine: Engine, rtx: str, conv_onnx: onnx.ModelProto,
                                                    isolated_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock in one process too (each builder opens the lock file itself, and flock locks per open file): the
    stand-in build waits up to 5 s for a second builder; with the exclusive lock none comes, and the second thread
    loads the first one's file. The in-process form of the test above, which the mutation run can see."""
    import threading

    inside: list[str] = []
    second = threading.Event()

    def stand_in(build: builder_module.BuildPlan, **options: object) -> Engine:
        inside.append(threading.current_thread().name)
        if len(inside) == 2:
            second.set()
        second.wait(5)
        return real_engine.with_metadata(options=build.options, target=build.target)

    monkeypatch.setattr(builder_module, "build_from_plan", stand_in)
    results: dict[str, Engine] = {}

    def ask() -> None:
        results[threading.current_thread().name] = cached_build_engine(conv_onnx, backend=rtx, progress=False)

    threads = [threading.Thread(target=ask, name=f"builder {i}") for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(results) == 2 and len(inside) == 1, f"builds: {inside}"
    assert results["builder 0"].metadata_bytes == results["builder 1"].metadata_bytes
    assert len(_engines(isolated_cache)) == 1


def test_an_interrupted_cache_write_leaves_no_partial_engine(real_engine: Engine, rtx: str,
                                                             conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                                             builds: list[dict[str, object]],
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """Cache files are written to a temporary file renamed over the key's path: a write cut short (here by a file
    size limit, as a full disk would) leaves no engine file behind that a reader (one without the lock: a read-only
    cache) could take, and no temporary file; the build still returns its engine."""
    resource = pytest.importorskip("resource")
    import signal

    size = len(real_engine.to_bytes())
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), no signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (size // 2, hard))
    try:
        with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
            engine = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert engine.plan == real_engine.plan and len(builds) == 1
    assert "could not write the engine cache" in caplog.text
    assert [p.suffix for p in isolated_cache.iterdir()] == [".lock"]  # no engine, whole or partial, no temp file
    cached_build_engine(conv_onnx, backend=rtx, progress=False)  # without the limit: built again, stored whole
    assert len(builds) == 2 and Engine.load(_engines(isolated_cache)[0]).plan == real_engine.plan


def test_unwritable_cache_folder_still_builds(rtx: str, conv_onnx: onnx.ModelProto, tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        engine = cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=blocker / "cache")
    assert len(engine.plan) > 0
    assert "engine cache" in caplog.text and "continuing without caching" in caplog.text


def test_cache_module_builds_through_the_builder_module() -> None:
    """The cache calls builder.build_engine through the module, so tests and tools can intercept the builder."""
    assert engine_cache._builder is builder_module


# ------------------------------------------------------------------------------------------- what the key covers
@pytest.fixture(scope="module")
def real_engine(rtx: str, conv_onnx: onnx.ModelProto) -> Engine:
    return builder_module.build_engine(conv_onnx, backend=rtx, progress=False)


@pytest.fixture
def builds(real_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """A stand-in for the builder (the cache derives the keys, not the builder): it records each request (with the
    build options passed through) and returns the real RTX engine labelled with what was asked (model digest, the
    ``BuildOptions``, the plan's ``Target``)."""
    calls: list[dict[str, object]] = []

    def stand_in(build: builder_module.BuildPlan, *, output_tree: object = None, **options: object) -> Engine:
        digest = hashlib.sha256(build.model.SerializeToString()).hexdigest()
        calls.append({"model": digest, "output_tree": output_tree, **build.options.to_json(), "options": options})
        # labelled with the model it was asked for (in the output tree, which the cache does not read back)
        return real_engine.with_metadata(options=build.options, target=build.target, output_tree={"model": digest})

    monkeypatch.setattr(builder_module, "build_from_plan", stand_in)
    return calls


KEY_SETTINGS = {"precision": "fp16", "workspace": 1 << 20, "max_batch": 8, "output_tree": {"type": "tensor", "index": 0},
                "profiles": {"x": ((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8))}}


def test_every_build_setting_is_part_of_the_key(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                                builds: list[dict[str, object]]) -> None:
    base = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    for name, value in KEY_SETTINGS.items():
        before = len(builds)
        engine = cached_build_engine(conv_onnx, backend=rtx, progress=False, **{name: value})  # type: ignore[arg-type]
        assert len(builds) == before + 1, f"{name}={value!r} was served the cached engine of the default settings"
        assert builds[-1] != builds[0]  # the build asked for differs from the default one
        again = cached_build_engine(conv_onnx, backend=rtx, progress=False, **{name: value})  # type: ignore[arg-type]
        assert len(builds) == before + 1 and again.metadata_bytes == engine.metadata_bytes
    assert len(builds) == 1 + len(KEY_SETTINGS) and len(_engines(isolated_cache)) == 1 + len(KEY_SETTINGS)
    fp16 = cached_build_engine(conv_onnx, backend=rtx, progress=False, precision="fp16")
    assert fp16.metadata.options.precision == "fp16" and base.metadata.options.precision == "fp32"
    # options that do not change the engine do not change the key
    cached_build_engine(conv_onnx, backend=rtx, progress=True, timing_cache=isolated_cache / "t.cache")
    assert len(builds) == 1 + len(KEY_SETTINGS)


def test_a_different_model_never_hits_another_models_entry(rtx: str, conv_onnx: onnx.ModelProto,
                                                           isolated_cache: Path,
                                                           builds: list[dict[str, object]]) -> None:
    other = onnx.ModelProto()
    other.CopyFrom(conv_onnx)
    weights = other.graph.initializer[0]
    values = onnx.numpy_helper.to_array(weights).copy()
    values.flat[0] += 1.0  # one weight differs: same graph, same settings
    weights.CopyFrom(onnx.numpy_helper.from_array(values, weights.name))
    digest = {id(m): hashlib.sha256(m.SerializeToString()).hexdigest() for m in (conv_onnx, other)}
    for model in (conv_onnx, other, conv_onnx, other):
        tree = cached_build_engine(model, backend=rtx, progress=False).metadata.output_tree
        assert tree == {"model": digest[id(model)]}
    assert len(builds) == 2 and len(_engines(isolated_cache)) == 2


def test_another_gpu_is_another_key(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                    builds: list[dict[str, object]], monkeypatch: pytest.MonkeyPatch) -> None:
    cached_build_engine(conv_onnx, backend=rtx, progress=False)
    monkeypatch.setattr(builder_module, "current_gpu", lambda: ("NVIDIA H200", "9.0"))
    on_gpu = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert len(builds) == 2 and on_gpu.metadata.compute_capability == "9.0"
    monkeypatch.setattr(builder_module, "current_gpu", lambda: ("NVIDIA L40S", "8.9"))
    cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert len(builds) == 3 and len(_engines(isolated_cache)) == 3


def test_a_second_call_on_a_gpu_machine_is_a_hit(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                                 builds: list[dict[str, object]],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU's name and compute capability are in the key and in the engine: the same machine finds its engine."""
    monkeypatch.setattr(builder_module, "current_gpu", lambda: ("NVIDIA H200", "9.0"))
    for _ in range(2):
        cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert len(builds) == 1 and len(_engines(isolated_cache)) == 1


TARGET = Target("tensorrt_rtx", "1.7.1", "NVIDIA H200", "9.0", None)
# one other value per field of each value type: a field added without an entry here fails the tests below
OTHER_OPTIONS = {"backend": "tensorrt_rtx", "precision": "fp16", "profiles": {"x": ((1, 3, 8, 8),) * 3},
                 "max_batch": 8, "workspace": 1 << 20, "plugins": "decompose", "embed_plugins": True,
                 "plugin_libraries": [__file__]}  # any file: the options hold its name and SHA-256
OTHER_TARGET = {"backend": "tensorrt", "trt_version": "10.13.0", "gpu_name": "NVIDIA L40S", "compute_capability": "8.9",
                "plugin_library_sha256": "ab" * 32}


def test_the_values_a_build_is_made_of_print_compare_and_hash() -> None:
    options = BuildOptions.of(backend="tensorrt_rtx", profiles={"x": ((1, 3, 8, 8),) * 3})
    same = BuildOptions.of(backend="tensorrt_rtx", profiles=[{"x": ((1, 3, 8, 8),) * 3}])
    assert options == same and hash(options) == hash(same) and len({options, same, BuildOptions()}) == 2
    assert "precision='fp32'" in repr(options) and "min (1, 3, 8, 8)" in repr(options)
    assert BuildOptions.from_json(options.to_json()) == options and Target.from_json(TARGET.to_json()) == TARGET
    assert TARGET.describe() == "tensorrt_rtx 1.7.1 on NVIDIA H200 (compute capability 9.0)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.precision = "fp16"  # type: ignore[misc]


def test_every_build_option_is_part_of_the_model_key(conv_onnx: onnx.ModelProto) -> None:
    assert set(OTHER_OPTIONS) == {f.name for f in dataclasses.fields(BuildOptions)}
    base = BuildOptions(backend="tensorrt")
    keys = {engine_cache.cache_keys(conv_onnx, base, TARGET)}
    for name, value in OTHER_OPTIONS.items():
        changed = BuildOptions.of(**{**base.to_json(), "profiles": None, name: value})
        assert getattr(changed, name) != getattr(base, name), name
        model_key, target_key = engine_cache.cache_keys(conv_onnx, changed, TARGET)
        assert (model_key, target_key) not in keys and target_key == engine_cache.cache_keys(conv_onnx, base,
                                                                                             TARGET)[1], name
        keys.add((model_key, target_key))


def test_every_target_fact_is_part_of_the_target_key(conv_onnx: onnx.ModelProto) -> None:
    assert set(OTHER_TARGET) == {f.name for f in dataclasses.fields(Target)}
    base = engine_cache.cache_keys(conv_onnx, BuildOptions(), TARGET)
    for name, value in OTHER_TARGET.items():
        changed = engine_cache.cache_keys(conv_onnx, BuildOptions(), dataclasses.replace(TARGET, **{name: value}))
        assert changed[0] == base[0] and changed[1] != base[1], name


def test_the_torchtrt_ext_version_is_part_of_the_model_key(conv_onnx: onnx.ModelProto,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from torchtrt_ext import _version

    before = engine_cache.cache_keys(conv_onnx, BuildOptions(), TARGET)
    monkeypatch.setattr(_version, "__version__", "9.9.9")
    assert engine_cache.cache_keys(conv_onnx, BuildOptions(), TARGET)[0] != before[0]


def test_equal_options_and_target_build_once(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Two equal (not identical) BuildOptions for one model on one target: one real RTX build, one cache entry."""
    profile = {"x": ((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8))}
    first = engine_cache.cached_build(conv_onnx, BuildOptions.of(backend=rtx, profiles=profile), progress=False)
    _forbid_building(monkeypatch)
    again = cached_build_engine(conv_onnx, backend=rtx, profiles=[profile], progress=False)  # the keyword spelling
    assert len(_engines(isolated_cache)) == 1 and again.plan == first.plan
    assert again.metadata.options == BuildOptions.of(backend=rtx, profiles=profile)
    assert again.metadata.target == builder_module.plan_build(conv_onnx, again.metadata.options).target


@pytest.mark.parametrize("name", sorted(OTHER_TARGET))
def test_a_hit_whose_stored_target_differs_is_a_miss_logged(name: str, rtx: str, conv_onnx: onnx.ModelProto,
                                                            isolated_cache: Path, builds: list[dict[str, object]],
                                                            caplog: pytest.LogCaptureFixture) -> None:
    cached_build_engine(conv_onnx, backend=rtx, progress=False)
    (path,) = _engines(isolated_cache)
    engine = Engine.load(path)
    stored = dataclasses.replace(engine.metadata.target, **{name: OTHER_TARGET[name]})
    engine.with_metadata(target=stored).save(path)  # the plan's key, another target inside
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        rebuilt = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert len(builds) == 2 and rebuilt.metadata.target != stored
    assert f"was built for {stored.describe()}, but this machine has {rebuilt.metadata.target.describe()}" in caplog.text


@pytest.mark.trt_headers
def test_an_engine_with_our_plugin_library_is_a_cache_hit(rtx: str, l2norm_onnx: onnx.ModelProto,
                                                           isolated_cache: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin library's hash is part of the machine key and of the engine's metadata: the engine built with the
    C++ plugins is reused by the next identical call, not rebuilt (the real RTX builder, our real library)."""
    try:
        _native.plugin_library_path()
    except LibraryNotFoundError as exc:
        pytest.fail(f"TensorRT headers are here, so the plugin library should have been built: {exc}")
    first = cached_build_engine(l2norm_onnx, backend=rtx, plugins="cpp", progress=False)
    assert first.metadata.target.plugin_library_sha256
    _forbid_building(monkeypatch)
    again = cached_build_engine(l2norm_onnx, backend=rtx, plugins="cpp", progress=False)
    assert again.plan == first.plan and len(_engines(isolated_cache)) == 1


def test_another_plugin_library_misses_the_cache(rtx: str, l2norm_onnx: onnx.ModelProto, isolated_cache: Path,
                                                 cpp_library: Path, builds: list[dict[str, object]]) -> None:
    """A rebuilt plugin library (other bytes, so another hash) must not be served an engine built with the old one:
    the plan would call plugins whose code changed."""
    first = cached_build_engine(l2norm_onnx, backend=rtx, plugins="cpp", progress=False)
    assert first.metadata.target.plugin_library_sha256 == hashlib.sha256(cpp_library.read_bytes()).hexdigest()
    cached_build_engine(l2norm_onnx, backend=rtx, plugins="cpp", progress=False)
    assert len(builds) == 1  # the same library: a hit
    cpp_library.write_bytes(b"a rebuilt plugin library")
    rebuilt = cached_build_engine(l2norm_onnx, backend=rtx, plugins="cpp", progress=False)
    assert len(builds) == 2 and len(_engines(isolated_cache)) == 2
    assert rebuilt.metadata.target.plugin_library_sha256 == hashlib.sha256(b"a rebuilt plugin library").hexdigest()


def test_a_cache_folder_whose_parents_do_not_exist_is_created(rtx: str, conv_onnx: onnx.ModelProto, tmp_path: Path,
                                                              builds: list[dict[str, object]],
                                                              caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "not" / "yet" / "there"
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=folder)
        cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=folder)
    assert len(_engines(folder)) == 1 and len(builds) == 1 and caplog.text == ""


TREE = {"type": "tuple", "items": [{"type": "tensor", "index": 0}]}  # a caller's output tree (not the default)


def _unusable_folder(tmp_path: Path, conv_onnx: onnx.ModelProto, rtx: str) -> Path:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    return blocker / "cache"


def _folder_whose_lock_cannot_be_opened(tmp_path: Path, conv_onnx: onnx.ModelProto, rtx: str) -> Path:
    """A folder where this key's lock file cannot be opened, as in a read-only folder (which root, running these
    tests here, could still write: test_cache_readonly.py covers that one in a process without that privilege)."""
    folder = tmp_path / "locked_out"
    cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=folder, output_tree=TREE)  # this key's lock
    for path in folder.iterdir():
        path.unlink()
        if path.suffix == ".lock":
            path.mkdir()  # opening the lock now fails (IsADirectoryError), as a read-only folder's would
    return folder


@pytest.mark.parametrize("where, warning", [
    (lambda tmp_path, model, rtx: False, None),
    (lambda tmp_path, model, rtx: tmp_path / "fresh", None),
    (_unusable_folder, "is not usable"),
    (_folder_whose_lock_cannot_be_opened, "cannot be written"),
], ids=["cache=False", "writable folder", "unusable folder", "unwritable folder"])
def test_output_tree_and_build_options_reach_every_build(rtx: str, conv_onnx: onnx.ModelProto, tmp_path: Path,
                                                         builds: list[dict[str, object]],
                                                         caplog: pytest.LogCaptureFixture, where: object,
                                                         warning: str | None) -> None:
    """Whether the engine is then cached or not, the build gets the caller's output_tree (how outputs are returned)
    and build options (timing cache, progress)."""
    cache = where(tmp_path, conv_onnx, rtx)  # type: ignore[operator]
    timing = tmp_path / "timing.cache"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        cached_build_engine(conv_onnx, backend=rtx, cache=cache, output_tree=TREE, progress=False, timing_cache=timing)
    assert builds[-1]["output_tree"] == TREE and builds[-1]["options"] == {"progress": False, "timing_cache": timing}
    assert (warning or "") in caplog.text and (warning is not None) == bool(caplog.text)
    if warning == "cannot be written":
        assert _engines(cache) == []  # built without caching


def _cached_file(folder: Path, suffix: str) -> Path:
    (path,) = sorted(folder.glob(f"*{suffix}"))
    return path


def test_a_planted_engine_symlink_is_neither_read_nor_written_through(
        rtx: str, conv_onnx: onnx.ModelProto, tmp_path: Path, builds: list[dict[str, object]],
        caplog: pytest.LogCaptureFixture) -> None:
    """In a shared cache folder someone plants the engine's name as a symlink: to their own engine (a read through it
    would run their file) or to a path of ours (a write through it would create or replace that file)."""
    folder = tmp_path / "shared"
    cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=folder)
    engine_path = _cached_file(folder, ".engine")
    theirs = tmp_path / "theirs.engine"
    os.replace(engine_path, theirs)
    engine_path.symlink_to(theirs)  # a valid engine, of someone else
    planted = theirs.read_bytes()
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=folder)
    assert len(builds) == 2 and "symlink" in caplog.text  # not a cache hit through the link
    assert theirs.read_bytes() == planted and engine_path.is_symlink()  # and nothing written through it
    victim = tmp_path / "ours" / "precious"
    victim.parent.mkdir()
    engine_path.unlink()
    engine_path.symlink_to(victim)  # dangling: a write through it would create ours/precious
    cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=folder)
    assert len(builds) == 3 and not victim.exists()


def test_a_planted_lock_symlink_is_not_followed(rtx: str, conv_onnx: onnx.ModelProto, tmp_path: Path,
                                                builds: list[dict[str, object]]) -> None:
    folder = tmp_path / "shared"
    cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=folder)
    lock = _cached_file(folder, ".lock")
    _cached_file(folder, ".engine").unlink()
    lock.unlink()
    victim = tmp_path / "ours" / "precious"
    victim.parent.mkdir()
    lock.symlink_to(victim)  # opening it to lock would create ours/precious
    engine = cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=folder)
    assert len(builds) == 2 and len(engine.plan) > 0 and not victim.exists()


def test_a_planted_sibling_symlink_is_not_read(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                               builds: list[dict[str, object]],
                                               caplog: pytest.LogCaptureFixture) -> None:
    """On a miss the cache reports the engines of this model for other machines; a sibling that is a symlink (planted:
    its target could be any file) is not read through, while the same file placed there is reported."""
    cached_build_engine(conv_onnx, backend=rtx, progress=False)
    path = _cached_file(isolated_cache, ".engine")
    engine = Engine.load(path)
    elsewhere = isolated_cache.parent / "elsewhere.engine"
    engine.with_metadata(target=dataclasses.replace(engine.metadata.target, gpu_name="NVIDIA H200",
                                                    compute_capability="9.0")).save(elsewhere)
    sibling = isolated_cache / f"{path.name.split('-')[0]}-0000000000000000.engine"
    sibling.symlink_to(elsewhere)
    path.unlink()
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert len(builds) == 2 and "an engine of this model exists" not in caplog.text
    sibling.unlink()
    os.replace(elsewhere, sibling)  # the same engine, a file of the folder: reported
    path.unlink()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert len(builds) == 3 and "an engine of this model exists for tensorrt_rtx" in caplog.text
    assert "NVIDIA H200" in caplog.text


def _in_a_thread(call: Any, seconds: float) -> bool:
    """Run ``call`` in a daemon thread; whether it returned within ``seconds`` (a blocked open never returns)."""
    import threading

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_planted_fifo_does_not_block_the_build(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                                 builds: list[dict[str, object]],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """A named pipe under the engine's name, or beside it, with no writer: opening it to read would wait forever for
    one. The cache says it cannot be read, builds, and replaces the pipe by the engine file."""
    cached_build_engine(conv_onnx, backend=rtx, progress=False)
    path = _cached_file(isolated_cache, ".engine")
    path.unlink()
    os.mkfifo(path)
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        assert _in_a_thread(lambda: cached_build_engine(conv_onnx, backend=rtx, progress=False), 60), \
            "the build blocked opening the pipe"
    assert len(builds) == 2 and "cannot be read" in caplog.text and "not a regular file" in caplog.text
    assert path.is_file() and Engine.load(path).metadata.model_key
    sibling = isolated_cache / f"{path.name.split('-')[0]}-0000000000000000.engine"
    os.mkfifo(sibling)  # beside it: read when the engine is missing, to report engines for other machines
    path.unlink()
    assert _in_a_thread(lambda: cached_build_engine(conv_onnx, backend=rtx, progress=False), 60), \
        "the build blocked opening the pipe beside the engine"
    assert len(builds) == 3 and path.is_file()


def test_a_symlink_planted_while_the_engine_is_written_is_replaced(rtx: str, conv_onnx: onnx.ModelProto,
                                                                   tmp_path: Path, builds: list[dict[str, object]],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The symlink check before a write leaves a window: a link planted after it (here, while the engine is
    serialized for the write) is replaced by the engine file, never written through to the file it names."""
    folder = tmp_path / "shared"
    cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=folder)
    path = _cached_file(folder, ".engine")
    path.unlink()
    victim = tmp_path / "ours" / "precious"
    victim.parent.mkdir()
    serialize = Engine.to_bytes

    def planting(engine: Engine) -> bytes:
        if not path.is_symlink():
            path.symlink_to(victim)  # dangling: a write through it would create ours/precious
        return serialize(engine)

    monkeypatch.setattr(Engine, "to_bytes", planting)
    engine = cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=folder)
    monkeypatch.undo()
    assert len(builds) == 2 and not victim.exists()
    assert not path.is_symlink() and Engine.load(path).plan == engine.plan


class _Planned(Exception):
    """Raised by the stand-in of plan_build: the options were recorded, nothing is built."""


def test_cached_build_engine_takes_build_engines_keywords_and_makes_its_options(
        conv_onnx: onnx.ModelProto, tmp_path: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``cached_build_engine`` is ``build_engine`` plus ``cache``: the same keywords with the same defaults, which make
    the same ``BuildOptions`` (what the key hashes and the build is made of), defaults and every option given."""
    import inspect

    built = inspect.signature(builder_module.build_engine).parameters
    cached = inspect.signature(cached_build_engine).parameters
    passed_through = {"timing_cache", "progress"}  # build options outside the key (**build_options)
    assert set(cached) - {"cache", "build_options"} == set(built) - passed_through
    assert {n: p.default for n, p in cached.items() if n in built} == {n: built[n].default for n in cached if n in built}
    asked: list[BuildOptions] = []

    def stand_in(source: object, options: BuildOptions) -> None:
        asked.append(options)
        raise _Planned

    monkeypatch.setattr(builder_module, "plan_build", stand_in)
    library = tmp_path / "libmine.so"
    library.write_bytes(b"a plugin library of the user's")
    given = {**OTHER_OPTIONS, "backend": "tensorrt_rtx", "plugin_libraries": [library]}
    for call in (builder_module.build_engine, cached_build_engine):
        for kwargs in ({}, given):
            with pytest.raises(_Planned):
                call(conv_onnx, **kwargs)  # type: ignore[operator]
    assert asked[:2] == asked[2:] and asked[0] == BuildOptions.of() and asked[1] == BuildOptions.of(**given)
    assert [lib.path for lib in asked[3].plugin_libraries] == [library]
