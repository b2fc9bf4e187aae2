"""Build and run the C++ conformance harnesses (harness_l2norm.cpp, harness_deform_conv2d.cpp,
harness_efficient_nms.cpp) against libtorchtrt_ext_plugins.so, and the checks every op's harness shares (cpu mode,
fields against the op definition)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from torchtrt_ext.errors import LibraryNotFoundError
from torchtrt_ext.ops import DOMAIN
from torchtrt_ext.ops.spec import OpSpec

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SOURCE = HERE / "harness_l2norm.cpp"
PLUGIN_SOURCES = sorted((ROOT / "csrc" / "plugins").rglob("*.cpp"))
_SUMMARY = re.compile(r"^harness (\w+): (\d+) checks, (\d+) failed$", re.MULTILINE)


def cuda_home() -> Path:
    """The CUDA toolkit folder (CUDA_HOME, else the one nvcc belongs to, else /usr/local/cuda); skips if none."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    candidates.append("/usr/local/cuda")
    for candidate in filter(None, candidates):
        if (Path(candidate) / "include" / "cuda_runtime_api.h").is_file():
            return Path(candidate)
    pytest.skip("CUDA toolkit headers (cuda_runtime_api.h) not found: set CUDA_HOME")


def cuda_lib_dir(home: Path) -> Path:
    for sub in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
        if any((home / sub).glob("libcudart.so*")):
            return home / sub
    pytest.skip(f"libcudart.so not found under {home}")


def compiler() -> str:
    for name in ("g++", "c++", "clang++"):
        if shutil.which(name):
            return name
    pytest.skip("no C++ compiler (g++, c++ or clang++) on PATH")


def compile_harness(out: Path, trt_include: Path, *, sanitize: bool, source: Path = SOURCE) -> Path:
    """Compile `source` (default harness_l2norm.cpp) to `out`; with sanitize, under AddressSanitizer and UBSan where the compiler has them
    (at -O0: instrumented -O1 takes half a minute to compile)."""
    home = cuda_home()
    libdir = cuda_lib_dir(home)
    cmd = [compiler(), "-std=c++17", "-O0" if sanitize else "-O1", "-g", "-Wall", "-Wextra", "-isystem", str(trt_include),
           "-isystem", str(home / "include"), "-I", str(ROOT / "csrc"), str(source), "-o", str(out), "-ldl", f"-L{libdir}", "-lcudart",
           f"-Wl,-rpath,{libdir}"]
    if sanitize:
        cmd[1:1] = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0 and sanitize:  # no sanitizer runtime here: build plainly rather than not at all
        return compile_harness(out, trt_include, sanitize=False, source=source)
    assert result.returncode == 0, f"compiling the harness failed:\n{' '.join(cmd)}\n{result.stderr}"
    return out


@dataclass
class HarnessRun:
    returncode: int
    output: str

    def lines(self, prefix: str) -> list[str]:
        return [line for line in self.output.splitlines() if line.startswith(prefix)]

    def summary(self) -> tuple[str, int, int] | None:
        match = _SUMMARY.search(self.output)
        return (match.group(1), int(match.group(2)), int(match.group(3))) if match else None


def run_harness(binary: Path, library: Path, *args: str, timeout: float = 300) -> HarnessRun:
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    result = subprocess.run([str(binary), str(library), *args], capture_output=True, text=True, timeout=timeout,
                            env=env)
    return HarnessRun(result.returncode, result.stdout + result.stderr)


def built_library(find: Callable[[], Path], what: str) -> Path:
    """`find()`, a torchtrt_ext._native lookup of a library; fails the test (the TensorRT headers are present, so the
    library should have been built) naming `what` when it raises LibraryNotFoundError."""
    try:
        return find()
    except LibraryNotFoundError as exc:
        pytest.fail(f"TensorRT headers are present but the {what} is not built: {exc}")


def asan_harness(tmp_path_factory: pytest.TempPathFactory, trt_include: Path, name: str, source: Path = SOURCE) -> Path:
    """`source` (default harness_l2norm.cpp) compiled as <tmp>/<name>/<name>_asan under AddressSanitizer/UBSan, for the CPU
    checks, where the compiler supports them."""
    return compile_harness(tmp_path_factory.mktemp(name) / f"{name}_asan", trt_include, sanitize=True, source=source)


def check_conformance_cpu(harness: Path, library: Path, min_checks: int) -> None:
    """`harness LIB cpu` passes every check, runs at least `min_checks` (the full list), and the sanitizers say
    nothing."""
    run = run_harness(harness, library, "cpu")
    failed = run.lines("FAIL")
    assert run.returncode == 0 and not failed, f"harness cpu failed (rc={run.returncode}):\n" + run.output
    summary = run.summary()
    assert summary is not None and summary[0] == "cpu" and summary[2] == 0, run.output
    assert summary[1] >= min_checks, f"expected the full check list, ran {summary[1]}:\n{run.output}"
    assert "AddressSanitizer" not in run.output and "runtime error" not in run.output, run.output


def check_fields_match(harness: Path, library: Path, spec: OpSpec, expected: list[str]) -> None:
    """`harness LIB fields`: the creator advertises `expected` ("<name> <PluginFieldType> <length>" per attribute of
    the op definition `spec`, in its order), getFieldsToSerialize writes the same (in any order), and the creator's
    name, version and namespace are the op definition's."""
    run = run_harness(harness, library, "fields")
    assert run.returncode == 0, run.output
    advertised = [line.split(" ", 1)[1] for line in run.lines("field ")]
    serialized = [line.split(" ", 1)[1] for line in run.lines("serialized ")]
    assert advertised == expected, f"creator getFieldNames {advertised} != op definition {expected}"
    assert sorted(serialized) == sorted(expected), f"getFieldsToSerialize {serialized} != op definition {expected}"
    assert run.lines("creator ") == [f"creator {spec.name} {spec.version} {DOMAIN}"]
