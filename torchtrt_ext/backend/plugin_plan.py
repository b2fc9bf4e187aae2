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

    @property
    def needs_plugins(self) -> bool:
        """Whether some op reaches TensorRT as a plugin (not decomposed)."""
        return any(op.route != "decompose" for op in self.ops)

    def op_types(self, route: str) -> tuple[str, ...]:
        """The op types that take ``route``, in plan order."""
        return tuple(op.op_type for op in self.ops if op.route == route)

    @property
    def plugin_ids(self) -> tuple[str, ...]:
        """``<namespace>::<name>:<version>`` of every plugin the engine needs at run time, sorted."""
        return tuple(sorted({op.plugin.id for op in self.ops if op.route != "decompose"}))

    def to_json(self) -> dict[str, Any]:
        """The metadata record: the mode and the per-op plans (not the library, see above)."""
        return {"mode": self.mode, "ops": [op.to_json() for op in self.ops]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PluginPlan:
        """The inverse of ``to_json``."""
        return cls(str(data["mode"]), ops=tuple(OpPlan.from_json(op) for op in data["ops"]))
