"""The plugin plan of a build: for each custom op, its plugin binding and the route that serves it.

Routes: ``"cpp"`` (libtorchtrt_ext_plugins.so), ``"python"`` (our ``tensorrt.plugin`` plugins), ``"tensorrt"``
(TensorRT's own plugin library, for ops bound to a plugin TensorRT provides) and ``"decompose"`` (standard ONNX ops,
no plugin). ``backend.plugins.route`` decides each op's (``OpPlan``, or ``Unserved`` with the reason), for the build
and the doctor alike; ``backend.plugins.resolve_plugin_plan`` gathers them once per build; the engine metadata records
the plan (``EngineMetadata.plugin_plan``) and ``backend.plugins.plan_from_metadata`` reads it back, for the runtime.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torchtrt_ext.errors import TorchTRTExtError
from torchtrt_ext.ops.spec import PluginRef

ROUTES = ("cpp", "python", "tensorrt", "decompose")


@dataclasses.dataclass(frozen=True)
class OpPlan:
    """How one custom op reaches TensorRT: its plugin binding and its route (one of ``ROUTES``). ``how`` says what
    serves it, or for a decomposition why no plugin does (the doctor's line; not recorded, not compared)."""

    plugin: PluginRef
    route: str
    how: str = dataclasses.field(default="", compare=False)

    @property
    def op_type(self) -> str:
        """The node's op_type (the plugin's name)."""
        return self.plugin.name

    def to_json(self) -> dict[str, str]:
        """The metadata record: op, version, namespace, provider, route."""
        ref = self.plugin
        return {"op": ref.name, "version": ref.version, "namespace": ref.namespace, "provider": ref.provider,
                "route": self.route}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OpPlan:
        """The inverse of ``to_json``."""
        ref = PluginRef(str(data["op"]), str(data["version"]), str(data["namespace"]), str(data["provider"]))
        return cls(ref, str(data["route"]))


@dataclasses.dataclass(frozen=True)
class UserOpPlan:
    """A custom node of the user's own domain and the user's plugin library whose creator serves it."""

    op_type: str
    version: str
    namespace: str
    library: str  # the library's file name (its SHA-256 is in ``BuildOptions.plugin_libraries``)

    @property
    def id(self) -> str:
        """``<namespace>::<name>:<version>``, as ``PluginRef.id``."""
        return f"{self.namespace}::{self.op_type}:{self.version}"

    def to_json(self) -> dict[str, str]:
        """The metadata record: op, version, namespace, library."""
        return {"op": self.op_type, "version": self.version, "namespace": self.namespace, "library": self.library}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UserOpPlan:
        """The inverse of ``to_json``."""
        return cls(str(data["op"]), str(data["version"]), str(data["namespace"]), str(data["library"]))


@dataclasses.dataclass(frozen=True)
class Unserved:
    """No route serves ``plugin`` as asked: ``reason`` says why (what the doctor reports) and ``error`` is what a build
    raises (not compared)."""

    plugin: PluginRef
    reason: str
    error: TorchTRTExtError = dataclasses.field(compare=False)


@dataclasses.dataclass(frozen=True)
class PluginPlan:
    """What a build does about custom nodes.

    ``ops``: one ``OpPlan`` per distinct custom op. ``mode`` sums it up as the ``plugins=`` setting recorded in the
    metadata: the route of our own ops ("cpp", "python" or "decompose"), else that of TensorRT-provided ones, else
    "none" (no custom nodes). ``library`` and ``library_sha256``: the C++ plugin library when some op takes it (not
    recorded in the engine metadata: the path is the build machine's, the hash is in the engine's ``Target``).
    """

    mode: str
    library: Path | None = None
    library_sha256: str | None = None
    ops: tuple[OpPlan, ...] = ()
    user_ops: tuple[UserOpPlan, ...] = ()  # the user's custom nodes, each with the user's library serving it

    @property
    def needs_plugins(self) -> bool:
        """Whether some op reaches TensorRT as a plugin (not decomposed)."""
        return bool(self.user_ops) or any(op.route != "decompose" for op in self.ops)

    def op_types(self, route: str) -> tuple[str, ...]:
        """The op types that take ``route``, in plan order."""
        return tuple(op.op_type for op in self.ops if op.route == route)

    @property
    def plugin_ids(self) -> tuple[str, ...]:
        """``<namespace>::<name>:<version>`` of every plugin of ours or TensorRT's the engine needs at run time, sorted
        (the user's own are in ``user_ops``)."""
        return tuple(sorted({op.plugin.id for op in self.ops if op.route != "decompose"}))

    def to_json(self) -> dict[str, Any]:
        """The metadata record: the mode and the per-op plans (not the library, see above), and the user's ops where
        there are any."""
        data: dict[str, Any] = {"mode": self.mode, "ops": [op.to_json() for op in self.ops]}
        if self.user_ops:
            data["user_ops"] = [op.to_json() for op in self.user_ops]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PluginPlan:
        """The inverse of ``to_json``."""
        return cls(str(data["mode"]), ops=tuple(OpPlan.from_json(op) for op in data["ops"]),
                   user_ops=tuple(UserOpPlan.from_json(op) for op in data.get("user_ops", ())))
