"""The engine file (backend/engine.py): the metadata round trip, and every file that does not add up refused as a
CorruptEngineError (what the cache treats as a miss), metadata of another format as an EngineCompatibilityError.
The plan bytes are a stand-in: nothing here hands them to TensorRT."""
from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from torchtrt_ext.backend.engine import (FORMAT_VERSION, MAGIC, Engine, EngineMetadata, TensorInfo, canonical_json,
                                         is_engine_file)
from torchtrt_ext.backend.options import BuildOptions, Target
from torchtrt_ext.backend.plugin_plan import OpPlan, PluginPlan
from torchtrt_ext.backend.profiles import Profile
from torchtrt_ext.errors import CorruptEngineError, EngineCompatibilityError, InvalidInputError
from torchtrt_ext.ops.spec import PluginRef

PLAN = b"stand-in plan bytes"
L2NORM = PluginRef("L2Norm", "1", "torchtrt_ext", "torchtrt_ext")
METADATA = EngineMetadata(
    inputs=(TensorInfo("x", "float32", (-1, 3, 8, 8)),), outputs=(TensorInfo("y", "float16", (-1, 3, 8, 8)),),
    profiles=(Profile({"x": ((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8))}),),
    options=BuildOptions.of(backend="tensorrt_rtx", precision="fp16", plugins="cpp"),
    target=Target("tensorrt_rtx", "1.7.1", "NVIDIA H200", "9.0", "ab" * 32),
    plugin_plan=PluginPlan("cpp", ops=(OpPlan(L2NORM, "cpp"),)), plugins_embedded=True,
    output_tree={"type": "tensor", "index": 0}, torchtrt_ext_version="0.1.0")


def _file_with_metadata(change: Callable[[dict[str, Any]], object]) -> bytes:
    """An engine file (valid header and checksum) whose metadata JSON ``change`` edited in place."""
    data = METADATA.to_json()
    change(data)
    return Engine(PLAN, METADATA, _metadata_bytes=canonical_json(data)).to_bytes()


def test_metadata_and_plan_round_trip_byte_for_byte(tmp_path: Path) -> None:
    engine = Engine(PLAN, METADATA)
    loaded = Engine.load(engine.save(tmp_path / "a.engine"))
    assert loaded.metadata == METADATA and loaded.plan == PLAN
    assert loaded.metadata_bytes == engine.metadata_bytes == METADATA.canonical_bytes()
    assert loaded.to_bytes() == (tmp_path / "a.engine").read_bytes() and is_engine_file(tmp_path / "a.engine")
    assert json.loads(loaded.metadata_bytes)["format_version"] == FORMAT_VERSION
    assert loaded.metadata.inputs[0].shape == (-1, 3, 8, 8) and loaded.metadata.output_tree == METADATA.output_tree


def test_metadata_is_written_canonically() -> None:
    """Sorted keys, no spaces, ASCII only (the file reads back byte for byte, the cache key hashes these bytes)."""
    assert canonical_json({"b": [1, 2], "a": "é"}) == b'{"a":"\\u00e9","b":[1,2]}'
    assert METADATA.canonical_bytes() == canonical_json(METADATA.to_json())
    assert list(json.loads(METADATA.canonical_bytes())) == sorted(METADATA.to_json())


def test_a_loaded_engine_keeps_the_metadata_bytes_it_was_read_from(tmp_path: Path) -> None:
    """Metadata written another way (spaces, key order) is read, kept as it was and written back unchanged."""
    spaced = json.dumps(METADATA.to_json(), indent=1).encode("ascii")
    data = Engine(PLAN, METADATA, _metadata_bytes=spaced).to_bytes()
    (tmp_path / "spaced.engine").write_bytes(data)
    loaded = Engine.load(tmp_path / "spaced.engine")
    assert loaded.metadata == METADATA and loaded.metadata_bytes == spaced and loaded.to_bytes() == data


