"""``Engine``: a serialized TensorRT plan plus the metadata needed to run, cache and check it.

File layout (little endian)::

    b"TTXENG01"  u64 metadata_length  u64 plan_length  metadata (canonical JSON, UTF-8)  plan  sha256(metadata + plan)

The metadata is written canonically (sorted keys, no spaces), and a loaded engine keeps the exact bytes it was read
from, so ``save(load(path))`` reproduces the file byte for byte. The trailing checksum lets the cache tell a
truncated or corrupted file from a valid one without handing it to TensorRT.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torchtrt_ext._files import atomic_write
from torchtrt_ext.backend.options import BuildOptions, Target
from torchtrt_ext.backend.plugin_plan import PluginPlan
from torchtrt_ext.backend.profiles import Profile
from torchtrt_ext.errors import CorruptEngineError, EngineCompatibilityError, InvalidInputError, failure

MAGIC = b"TTXENG01"
_HEADER = struct.Struct("<8sQQ")
_DIGEST = 32
FORMAT_VERSION = 2  # 2: options, target and plugin_plan, in place of build settings and flat target and plugin facts

# TensorRT DataType member name -> torch dtype name (the metadata stores torch names)
TRT_DTYPE_NAMES = {"FLOAT": "float32", "HALF": "float16", "BF16": "bfloat16", "INT8": "int8", "INT32": "int32",
                   "INT64": "int64", "BOOL": "bool", "UINT8": "uint8", "FP8": "float8_e4m3fn",
                   "E8M0": "float8_e8m0fnu"}


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One engine input or output: name, torch dtype name, shape with -1 for dynamic dims."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TensorInfo:
        return cls(str(data["name"]), str(data["dtype"]), tuple(int(d) for d in data["shape"]))


@dataclasses.dataclass(frozen=True)
class EngineMetadata:
    """Everything about an engine except the plan: its tensors and profiles, the ``BuildOptions`` it was built with,
    the ``Target`` it was built for, and how its custom ops reach TensorRT."""

    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    profiles: tuple[Profile, ...]
    options: BuildOptions
    target: Target
    plugin_plan: PluginPlan = PluginPlan("none")  # per custom op: its plugin binding and route (no library path)
    plugins_embedded: bool = False
    output_tree: Mapping[str, Any] | None = None  # structure of the original model's outputs (runtime.output_tree)
    torchtrt_ext_version: str = ""
    model_key: str = ""  # the engine cache's model key (cache.cache_keys), recorded when cached; "" otherwise

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.outputs]

    @property
    def plugin_mode(self) -> str:
        """The plugin plan's mode: "cpp", "python", "decompose", "tensorrt" or "none" (``PluginPlan.mode``)."""
        return self.plugin_plan.mode

    @property
    def plugins(self) -> tuple[str, ...]:
        """``<namespace>::<name>:<version>`` of each plugin the engine needs at run time (``PluginPlan.plugin_ids``)."""
        return self.plugin_plan.plugin_ids

    @property
    def backend(self) -> str:
        """The target's backend ("tensorrt" or "tensorrt_rtx")."""
        return self.target.backend

    @property
    def trt_version(self) -> str:
        """The target's TensorRT (or TensorRT-RTX) version."""
        return self.target.trt_version

    @property
    def gpu_name(self) -> str | None:
        """The target's GPU, None when built without one."""
        return self.target.gpu_name

    @property
    def compute_capability(self) -> str | None:
        """The target's compute capability ("8.9"), None when built without a GPU."""
        return self.target.compute_capability

    def describe_target(self) -> str:
        gpu = (f"{self.gpu_name} (compute capability {self.compute_capability})" if self.compute_capability
               else "no particular GPU (built on a machine without one)")
        return f"{self.backend} {self.trt_version} for {gpu}"

    def to_json(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
            "profiles": [p.to_json() for p in self.profiles],
            "options": self.options.to_json(),
            "target": self.target.to_json(),
            "plugin_plan": self.plugin_plan.to_json(),
            "plugins_embedded": self.plugins_embedded,
            "output_tree": self.output_tree,
            "torchtrt_ext_version": self.torchtrt_ext_version,
            "model_key": self.model_key,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EngineMetadata:
        """The inverse of ``to_json``: CorruptEngineError when a field is missing or malformed (``format_version``
        included), EngineCompatibilityError for metadata of another format (written by another torchtrt_ext)."""
        if not isinstance(data, Mapping) or "format_version" not in data:
            raise CorruptEngineError(failure("engine metadata without a format_version",
                                             f"a JSON object with format_version {FORMAT_VERSION}",
                                             "rebuild the engine"))
        if data["format_version"] != FORMAT_VERSION:
            raise EngineCompatibilityError(failure(
                f"engine metadata format {data['format_version']!r}", f"format {FORMAT_VERSION}",
                "rebuild the engine with this torchtrt_ext version"))
        try:
            return cls(
                inputs=tuple(TensorInfo.from_json(t) for t in data["inputs"]),
                outputs=tuple(TensorInfo.from_json(t) for t in data["outputs"]),
                profiles=tuple(Profile.from_json(p) for p in data["profiles"]),
                options=BuildOptions.from_json(data["options"]),
                target=Target.from_json(data["target"]),
                plugin_plan=PluginPlan.from_json(data["plugin_plan"]),
                plugins_embedded=bool(data["plugins_embedded"]),  # every key is written: one missing is corrupt
                output_tree=data["output_tree"],
                torchtrt_ext_version=str(data["torchtrt_ext_version"]),
                model_key=str(data["model_key"]),
            )
        except (KeyError, ValueError, TypeError, AttributeError) as exc:  # a missing key or a value of another type
            raise CorruptEngineError(failure(f"engine metadata does not parse ({type(exc).__name__}: {exc})",
                                             f"the fields of format {FORMAT_VERSION}", "rebuild the engine")) from None

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.to_json())

    def replace(self, **changes: Any) -> EngineMetadata:
        return dataclasses.replace(self, **changes)


