"""The L2Norm IPluginV3 in libtorchtrt_ext_plugins.so, driven the way TensorRT drives it, without TensorRT.

tests/plugins/harness_l2norm.cpp is compiled here against the TensorRT headers and dlopens the library: getCreators ->
createPlugin from fields -> getOutputShapes (test IExprBuilder, static and dynamic dims) -> the
supportsFormatCombination matrix -> getFieldsToSerialize -> createPlugin round trip -> clone independence ->
attachToContext -> bad fields; on a GPU, enqueue for float32/float16/bfloat16 against a CPU reference and against
torchtrt_ext.ops.l2norm. Needs TensorRT headers (marker trt_headers: skipped with the reason where there are none).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.plugins._plugin_harness import (PLUGIN_SOURCES, ROOT, asan_harness, built_library, check_conformance_cpu,
                                           check_fields_match, compile_harness, compiler, cuda_home, run_harness)
from torchtrt_ext._native import plugin_library_path
from torchtrt_ext.ops.l2norm import SPEC, l2norm

pytestmark = pytest.mark.trt_headers

# Python attribute kind (OpSpec) -> the PluginFieldType the C++ creator must read and write.
FIELD_TYPE_OF_KIND = {"int": "kINT32", "float": "kFLOAT32"}
TOLERANCE = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 1e-2}
TORCH_DTYPE = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(plugin_library_path, "plugin library")


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, trt_include: Path) -> Path:
    """The harness under AddressSanitizer/UBSan (for the CPU checks), where the compiler supports them."""
    return asan_harness(tmp_path_factory, trt_include, "harness")


def test_plugin_sources_compile_warning_free(trt_include: Path) -> None:
    """-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Werror on every plugin source (TensorRT headers as system)."""
    for source in PLUGIN_SOURCES:
        cmd = [compiler(), "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Wpedantic", "-Wshadow",
               "-Wconversion", "-Werror", "-I", str(ROOT / "csrc"), "-isystem", str(trt_include),
               "-isystem", str(cuda_home() / "include"), str(source)]
        result = subprocess.run(cmd, capture_output=True, text=True)
        assert result.returncode == 0, f"{source.relative_to(ROOT)} has warnings:\n{result.stderr}"


def test_plugin_library_exports_only_entry_points_and_launchers(library: Path) -> None:
    nm = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True)
    if nm.returncode != 0:
        pytest.skip(f"nm could not read {library}: {nm.stderr}")
    exported = {line.split()[-1] for line in nm.stdout.splitlines() if line.split()[1:2] == ["T"]}
    assert {"getCreators", "setLoggerFinder", "torchtrt_ext_register_plugins"} <= exported
    unexpected = {s for s in exported - {"getCreators", "setLoggerFinder", "torchtrt_ext_register_plugins"}
                  if not s.startswith("torchtrt_ext_") and not s.startswith("_")}
    assert not unexpected, f"symbols leaking out of the plugin library (-fvisibility=hidden expected): {unexpected}"


def test_conformance_cpu(harness: Path, library: Path) -> None:
    check_conformance_cpu(harness, library, min_checks=100)


def test_cpp_fields_match_op_definition(harness: Path, library: Path) -> None:
    """The creator's name/version/namespace and field list (advertised and serialized) follow torchtrt_ext.ops."""
    check_fields_match(harness, library, SPEC, [f"{a.name} {FIELD_TYPE_OF_KIND[a.kind]} 1" for a in SPEC.attrs])


@pytest.mark.gpu
def test_conformance_gpu_enqueue(tmp_path: Path, trt_include: Path, library: Path) -> None:
    """enqueue on real buffers: the harness checks a float64 CPU reference; here the same data against ops.l2norm."""
    binary = compile_harness(tmp_path / "harness", trt_include, sanitize=False)  # ASan and the CUDA driver clash
    dump = tmp_path / "dump"
    dump.mkdir()
    run = run_harness(binary, library, "gpu", "--dump", str(dump))
    print(run.output)
    assert run.returncode == 0 and not run.lines("FAIL"), run.output
    summary = run.summary()
    assert summary is not None and summary[0] == "gpu" and summary[2] == 0, run.output

    cases = (dump / "cases.txt").read_text().split("\n")
    checked = {name: 0 for name in TOLERANCE}
    for line in filter(None, cases):
        index, dtype_name, axis, eps, shape_text = line.split()
        shape = tuple(int(d) for d in shape_text.split("x"))
        x = torch.from_numpy(np.fromfile(dump / f"case{index}_x.f32", dtype=np.float32).reshape(shape))
        y = torch.from_numpy(np.fromfile(dump / f"case{index}_y.f32", dtype=np.float32).reshape(shape))
        dtype = TORCH_DTYPE[dtype_name]
        expected = l2norm(x.to(dtype), dim=int(axis), eps=float(eps)).float()
        err = ((y.double() - expected.double()).abs() / expected.double().abs().clamp_min(1e-3)).max().item()
        assert err < TOLERANCE[dtype_name], f"case {line}: max rel error {err:.3g} vs ops.l2norm"
        checked[dtype_name] += 1
    assert all(n > 0 for n in checked.values()), checked
