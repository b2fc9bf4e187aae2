"""Engine cache: build once per (model, ``BuildOptions``) and ``Target``, reuse afterwards.

Key (docs/design.md, Engine cache): a hash of the ONNX bytes and the ``BuildOptions`` (with the caller's output tree and
torchtrt_ext's version, whose passes shape the graph), and a hash of the ``Target`` the build plan works out (backend,
TensorRT version, GPU name and compute capability, plugin library hash). A file is named
``<model key>-<target key>.engine``, so an engine of the same model built for another target sits next to this one
and is reported plainly instead of being loaded; a hit whose stored target differs from the plan's is a miss, logged.
The full model key is recorded in the engine's metadata (``model_key``) and compared on every hit, so a file under the
key that belongs to another model or other options (copied or renamed there) is a logged miss and a rebuild.

Folder: ``$TORCHTRT_EXT_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/torchtrt_ext`` (``~/.cache/torchtrt_ext``).
``TORCHTRT_EXT_CACHE=0`` (or ``off``/``false``/``no``), or ``cache=False``, disables it.

Writes are atomic (temp file + ``os.replace``); builders of one key take a file lock, so two processes building the
same key build it once and leave one valid file. A corrupted file is logged, deleted and rebuilt, never loaded.
No file of the folder is read or written through a symlink (one found there is reported and left alone), and an
engine that carries host code (``embed_plugins=True``) is used only from a file this user owns (checked on the
descriptor it is read from); see
docs/deployment.md "Security" for why a cache folder shared with other users is still not safe for such engines.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Union

import onnx

from torchtrt_ext import _version
from torchtrt_ext.backend import builder as _builder
from torchtrt_ext._files import atomic_write, file_lock
from torchtrt_ext.backend.engine import Engine, canonical_json
from torchtrt_ext.backend.options import BuildOptions, Target
from torchtrt_ext.backend.profiles import DEFAULT_MAX_BATCH, ProfileSpec
from torchtrt_ext.errors import CorruptEngineError, EngineCompatibilityError
from torchtrt_ext.passes.shapes import too_big, weightless

log = logging.getLogger("torchtrt_ext.cache")

ENV_DIR = "TORCHTRT_EXT_CACHE_DIR"
ENV_SWITCH = "TORCHTRT_EXT_CACHE"
_OFF = {"0", "off", "false", "no"}
CacheOption = Union[bool, str, "os.PathLike[str]", None]


def default_cache_dir() -> Path | None:
    """The cache folder from the environment, or None when the environment disables the cache."""
    if os.environ.get(ENV_SWITCH, "").strip().lower() in _OFF:
        return None
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torchtrt_ext"


def resolve_cache_dir(cache: CacheOption) -> Path | None:
    """``cache``: True/None -> the default folder (environment rules apply); False -> None; a path -> that path."""
    if cache is False:
        return None
    if cache is True or cache is None:
        return default_cache_dir()
    return Path(cache).expanduser()


def _sha256(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


class EngineCache:
    """A folder of engine files named by key."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def path_for(self, model_key: str, target_key: str) -> Path:
        """The file of a (model key, target key) pair."""
        return self.directory / f"{model_key[:32]}-{target_key[:16]}.engine"

    @contextlib.contextmanager
    def locked(self, path: Path) -> Iterator[OSError | None]:
        """Hold an inter-process lock for ``path`` (one builder per key at a time); yields None, or, when the lock
        file cannot be opened (a read-only folder, another user's, a symlink planted in its place), the error that
        says so, and holds no lock: cached files are replaced atomically, so reading one without the lock is safe."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(file_lock(path.with_suffix(".lock")))
            except OSError as exc:
                yield exc
                return
            yield None

    def load(self, path: Path, model_key: str, target: Target) -> Engine | None:
        """The cached engine at ``path`` if it is valid, of ``model_key`` and built for ``target``; else None (after
        saying why)."""
        if path.is_symlink():
            log.warning("cached engine %s is a symlink, which torchtrt_ext never writes there (someone may have "
                        "planted it); not reading or writing through it, building without caching", path)
            return None
        try:
            data, owned = _read_cache_file(path)
        except FileNotFoundError:
            self._report_other_targets(path, target)
            return None
        except OSError as exc:  # an unreadable folder or file, or a link planted since the check: the caller builds
            log.info("cached engine %s cannot be read (%s)", path, exc)
            return None
        try:
            engine = Engine.from_bytes(data, source=str(path))
        except CorruptEngineError as exc:
            log.warning("cached engine %s is corrupted (%s); deleting it and rebuilding", path, exc.what)
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        except EngineCompatibilityError as exc:  # metadata of another format: the build replaces the file
            log.warning("cached engine %s was written by another torchtrt_ext (%s); rebuilding", path, exc.what)
            return None
        if engine.metadata.model_key != model_key:
            log.warning("cached engine %s belongs to another model or other build options (its recorded key %s is "
                        "not %s); rebuilding", path, engine.metadata.model_key[:32] or "(none)", model_key[:32])
            return None
        cached = engine.metadata.target
        if cached != target:
            log.warning("cached engine %s was built for %s, but this machine has %s; rebuilding for this machine",
                        path, cached.describe(), target.describe())
            return None
        if engine.metadata.plugins_embedded and not owned:
            log.warning("cached engine %s carries host code (an embedded plugin library) and belongs to another user; "
                        "not running it, rebuilding (keep the cache in a folder only you can write: set %s)",
                        path, ENV_DIR)
            return None
        log.info("engine cache hit: %s", path)
        return engine

    def _report_other_targets(self, path: Path, target: Target) -> None:
        model_key = path.name.split("-")[0]
        for other in sorted(self.directory.glob(f"{model_key}-*.engine")):
            try:
                cached = Engine.from_bytes(_read_cache_file(other)[0], source=str(other)).metadata.target
            except Exception:  # noqa: BLE001 - a sibling we cannot read is just not reported
                continue
            log.info("an engine of this model exists for %s (%s), not for this machine (%s); building one",
                     cached.describe(), other.name, target.describe())

    def store(self, path: Path, engine: Engine) -> None:
        """Write the engine file atomically; a symlink at ``path`` is left alone, never written through."""
        if path.is_symlink():
            log.warning("not caching the engine at %s: a symlink is there (see the warning above)", path)
            return
        atomic_write(path, engine.to_bytes(), follow_symlinks=False)  # a link planted meanwhile is replaced
        log.info("engine cached: %s (%d bytes)", path, len(engine.plan))


def _read_cache_file(path: Path) -> tuple[bytes, bool]:
    """The bytes of the cache file ``path`` and whether this user owns it, both from one descriptor opened without
    following a symlink (OSError) or blocking on a FIFO, so the file cannot be swapped between the check and the
    read. FileNotFoundError when there is none."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags), "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        getuid = getattr(os, "getuid", None)
        return handle.read(), getuid is None or info.st_uid == getuid()


