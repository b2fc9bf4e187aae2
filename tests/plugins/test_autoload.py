"""libtorchtrt_ext_plugins_autoload.so: loaded by a plain dlopen (Triton's TensorRT backend ``plugins=``, ONNX Runtime's
``trt_extra_plugin_lib_paths``), it registers the plugin library's creators in TensorRT's registry by itself.

tests/plugins/autoload_check.cpp plays TensorRT: it exports ``getPluginRegistry`` (``-rdynamic``) returning the
stand-in registry of test_registry.h, or hides it, or keeps it in a stand-in ``libnvinfer.so.10`` loaded RTLD_LOCAL
(how Triton's backend and ONNX Runtime's provider hold libnvinfer). No TensorRT library runs here, so what real
TensorRT, Triton and ONNX Runtime do with the library stays unverified. Marker trt_headers (skipped with the reason
where there are none).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.plugins._plugin_harness import HERE, built_library, compiler, cuda_home
from torchtrt_ext._native import PLUGINS_LIB, plugin_autoload_library_path

pytestmark = pytest.mark.trt_headers

SOURCE = HERE / "autoload_check.cpp"
REMEDY = "--backend-config=tensorrt,plugins=<path>/libtorchtrt_ext_plugins_autoload.so (not LD_PRELOAD"


@pytest.fixture(scope="module")
def autoload() -> Path:
    return built_library(plugin_autoload_library_path, "autoload library")


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory, trt_include: Path) -> dict[str, Path]:
    """The check program with getPluginRegistry exported ("dynamic") and hidden ("static"), and the stand-in
    libnvinfer.so.10 ("nvinfer")."""
    out = tmp_path_factory.mktemp("autoload")
    flags = [compiler(), "-std=c++17", "-O0", "-g", "-Wall", "-Wextra", "-Werror", "-isystem", str(trt_include),
             "-isystem", str(cuda_home() / "include")]
    builds = {"dynamic": [str(SOURCE), "-o", str(out / "check_dynamic"), "-ldl", "-rdynamic"],
              "static": [str(SOURCE), "-o", str(out / "check_static"), "-ldl"],
              "nvinfer": ["-shared", "-fPIC", "-fvisibility=hidden", "-DAUTOLOAD_CHECK_FAKE_NVINFER",
                          "-Wl,-soname,libnvinfer.so.10", str(SOURCE), "-o", str(out / "libnvinfer.so.10")]}
    paths = {}
    for name, args in builds.items():
        result = subprocess.run(flags + args, capture_output=True, text=True)
        assert result.returncode == 0, f"compiling {name} failed:\n{' '.join(flags + args)}\n{result.stderr}"
        paths[name] = Path(args[args.index("-o") + 1])
    return paths


def run(program: Path, autoload: Path, *args: str) -> tuple[int, str]:
    result = subprocess.run([str(program), str(autoload), str(autoload.parent / PLUGINS_LIB), *args],
                            capture_output=True, text=True, timeout=120)
    return result.returncode, result.stdout + result.stderr


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} (binutils) not on PATH")
    return path


def test_links_the_plugin_library_beside_it_and_stays_loaded(autoload: Path) -> None:
    dynamic = subprocess.run([tool("readelf"), "-d", str(autoload)], capture_output=True, text=True, check=True).stdout
    assert f"Shared library: [{PLUGINS_LIB}]" in dynamic, dynamic
    assert "(RUNPATH)" in dynamic and "[$ORIGIN]" in dynamic, dynamic
    assert "NODELETE" in dynamic, dynamic  # its creators stay in TensorRT's registry: never unloaded
    assert "libnvinfer" not in dynamic, "the autoload library must not pin a TensorRT version by linking libnvinfer"
    symbols = subprocess.run([tool("nm"), "-D", str(autoload)], capture_output=True, text=True, check=True).stdout
    table = {line.split()[-1]: line.split()[-2] for line in symbols.splitlines() if len(line.split()) >= 2}
    assert table.get("getPluginRegistry") == "w", "getPluginRegistry must be a weak undefined reference"
    assert table.get("torchtrt_ext_register_plugins") == "U"
    exported = {name for name, kind in table.items() if kind == "T"}
    assert exported == {"getCreators", "setLoggerFinder"}, exported


def test_dlopen_registers_each_creator_exactly_once(programs: dict[str, Path], autoload: Path) -> None:
    rc, output = run(programs["dynamic"], autoload, "registry")
    assert rc == 0 and "FAIL" not in output, output
    assert re.search(r"^autoload registry: (1[2-9]|[2-9]\d) checks, 0 failed$", output, re.MULTILINE), output
    assert "ok   the load registered each creator exactly once (L2Norm, DeformConv2d)" in output
    assert "ok   registry holds DeformConv2d version 1 in namespace torchtrt_ext" in output
    assert "ok   loading libtorchtrt_ext_plugins.so registers nothing by itself" in output


def test_registry_of_a_libnvinfer_in_a_local_scope(programs: dict[str, Path], autoload: Path) -> None:
    """Triton's backend and ONNX Runtime's provider load libnvinfer (and then our library) RTLD_LOCAL, so the weak
    reference stays null; the library must find the already loaded libnvinfer.so.N by its soname."""
    rc, output = run(programs["static"], autoload, "localnvinfer", str(programs["nvinfer"]))
    assert rc == 0 and "FAIL" not in output, output
    assert "autoload localnvinfer: 4 checks, 0 failed" in output, output


@pytest.mark.parametrize("mode, cause", [("noregistry", "getPluginRegistry is not a global symbol"),
                                         ("nullregistry", "getPluginRegistry() returned null")])
def test_without_a_registry_the_load_succeeds_and_logs_the_remedy(programs: dict[str, Path], autoload: Path,
                                                                  mode: str, cause: str) -> None:
    program = programs["static" if mode == "noregistry" else "dynamic"]
    rc, output = run(program, autoload, mode)
    assert rc == 0 and "FAIL" not in output and f"autoload {mode}: 2 checks, 0 failed" in output, output
    assert "no TensorRT plugin registry is reachable" in output and cause in output, output
    assert "NOT registered" in output and REMEDY in output, output


def test_ld_preload_before_tensorrt_logs_the_remedy(autoload: Path) -> None:
    """The LD_PRELOAD recipe loads the library before any libnvinfer: it cannot register, must not break the
    program, and says to use the backend's plugins= option."""
    env = dict(os.environ, LD_PRELOAD=str(autoload))
    result = subprocess.run([tool("true")], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "NOT registered" in result.stderr and REMEDY in result.stderr, result.stderr
