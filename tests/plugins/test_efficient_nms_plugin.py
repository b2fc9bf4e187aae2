"""Our EfficientNMS_TRT IPluginV3 creator, loaded into TensorRT-RTX's real plugin registry (no GPU needed): it
advertises TensorRT's field names and types (the op definition's attributes), creates plugins from them
(class_agnostic optional, as in TensorRT's creator), and refuses a missing field or a value out of range with our
log line.

tests/plugins/harness_efficient_nms.cpp drives the plugin the way TensorRT does, without TensorRT (marker
trt_headers): fields -> createPlugin -> getOutputDataTypes/getOutputShapes -> the supportsFormatCombination matrix ->
configurePlugin/getWorkspaceSize/onShapeChange -> getFieldsToSerialize -> createPlugin(kRUNTIME) round trip -> clone
and context independence -> bad fields; on a GPU, enqueue for float32/float16/bfloat16 against a brute-force NMS in
the harness, and here against tests/ops/nms_reference.py on the same data."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.ops.nms_reference import reference_nms
from tests.plugins._plugin_harness import (HERE, asan_harness, built_library, check_conformance_cpu, check_fields_match,
                                           compile_harness, run_harness)
from torchtrt_ext import _native
from torchtrt_ext.errors import LibraryNotFoundError
from torchtrt_ext.ops.efficient_nms import SPEC

SOURCE = HERE / "harness_efficient_nms.cpp"
# Python attribute kind (OpSpec) -> the PluginFieldType the C++ creator reads and writes.
FIELD_TYPE_OF_KIND = {"int": "kINT32", "float": "kFLOAT32"}
SCORE_TOLERANCE = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 8e-3}
VALUES = {"score_threshold": 0.3, "iou_threshold": 0.5, "max_output_boxes": 7, "background_class": -1,
          "score_activation": 0, "class_agnostic": 1, "box_coding": 1}


@pytest.fixture(scope="module")
def trt() -> ModuleType:
    return pytest.importorskip("tensorrt_rtx", reason="tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')")


@pytest.fixture(scope="module")
def creator(trt: ModuleType) -> Iterator[object]:
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


def fields(trt: ModuleType, **values: float) -> object:
    field_types = {"float": trt.PluginFieldType.FLOAT32, "int": trt.PluginFieldType.INT32}
    items = []
    for attr in SPEC.attrs:
        if attr.name in values:
            kind = field_types[attr.kind]
            data = np.array([values[attr.name]], np.float32 if kind == trt.PluginFieldType.FLOAT32 else np.int32)
            items.append(trt.PluginField(attr.name, data, kind))
    return trt.PluginFieldCollection(items)


def test_creator_advertises_tensorrts_fields(trt: ModuleType, creator: object) -> None:
    field_types = {"float": trt.PluginFieldType.FLOAT32, "int": trt.PluginFieldType.INT32}
    advertised = [(f.name, f.type) for f in creator.field_names]  # type: ignore[attr-defined]
    assert advertised == [(a.name, field_types[a.kind]) for a in SPEC.attrs]


def test_creates_a_plugin_from_the_fields(trt: ModuleType, creator: object) -> None:
    without_optional = {k: v for k, v in VALUES.items() if k != "class_agnostic"}
    for values in (VALUES, without_optional):
        plugin = creator.create_plugin(  # type: ignore[attr-defined]
            "nms", fields(trt, **values), trt.TensorRTPhase.BUILD)
        assert plugin is not None
        core = plugin.get_capability_interface(trt.PluginCapabilityType.CORE)
        assert (core.plugin_name, core.plugin_version, core.plugin_namespace) == (SPEC.name, "1", "torchtrt_ext")


@pytest.mark.parametrize("values,message", [
    ({**VALUES, "box_coding": 2}, "field 'box_coding' is 2, expected 0 or 1"),
    ({**VALUES, "iou_threshold": 1.5}, "field 'iou_threshold' is 1.5"),
    ({**VALUES, "max_output_boxes": 0}, "field 'max_output_boxes' is 0, expected a value >= 1"),
    ({k: v for k, v in VALUES.items() if k != "score_threshold"}, "missing field 'score_threshold'"),
])
def test_bad_fields_give_no_plugin_and_our_message(trt: ModuleType, creator: object, values: dict, message: str,
                                                   capfd: pytest.CaptureFixture[str]) -> None:
    made = creator.create_plugin("nms", fields(trt, **values), trt.TensorRTPhase.BUILD)  # type: ignore[attr-defined]
    assert made is None
    assert message in capfd.readouterr().err


# ------------------------------------------------------------------------------------------------ the C++ harness
@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(_native.plugin_library_path, "plugin library")


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, trt_include: Path) -> Path:
    """The harness under AddressSanitizer/UBSan (for the CPU checks), where the compiler supports them."""
    return asan_harness(tmp_path_factory, trt_include, "harness_nms", source=SOURCE)


@pytest.mark.trt_headers
def test_conformance_cpu(harness: Path, library: Path) -> None:
    """Every CPU check passes, among them the round trip getFieldsToSerialize -> createPlugin(kRUNTIME) with each field
    distinct from the others (an engine loaded with the IoU threshold read from the score threshold fails it), the
    format matrix and the workspace at the profile's largest shapes."""
    check_conformance_cpu(harness, library, min_checks=80)