def test_the_file_layout_is_magic_sizes_metadata_plan_digest() -> None:
    data = Engine(PLAN, METADATA).to_bytes()
    meta = METADATA.canonical_bytes()
    assert data == (MAGIC + struct.pack("<QQ", len(meta), len(PLAN)) + meta + PLAN
                    + hashlib.sha256(meta + PLAN).digest())


def test_metadata_says_what_the_engine_needs() -> None:
    assert METADATA.input_names == ["x"] and METADATA.output_names == ["y"]
    assert METADATA.plugin_mode == "cpp" and METADATA.plugins == ("torchtrt_ext::L2Norm:1",)
    assert (METADATA.backend, METADATA.trt_version, METADATA.gpu_name, METADATA.compute_capability) == (
        "tensorrt_rtx", "1.7.1", "NVIDIA H200", "9.0")
    assert METADATA.describe_target() == "tensorrt_rtx 1.7.1 for NVIDIA H200 (compute capability 9.0)"
    cpu = METADATA.replace(target=Target("tensorrt_rtx", "1.7.1"))
    assert cpu.describe_target() == "tensorrt_rtx 1.7.1 for no particular GPU (built on a machine without one)"
    engine = Engine(PLAN, METADATA)
    assert repr(engine) == ("Engine(19 bytes, tensorrt_rtx 1.7.1 for NVIDIA H200 (compute capability 9.0), "
                            "inputs=['x'], outputs=['y'], profiles=1)")
    relabelled = engine.with_metadata(torchtrt_ext_version="9.9.9")
    assert relabelled.plan == PLAN and relabelled.metadata.torchtrt_ext_version == "9.9.9"
    assert json.loads(relabelled.metadata_bytes)["torchtrt_ext_version"] == "9.9.9"


def test_metadata_without_a_format_version_is_corrupt() -> None:
    """Not accepted as the current format: a file without one was not written by Engine.save."""
    with pytest.raises(CorruptEngineError, match="without a format_version"):
        EngineMetadata.from_json({k: v for k, v in METADATA.to_json().items() if k != "format_version"})
    with pytest.raises(CorruptEngineError, match=r"x\.engine is not a valid torchtrt_ext engine file: engine "
                                                 r"metadata without a format_version"):
        Engine.from_bytes(_file_with_metadata(lambda m: m.pop("format_version")), source="x.engine")


@pytest.mark.parametrize("version", [FORMAT_VERSION - 1, FORMAT_VERSION + 1, None, str(FORMAT_VERSION)])
def test_metadata_of_another_format_is_another_torchtrt_exts(version: object) -> None:
    with pytest.raises(EngineCompatibilityError, match=f"engine metadata format {version!r}") as info:
        Engine.from_bytes(_file_with_metadata(lambda m: m.update(format_version=version)))
    assert not isinstance(info.value, CorruptEngineError) and "rebuild" in info.value.remedy


# a key missing anywhere in the metadata (top level or nested) and values of the wrong kind
BROKEN_METADATA: dict[str, Callable[[dict[str, Any]], object]] = {
    **{f"no {key}": (lambda key: lambda m: m.pop(key))(key)
       for key in ("inputs", "outputs", "profiles", "options", "target", "plugin_plan", "plugins_embedded",
                   "output_tree", "torchtrt_ext_version")},
    "no input shape": lambda m: m["inputs"][0].pop("shape"),
    "no precision": lambda m: m["options"].pop("precision"),
    "no embed_plugins": lambda m: m["options"].pop("embed_plugins"),
    "no backend": lambda m: m["target"].pop("backend"),
    "no plan mode": lambda m: m["plugin_plan"].pop("mode"),
    "no op route": lambda m: m["plugin_plan"]["ops"][0].pop("route"),
    "a shape of text": lambda m: m["inputs"][0].update(shape=["a"]),
    "inputs not a list": lambda m: m.update(inputs=3),
    "options not an object": lambda m: m.update(options=[]),
    "a profile out of order": lambda m: m["profiles"][0]["x"].update(min=[8, 3, 8, 8]),
}


