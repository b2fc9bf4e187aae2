"""Our EfficientNMS_TRT IPluginV3 creator, loaded into TensorRT-RTX's real plugin registry (no GPU needed): it
advertises TensorRT's field names and types (the op definition's attributes), creates plugins from them
(class_agnostic optional, as in TensorRT's creator), and refuses a missing field or a value out of range with our
log line."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from torchtrt_ext import _native
from torchtrt_ext.errors import LibraryNotFoundError
from torchtrt_ext.ops.efficient_nms import SPEC

trt = pytest.importorskip("tensorrt_rtx", reason="tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')")
FIELD_TYPES = {"float": trt.PluginFieldType.FLOAT32, "int": trt.PluginFieldType.INT32}
VALUES = {"score_threshold": 0.3, "iou_threshold": 0.5, "max_output_boxes": 7, "background_class": -1,
          "score_activation": 0, "class_agnostic": 1, "box_coding": 1}


@pytest.fixture(scope="module")
def creator() -> Iterator[object]:
    try:
        library = _native.plugin_library_path()
    except LibraryNotFoundError as exc:
        pytest.skip(f"plugin library not built: {exc}")
    registry = trt.get_plugin_registry()
    handle = registry.load_library(str(library))
    # Deregistered afterwards: the registry is the process's, and a later load_library of the same creators fails.
    try:
        found = registry.get_creator(SPEC.name, SPEC.version, "torchtrt_ext")
        assert found is not None, "the plugin library registers EfficientNMS_TRT 1 in namespace torchtrt_ext"
        yield found
    finally:
        registry.deregister_library(handle)


def fields(**values: float) -> object:
    items = []
    for attr in SPEC.attrs:
        if attr.name in values:
            kind = FIELD_TYPES[attr.kind]
            data = np.array([values[attr.name]], np.float32 if kind == trt.PluginFieldType.FLOAT32 else np.int32)
            items.append(trt.PluginField(attr.name, data, kind))
    return trt.PluginFieldCollection(items)


def test_creator_advertises_tensorrts_fields(creator: object) -> None:
    advertised = [(f.name, f.type) for f in creator.field_names]  # type: ignore[attr-defined]
    assert advertised == [(a.name, FIELD_TYPES[a.kind]) for a in SPEC.attrs]


def test_creates_a_plugin_from_the_fields(creator: object) -> None:
    without_optional = {k: v for k, v in VALUES.items() if k != "class_agnostic"}
    for values in (VALUES, without_optional):
        plugin = creator.create_plugin("nms", fields(**values), trt.TensorRTPhase.BUILD)  # type: ignore[attr-defined]
        assert plugin is not None
        core = plugin.get_capability_interface(trt.PluginCapabilityType.CORE)
        assert (core.plugin_name, core.plugin_version, core.plugin_namespace) == (SPEC.name, "1", "torchtrt_ext")


@pytest.mark.parametrize("values,message", [
    ({**VALUES, "box_coding": 2}, "field 'box_coding' is 2, expected 0 or 1"),
    ({**VALUES, "iou_threshold": 1.5}, "field 'iou_threshold' is 1.5"),
    ({**VALUES, "max_output_boxes": 0}, "field 'max_output_boxes' is 0, expected a value >= 1"),
    ({k: v for k, v in VALUES.items() if k != "score_threshold"}, "missing field 'score_threshold'"),
])
def test_bad_fields_give_no_plugin_and_our_message(creator: object, values: dict, message: str,
                                                   capfd: pytest.CaptureFixture[str]) -> None:
    assert creator.create_plugin("nms", fields(**values), trt.TensorRTPhase.BUILD) is None  # type: ignore[attr-defined]
    assert message in capfd.readouterr().err