@pytest.mark.trt_headers
def test_cpp_fields_match_op_definition(harness: Path, library: Path) -> None:
    """The creator's name/version/namespace and field list (advertised and serialized) follow the op definition."""
    check_fields_match(harness, library, SPEC, [f"{a.name} {FIELD_TYPE_OF_KIND[a.kind]} 1" for a in SPEC.attrs])


@pytest.mark.trt_headers
@pytest.mark.gpu
def test_conformance_gpu_enqueue(tmp_path: Path, trt_include: Path, library: Path) -> None:
    """enqueue on real buffers, after a serialize/recreate/attach as TensorRT does: the harness checks its brute-force
    NMS on random and boundary cases (scores and IoU exactly on the thresholds, equal scores, background class 0, one
    image saturating K); here the same data against tests/ops/nms_reference.py."""
    binary = compile_harness(tmp_path / "harness_nms", trt_include, sanitize=False, source=SOURCE)  # ASan vs CUDA
    dump = tmp_path / "dump"
    dump.mkdir()
    run = run_harness(binary, library, "gpu", "--dump", str(dump))
    print(run.output)
    assert run.returncode == 0 and not run.lines("FAIL"), run.output
    summary = run.summary()
    assert summary is not None and summary[0] == "gpu" and summary[2] == 0, run.output

    checked = {name: 0 for name in SCORE_TOLERANCE}
    for line in filter(None, (dump / "cases.txt").read_text().split("\n")):
        index, dtype_name, b, a, c, score_t, iou_t, k, background, activation, agnostic, coding = line.split()
        b, a, c, k = int(b), int(a), int(c), int(k)
        stem = dump / f"case{index}"
        boxes = np.fromfile(f"{stem}_boxes.f32", dtype=np.float32).reshape(b, a, 4)
        scores = np.fromfile(f"{stem}_scores.f32", dtype=np.float32).reshape(b, a, c)
        num = np.fromfile(f"{stem}_num.i32", dtype=np.int32)
        classes = np.fromfile(f"{stem}_classes.i32", dtype=np.int32).reshape(b, k)
        out_scores = np.fromfile(f"{stem}_dscores.f32", dtype=np.float32).reshape(b, k)
        expected = reference_nms(boxes, scores, float(score_t), float(iou_t), k, int(background), bool(int(activation)),
                                 bool(int(agnostic)), int(coding))
        for image, kept in enumerate(expected):
            assert num[image] == len(kept), f"case {line}: image {image}"
            assert classes[image, :len(kept)].tolist() == [cls for _, cls, _ in kept], f"case {line}: image {image}"
            np.testing.assert_allclose(out_scores[image, :len(kept)], [s for _, _, s in kept],
                                       atol=SCORE_TOLERANCE[dtype_name], err_msg=f"case {line}: image {image}")
        checked[dtype_name] += 1
    assert all(n >= 7 for n in checked.values()), checked