@pytest.mark.parametrize("change", BROKEN_METADATA.values(), ids=BROKEN_METADATA.keys())
def test_metadata_missing_a_key_or_malformed_is_corrupt(change: Callable[[dict[str, Any]], object]) -> None:
    data = METADATA.to_json()
    change(data)
    with pytest.raises(CorruptEngineError, match="engine metadata does not parse"):
        EngineMetadata.from_json(data)
    with pytest.raises(CorruptEngineError, match="e.engine is not a valid torchtrt_ext engine file: engine metadata "
                                                 "does not parse") as info:
        Engine.from_bytes(_file_with_metadata(change), source="e.engine")
    assert "rebuild" in info.value.remedy


NOT_ASCII = json.dumps({**METADATA.to_json(), "torchtrt_ext_version": "0.1.0-é"}, ensure_ascii=False).encode()


@pytest.mark.parametrize("metadata, why", [
    (b"[]", "without a format_version"), (b"not json", "does not parse"), (b"", "does not parse"),
    (NOT_ASCII, r"does not parse \(UnicodeDecodeError"),
], ids=["a list", "text", "empty", "UTF-8, not ASCII"])
def test_metadata_that_is_not_an_ascii_json_object_is_corrupt(metadata: bytes, why: str) -> None:
    with pytest.raises(CorruptEngineError, match=f"<bytes> is not a valid torchtrt_ext engine file: .*{why}"):
        Engine.from_bytes(Engine(PLAN, METADATA, _metadata_bytes=metadata).to_bytes())


def test_a_file_that_does_not_add_up_is_corrupt() -> None:
    good = Engine(PLAN, METADATA).to_bytes()
    flipped = bytearray(good)
    flipped[-40] ^= 1  # one byte of the plan
    cases = {
        bytes(flipped): "checksum mismatch",
        good[:-1]: rf"sizes in the header \(\d+ \+ 19\) do not match the file \({len(good) - 1} bytes\)",
        good + b"\0": rf"sizes in the header \(\d+ \+ 19\) do not match the file \({len(good) + 1} bytes\)",
        good[:30]: "only 30 bytes",
        MAGIC[:5]: "only 5 bytes",
        b"": "only 0 bytes",
        # the smallest file that adds up (no metadata, no plan) is read as far as its metadata
        MAGIC + struct.pack("<QQ", 0, 0) + hashlib.sha256(b"").digest(): r"metadata does not parse \(JSONDecodeError",
        b"PK\x03\x04 a zip" + bytes(40): r"starts with b'PK\\x03\\x04 a z', not b'TTXENG01' \(not an engine file\)",
    }
    for data, why in cases.items():
        with pytest.raises(CorruptEngineError, match=f"f.engine is not a valid torchtrt_ext engine file: {why}"):
            Engine.from_bytes(data, source="f.engine")
    with pytest.raises(CorruptEngineError, match="build_engine") as info:  # not an engine at all: how to make one
        Engine.from_bytes(b"\x08\x07 an onnx model" + bytes(40))
    assert "torchtrt-ext build" in info.value.remedy


def test_loading_and_making_engines_refuse_what_is_not_one(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        Engine.load(tmp_path / "missing.engine")
    (tmp_path / "cut.engine").write_bytes(Engine(PLAN, METADATA).to_bytes()[:-1])
    with pytest.raises(CorruptEngineError, match=f"^{tmp_path / 'cut.engine'} is not a valid torchtrt_ext engine"):
        Engine.load(tmp_path / "cut.engine")
    for plan in (b"", "text"):
        with pytest.raises(InvalidInputError, match="empty or non-bytes plan"):
            Engine(plan, METADATA)  # type: ignore[arg-type]
    (tmp_path / "plan.trt").write_bytes(b"a bare TensorRT plan")
    assert not is_engine_file(tmp_path / "plan.trt") and not is_engine_file(tmp_path / "missing.engine")
    assert not is_engine_file(tmp_path)  # a folder
