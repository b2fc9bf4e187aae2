"""The two values a build is made of: ``BuildOptions`` (what the user asked) and ``Target`` (where the engine runs).

Both are frozen, hashable and printable (Polygraphy's ``CreateConfig`` is the model): ``build_engine``,
``cached_build_engine`` and ``compile`` turn their keywords into one ``BuildOptions`` and pass that on;
``builder.plan_build`` works out the ``Target`` once (backend, TensorRT version, GPU, plugin library); the engine's
metadata stores both, and the engine cache keys on (model, options) and on the target (docs/design.md, Engine cache).
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from torchtrt_ext.backend.profiles import DEFAULT_MAX_BATCH, Profile, ProfileSpec, normalize_profiles
from torchtrt_ext.backend.user_libraries import UserLibrary, user_libraries


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    """What a build is asked for; every field changes the engine, so every field is part of the cache key.

    Args:
        backend: "tensorrt" or "tensorrt_rtx". Default "tensorrt".
        precision: "fp32", "fp16", "bf16" or "as_exported". Default "fp32".
        profiles: the optimization profiles asked for (``BuildOptions.of`` normalizes the user's spellings).
            Default (): batch 1..``max_batch``, other dims as exported.
        max_batch: upper batch bound of the default profile. Default 32.
        workspace: workspace memory cap in bytes. Default None: 4 GiB, or half the GPU's memory if less.
        plugins: "auto", "cpp", "python" or "decompose". Default "auto".
        embed_plugins: serialize the C++ plugin library (and the user's) into the plan. Default False.
        plugin_libraries: the user's own plugin libraries, by file name and SHA-256 (the path, where to load each
            from, is neither compared nor recorded). Default ().
    """

    backend: str = "tensorrt"
    precision: str = "fp32"
    profiles: tuple[Profile, ...] = ()
    max_batch: int = DEFAULT_MAX_BATCH
    workspace: int | None = None
    plugins: str = "auto"
    embed_plugins: bool = False
    plugin_libraries: tuple[UserLibrary, ...] = ()

    @classmethod
    def of(cls, *, backend: str = "tensorrt", precision: str = "fp32",
           profiles: ProfileSpec | Sequence[ProfileSpec] | None = None, max_batch: int = DEFAULT_MAX_BATCH,
           workspace: int | None = None, plugins: str = "auto", embed_plugins: bool = False,
           plugin_libraries: Sequence[str | os.PathLike[str]] | None = None) -> BuildOptions:
        """The options of ``build_engine``'s keywords (profiles in any spelling ``normalize_profiles`` takes; each
        plugin library hashed from its path)."""
        return cls(backend, precision, tuple(normalize_profiles(profiles) or ()), max_batch, workspace, plugins,
                   embed_plugins, user_libraries(plugin_libraries))

    def to_json(self) -> dict[str, Any]:
        """JSON-able and deterministic: what the metadata records and the cache key hashes (the user's plugin
        libraries by name and SHA-256, where there are any)."""
        data: dict[str, Any] = {
            "backend": self.backend, "precision": self.precision, "profiles": [p.to_json() for p in self.profiles],
            "max_batch": self.max_batch, "workspace": self.workspace, "plugins": self.plugins,
            "embed_plugins": self.embed_plugins}
        if self.plugin_libraries:
            data["plugin_libraries"] = [lib.to_json() for lib in self.plugin_libraries]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BuildOptions:
        """The inverse of ``to_json``."""
        workspace = data["workspace"]
        return cls(str(data["backend"]), str(data["precision"]), tuple(Profile.from_json(p) for p in data["profiles"]),
                   int(data["max_batch"]), None if workspace is None else int(workspace), str(data["plugins"]),
                   bool(data["embed_plugins"]),
                   tuple(UserLibrary.from_json(lib) for lib in data.get("plugin_libraries", ())))


@dataclasses.dataclass(frozen=True)
class Target:
    """Where an engine is built to run: an engine of another target does not load (or must not be trusted) here.

    ``gpu_name`` and ``compute_capability`` ("8.9") are None when built without a GPU (TensorRT-RTX on a CPU machine);
    ``plugin_library_sha256`` is the C++ plugin library's hash when the build takes it, else None.
    """

    backend: str
    trt_version: str
    gpu_name: str | None = None
    compute_capability: str | None = None
    plugin_library_sha256: str | None = None

    def describe(self) -> str:
        """One phrase: "tensorrt_rtx 1.7.1 on NVIDIA H200 (compute capability 9.0), plugin library 0123456789ab"."""
        gpu = f"{self.gpu_name} (compute capability {self.compute_capability})" if self.compute_capability else "no GPU"
        plugins = f", plugin library {self.plugin_library_sha256[:12]}" if self.plugin_library_sha256 else ""
        return f"{self.backend} {self.trt_version} on {gpu}{plugins}"

    def to_json(self) -> dict[str, Any]:
        """The metadata record (JSON-able, deterministic)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Target:
        """The inverse of ``to_json``."""
        return cls(str(data["backend"]), str(data["trt_version"]), data.get("gpu_name"),
                   data.get("compute_capability"), data.get("plugin_library_sha256"))
