"""A user's own plugin libraries (``plugin_libraries=[...]``): checked, loaded into the backend's registry, matched to
the graph's custom nodes, and checked again where an engine that needs them is loaded.

A library is recorded by file name and SHA-256 (``UserLibrary``): the hash is what the cache key and the engine
metadata hold, the path only says where to load it from in this process. Where an engine is loaded, only libraries the
user names then are loaded, each checked against the recorded hash (``libraries_for_engine``): a path read from an
engine file would run code from a handed-over file (the rule of embedded host code, docs/design.md).
"""
from __future__ import annotations

import ctypes
import dataclasses
import logging
import os
import platform
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx

from torchtrt_ext._files import file_sha256
from torchtrt_ext.backend.plugin_plan import UserOpPlan
from torchtrt_ext.errors import EngineCompatibilityError, InvalidInputError, LibraryNotFoundError, failure

log = logging.getLogger("torchtrt_ext.backend")

ENTRY_POINTS = ("getCreators", "setLoggerFinder")  # what IPluginRegistry::loadLibrary looks up
STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")
_ELF_MACHINES = {62: "x86_64", 183: "aarch64"}  # e_machine values of the platforms TensorRT ships for
_REMEDY = "pass plugin_libraries=[path] (--plugin-library PATH)"
Creator = tuple[str, str, str]  # (name, version, namespace)
# (backend, file name) -> (SHA-256, creators) of the library of that name loaded into the backend's registry: the
# registry refuses a second library registering the same creators, so a process holds one copy of each library.
_LOADED: dict[tuple[str, str], tuple[str, tuple[Creator, ...]]] = {}


@dataclasses.dataclass(frozen=True)
class UserLibrary:
    """A user's plugin library: its file name and SHA-256 (recorded, compared) and where it is (neither)."""

    name: str
    sha256: str
    path: Path | None = dataclasses.field(default=None, compare=False)

    def describe(self) -> str:
        """"libmycorp_plugins.so (sha256 0123456789ab...)"."""
        return f"{self.name} (sha256 {self.sha256[:12]}...)"

    def to_json(self) -> dict[str, str]:
        """The record of the metadata and the cache key: name and hash, never the path."""
        return {"name": self.name, "sha256": self.sha256}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UserLibrary:
        """The inverse of ``to_json`` (no path)."""
        return cls(str(data["name"]), str(data["sha256"]))


def user_libraries(paths: Iterable[str | os.PathLike[str]] | None) -> tuple[UserLibrary, ...]:
    """The ``UserLibrary`` of each path (hashed), in order; InvalidInputError naming a missing file or a repeated
    name (the metadata tells libraries apart by name)."""
    libraries: list[UserLibrary] = []
    for entry in paths or ():
        path = Path(entry)
        if not path.is_file():
            raise InvalidInputError(failure(f"plugin library {path} does not exist (or is not a file)",
                                            "a path to a TensorRT plugin library (.so)", _REMEDY + " with its path"))
        if any(lib.name == path.name for lib in libraries):
            raise InvalidInputError(failure(f"two plugin libraries are named {path.name}",
                                            "one file name per plugin library", "rename one of them"))
        libraries.append(UserLibrary(path.name, file_sha256(path.resolve()), path.resolve()))
    return tuple(libraries)


def check_library_file(path: Path) -> None:
    """Refuse, naming the file, what TensorRT's registry could not load: not a shared library, another architecture,
    or no ``getCreators``/``setLoggerFinder``. Opening it (dlopen) runs its initializers, as loading it would."""
    with open(path, "rb") as handle:
        header = handle.read(20)
    if header[:4] != b"\x7fELF":
        raise LibraryNotFoundError(failure(f"plugin library {path} is not a shared library (no ELF header)",
                                           "a TensorRT plugin library (.so)", _REMEDY + " naming the .so file"))
    machine = _ELF_MACHINES.get(int.from_bytes(header[18:20], "little" if header[5] == 1 else "big"), "another")
    here = platform.machine()
    if machine != here:
        raise LibraryNotFoundError(failure(f"plugin library {path} is built for {machine}, this machine is {here}",
                                           f"a plugin library built for {here}",
                                           "rebuild the library for this machine"))
    try:
        library = ctypes.CDLL(str(path), mode=os.RTLD_LAZY | os.RTLD_LOCAL)
    except OSError as exc:
        raise LibraryNotFoundError(failure(f"plugin library {path} does not load: {exc}",
                                           "a library whose dependencies the loader finds",
                                           f"check `ldd {path}`; set LD_LIBRARY_PATH or rebuild it")) from exc
    missing = [name for name in ENTRY_POINTS if not hasattr(library, name)]
    if missing:
        raise LibraryNotFoundError(failure(
            f"plugin library {path} does not export {', '.join(missing)}",
            "a plugin library exporting getCreators and setLoggerFinder (extern \"C\"), as "
            "IPluginRegistry::loadLibrary and trtexec --staticPlugins need",
            "export both entry points from the library (IPluginV3 creators)"))