def _model_parts(model: onnx.ModelProto) -> list[bytes]:
    """The bytes that identify ``model``: its serialization; for a model over protobuf's 2 GiB limit, the graph without
    its large weights and then each of them (each under the limit on its own)."""
    if not too_big(model):
        return [model.SerializeToString(deterministic=True)]
    large = {i.name for i in weightless(model).graph.input} - {i.name for i in model.graph.input}
    return [weightless(model).SerializeToString(deterministic=True)] + [
        i.SerializeToString(deterministic=True) for i in model.graph.initializer if i.name in large]


def cache_keys(model: onnx.ModelProto, options: BuildOptions, target: Target,
               output_tree: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """(model key, target key): model = ONNX bytes + options + the output tree + torchtrt_ext's version; target = the
    ``Target``'s facts."""
    model_key = _sha256(*_model_parts(model), canonical_json(options.to_json()),
                        canonical_json(output_tree), _version.__version__.encode())
    return model_key, _sha256(canonical_json(target.to_json()))


def cached_build_engine(onnx_model_or_path: _builder.OnnxSource, *, cache: CacheOption = True,
                        backend: str = "tensorrt", precision: str = "fp32",
                        profiles: ProfileSpec | Sequence[ProfileSpec] | None = None, workspace: int | None = None,
                        plugins: str = "auto", embed_plugins: bool = False, output_tree: dict[str, Any] | None = None,
                        max_batch: int = DEFAULT_MAX_BATCH,
                        plugin_libraries: Sequence[str | os.PathLike[str]] | None = None,
                        **build_options: Any) -> Engine:
    """``build_engine`` through the engine cache (same arguments, plus ``cache``: True, False or a folder).

    ``build_options`` (``timing_cache``, ``progress``) are passed through and do not change the key; the contents of
    ``plugin_libraries`` do (their SHA-256 is in the options).
    """
    options = BuildOptions.of(backend=backend, precision=precision, profiles=profiles, max_batch=max_batch,
                              workspace=workspace, plugins=plugins, embed_plugins=embed_plugins,
                              plugin_libraries=plugin_libraries)
    return cached_build(onnx_model_or_path, options, cache=cache, output_tree=output_tree, **build_options)


def cached_build(onnx_model_or_path: _builder.OnnxSource, options: BuildOptions, *, cache: CacheOption = True,
                 output_tree: dict[str, Any] | None = None, **build_options: Any) -> Engine:
    """The engine of ``options`` from the cache in ``cache`` (True, False or a folder), built and stored on a miss.

    ``build_options`` (``timing_cache``, ``progress``) are passed to the build and do not change the key.
    """
    directory = resolve_cache_dir(cache)
    build = _builder.plan_build(onnx_model_or_path, options)  # also raises early for impossible combinations
    if directory is None:
        return _builder.build_from_plan(build, output_tree=output_tree, **build_options)
    store = EngineCache(directory)
    model_key, target_key = cache_keys(build.model, options, build.target, output_tree)
    path = store.path_for(model_key, target_key)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("engine cache folder %s is not usable (%s); continuing without caching (set %s or pass cache=)",
                    directory, exc, ENV_DIR)
        return _builder.build_from_plan(build, output_tree=output_tree, **build_options)
    with store.locked(path) as unwritable:
        engine = store.load(path, model_key, build.target)
        if engine is not None:
            return engine
        if unwritable is not None:
            log.warning("engine cache folder %s cannot be written (%s); building without caching (set %s or pass "
                        "cache= to use a writable folder)", directory, unwritable, ENV_DIR)
            return _builder.build_from_plan(build, output_tree=output_tree, **build_options)
        engine = _builder.build_from_plan(build, output_tree=output_tree, **build_options)
        engine = engine.with_metadata(model_key=model_key)
        try:
            store.store(path, engine)
        except OSError as exc:
            log.warning("could not write the engine cache %s (%s); continuing without caching", path, exc)
        return engine