def canonical_json(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


class Engine:
    """A serialized TensorRT plan and its ``EngineMetadata``. Immutable; ``TRTModule(engine)`` runs it."""

    def __init__(self, plan: bytes, metadata: EngineMetadata, *, _metadata_bytes: bytes | None = None) -> None:
        if not isinstance(plan, (bytes, bytearray, memoryview)) or len(plan) == 0:
            raise InvalidInputError(failure("Engine got an empty or non-bytes plan", "the serialized engine bytes",
                                            "pass the output of build_engine"))
        self._plan = bytes(plan)
        self._metadata = metadata
        self._metadata_bytes = _metadata_bytes if _metadata_bytes is not None else metadata.canonical_bytes()

    @property
    def plan(self) -> bytes:
        return self._plan

    @property
    def metadata(self) -> EngineMetadata:
        return self._metadata

    @property
    def metadata_bytes(self) -> bytes:
        """The exact metadata bytes this engine was built or loaded with."""
        return self._metadata_bytes

    def __repr__(self) -> str:
        m = self._metadata
        return (f"Engine({len(self._plan)} bytes, {m.describe_target()}, inputs={m.input_names}, "
                f"outputs={m.output_names}, profiles={len(m.profiles)})")

    def with_metadata(self, **changes: Any) -> Engine:
        return Engine(self._plan, self._metadata.replace(**changes))

    def to_bytes(self) -> bytes:
        body = self._metadata_bytes + self._plan
        header = _HEADER.pack(MAGIC, len(self._metadata_bytes), len(self._plan))
        return header + body + hashlib.sha256(body).digest()

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "<bytes>") -> Engine:
        """Parse an engine file's bytes; CorruptEngineError when anything does not add up."""
        def corrupt(why: str, remedy: str = "rebuild it (delete the file; the cache rebuilds on its own)"
                    ) -> CorruptEngineError:
            return CorruptEngineError(failure(f"{source} is not a valid torchtrt_ext engine file: {why}",
                                              "a file written by Engine.save / TRTModule.save", remedy))
        head = bytes(data[:len(MAGIC)])
        if head != MAGIC[:len(head)]:  # a short prefix of MAGIC is a truncated engine file, anything else is not one
            raise corrupt(f"starts with {head!r}, not {MAGIC!r} (not an engine file)",
                          "pass an engine file written by Engine.save or 'torchtrt-ext build'; to make one from an "
                          "ONNX model, call build_engine(path) (torchtrt-ext build model.onnx -o model.engine)")
        if len(data) < _HEADER.size + _DIGEST:
            raise corrupt(f"only {len(data)} bytes")
        magic, meta_len, plan_len = _HEADER.unpack_from(data)
        if _HEADER.size + meta_len + plan_len + _DIGEST != len(data):
            raise corrupt(f"sizes in the header ({meta_len} + {plan_len}) do not match the file ({len(data)} bytes)")
        body = data[_HEADER.size:_HEADER.size + meta_len + plan_len]
        if hashlib.sha256(body).digest() != data[-_DIGEST:]:
            raise corrupt("checksum mismatch (truncated or modified)")
        meta_bytes, plan = body[:meta_len], body[meta_len:]
        try:
            metadata = EngineMetadata.from_json(json.loads(meta_bytes.decode("ascii")))
        except ValueError as exc:  # not ASCII, not JSON
            raise corrupt(f"metadata does not parse ({type(exc).__name__}: {exc})") from None
        except CorruptEngineError as exc:
            raise corrupt(exc.what) from None
        return cls(plan, metadata, _metadata_bytes=meta_bytes)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the engine file atomically (temp file in the same folder, then rename)."""
        target = Path(path)
        atomic_write(target, self.to_bytes())
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Engine:
        target = Path(path)
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            raise InvalidInputError(failure(f"engine file {target} does not exist", "a path written by save()",
                                            "check the path")) from None
        except IsADirectoryError:
            raise InvalidInputError(failure(f"engine file {target} is a directory", "a path written by save()",
                                            f"pass the engine file inside it (e.g. {target}/model.engine)")) from None
        except OSError as exc:
            raise InvalidInputError(failure(f"engine file {target} cannot be read: {exc.strerror or exc}",
                                            "a readable file written by save()", "check the path and its "
                                            "permissions")) from None
        return cls.from_bytes(data, source=str(target))


def is_engine_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a readable file starting like an engine file (``MAGIC``), as opposed to a bare plan."""
    try:
        with open(path, "rb") as handle:
            return handle.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