def load_user_library(api: Any, library: UserLibrary) -> tuple[Creator, ...]:
    """Load ``library`` into ``api``'s plugin registry (on TensorRT-RTX after its linker-name fix) once per process;
    the creators it registered, (name, version, namespace) each."""
    assert library.path is not None, "a library recorded in metadata has no path: name it at load time"
    key = (api.name, library.name)
    if key in _LOADED:
        digest, creators = _LOADED[key]
        if digest != library.sha256:
            raise LibraryNotFoundError(failure(
                f"plugin library {library.path} (sha256 {library.sha256[:12]}...) cannot be loaded: another "
                f"{library.name} (sha256 {digest[:12]}...) is in {api.name}'s plugin registry of this process already",
                "one copy of a plugin library per process (the registry keeps the first creator of a name)",
                "use the same file throughout the process, or run this build in a fresh process"))
        return creators
    check_library_file(library.path)
    registry = api.trt.get_plugin_registry()
    before = set(_creators(registry))
    try:
        api.load_plugin_library(str(library.path))
    except LibraryNotFoundError as exc:
        raise LibraryNotFoundError(failure(
            f"{api.name} {api.version} could not load the plugin library {library.path}",
            f"a plugin library built against {api.name} {api.version}'s headers",
            "read TensorRT's error in the log 'torchtrt_ext.backend'; rebuild the library for this TensorRT")) from exc
    registered = tuple(c for c in _creators(registry) if c not in before)
    log.info("loaded plugin library %s into %s's registry: %s", library.path, api.name,
             ", ".join(f"{ns}::{name}:{v}" for name, v, ns in registered) or "no new creators")
    _LOADED[key] = (library.sha256, registered)
    return registered


def _creators(registry: Any) -> list[Creator]:
    return [(str(c.name), str(c.plugin_version), str(c.plugin_namespace)) for c in registry.all_creators]


def foreign_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The main graph's nodes of custom domains other than torchtrt_ext's (a user's plugin nodes)."""
    from torchtrt_ext.ops.spec import DOMAIN

    return [n for n in model.graph.node if n.domain not in (*STANDARD_DOMAINS, DOMAIN)]


def node_creator(node: onnx.NodeProto) -> Creator:
    """The creator TensorRT's ONNX parser looks up for a plugin node: (op_type, ``plugin_version`` or "1",
    ``plugin_namespace`` or the node's domain)."""
    attrs = {a.name: a.s.decode() for a in node.attribute if a.type == onnx.AttributeProto.STRING}
    return node.op_type, attrs.get("plugin_version", "1"), attrs.get("plugin_namespace", node.domain)


def libraries_for_engine(recorded: Sequence[UserLibrary],
                         given: Iterable[str | os.PathLike[str]] | None) -> tuple[UserLibrary, ...]:
    """The libraries to load for an engine built with ``recorded``: those the user names now (``given``), each matched
    to a recorded one by SHA-256. EngineCompatibilityError names the recorded file and hash that no given library
    matches; a given library the engine does not need is ignored (logged)."""
    offered = user_libraries(given)
    by_hash = {lib.sha256: lib for lib in offered}
    missing = [lib for lib in recorded if lib.sha256 not in by_hash]
    if missing:
        names = {lib.name: lib for lib in offered}
        differs = [f"{lib.describe()}: {names[lib.name].path} has sha256 {names[lib.name].sha256[:12]}..."
                   for lib in missing if lib.name in names]
        raise EngineCompatibilityError(failure(
            "the engine was built with the plugin library "
            + ", ".join(lib.describe() for lib in missing) + (f", and a different file was given ({'; '.join(differs)})"
                                                              if differs else ", which was not given"),
            "the same library file (same SHA-256) named where the engine is loaded; torchtrt_ext never loads a library "
            "path read from an engine file",
            "pass plugin_libraries=[path to " + ", ".join(lib.name for lib in missing) + "] (--plugin-library PATH), "
            "or rebuild the engine with the library you have"))
    needed = {lib.sha256 for lib in recorded}
    for lib in offered:
        if lib.sha256 not in needed:
            log.info("plugin library %s is not one the engine was built with; not loaded", lib.path)
    return tuple(by_hash[lib.sha256] for lib in recorded)


def serve_user_nodes(api: Any, model: onnx.ModelProto, libraries: Sequence[UserLibrary]) -> tuple[UserOpPlan, ...]:
    """Load ``libraries`` into ``api``'s registry (before any parsing) and name, per distinct custom node of the user's
    domains, the library whose creator serves it; a node none serves is left to the parser, whose error names it."""
    served: dict[Creator, str] = {}
    for library in libraries:
        for creator in load_user_library(api, library):
            served.setdefault(creator, library.name)
    plans = {UserOpPlan(*node_creator(node), served[node_creator(node)]) for node in foreign_nodes(model)
             if node_creator(node) in served}
    return tuple(sorted(plans, key=lambda op: (op.namespace, op.op_type, op.version)))
