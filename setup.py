"""Build the native libraries next to the Python package.

* ``libtorchtrt_ext_kernels.so``: every ``csrc/kernels/*.cu`` (no TensorRT, no torch headers), built whenever
  nvcc is found. Used by the eager CUDA path of the ops and by the Python TensorRT plugins (ctypes).
* ``libtorchtrt_ext_plugins.so``: the IPluginV3 classes of ``csrc/plugins`` plus the same kernels, built only
  when TensorRT headers (``NvInfer.h``) are found; otherwise skipped with the reason printed.
* ``libtorchtrt_ext_plugins_autoload.so``: ``csrc/plugins/autoload``, linked against the plugin library; registers
  its creators when loaded by a plain dlopen (Triton, ONNX Runtime). Built and skipped with the plugin library.
* ``libtorchtrt_ext_rtx_alias.so``: ``csrc/rtx_alias``, no code: SONAME ``libtensorrt_rtx.so``, NEEDED
  ``libtensorrt_rtx.so.1``, so TensorRT-RTX's ONNX parser finds the library it dlopens by that unversioned name
  (``torchtrt_ext/backend/rtx_alias.py``). Built and skipped with the plugin library.

Both libraries link the CUDA runtime statically, its symbols hidden: they need no CUDA toolkit and no
``nvidia-cuda-runtime`` package where they run, only a driver new enough for the CUDA version they were built with,
and they cannot clash with another CUDA runtime in the process (torch's). ``lib/build_info.json`` records that
version and the architectures; ``torchtrt_ext._native`` checks it against torch's CUDA at import.

The wheel is tagged ``py3-none-manylinux_2_<N>_<machine>``: it holds no CPython extension (the libraries are loaded
with ctypes or by TensorRT), so one wheel serves every Python version; N is the newest glibc symbol version the
libraries use. ``scripts/build_wheel.py`` builds the CUDA 12 and CUDA 13 variants and checks the tag with auditwheel.

Environment variables:
  TORCHTRT_EXT_CUDA_ARCHS   semicolon list of SM versions, default "75;80;86;89;90;100;120" (PTX of the last is added)
  TORCHTRT_EXT_CUDA_MAJOR   refuse to build unless nvcc is of this CUDA major version (the wheel variants set it)
  TORCHTRT_EXT_TRT_INCLUDE  folder holding NvInfer.h (else: ../shared/third_party/tensorrt/include beside the
                            checkout, TensorRT_ROOT/include, system folders, .deps/TensorRT/include, pip's tensorrt)
  TORCHTRT_EXT_NVCC         the nvcc to use (else: $CUDA_HOME/bin/nvcc, then PATH)
  TORCHTRT_EXT_SKIP_NATIVE  set to 1 to skip both libraries
  TORCHTRT_EXT_DCN_TRACE    set to 1 for a diagnostic build whose fused DeformConv2d kernels stamp each block's phases
                            (csrc/kernels/deform_conv2d_trace.cuh, read by bench/deform_conv_trace.py); never for
                            a wheel (scripts/build_wheel.py drops it)

Rebuild in place after editing csrc/: ``python setup.py build_ext --inplace``.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
CSRC = ROOT / "csrc"
DEFAULT_ARCHS = "75;80;86;89;90;100;120"
BUILD_INFO = "build_info.json"


def _log(msg: str) -> None:
    print(f"[torchtrt_ext build] {msg}", file=sys.stderr, flush=True)


def find_nvcc() -> str | None:
    """Return the nvcc path, or None when no CUDA compiler is installed."""
    explicit = os.environ.get("TORCHTRT_EXT_NVCC")
    if explicit:
        return explicit
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home and (Path(cuda_home) / "bin" / "nvcc").exists():
        return str(Path(cuda_home) / "bin" / "nvcc")
    return shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
    )


def find_trt_include() -> tuple[Path | None, list[str]]:
    """Return (folder holding NvInfer.h or None, the folders looked in)."""
    candidates: list[Path] = []
    for var in ("TORCHTRT_EXT_TRT_INCLUDE",):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]))
    # The public TensorRT headers laid beside every checkout of this workplace, CI's clone included.
    candidates.append(ROOT.parent / "shared" / "third_party" / "tensorrt" / "include")
    if os.environ.get("TensorRT_ROOT"):
        candidates.append(Path(os.environ["TensorRT_ROOT"]) / "include")
    candidates += [Path("/usr/include/x86_64-linux-gnu"), Path("/usr/include"), Path("/usr/local/TensorRT/include"),
                   Path("/usr/local/tensorrt/include"), ROOT / ".deps" / "TensorRT" / "include"]
    try:  # an installed TensorRT wheel that ships its include folder
        import importlib.util

        spec = importlib.util.find_spec("tensorrt")
        if spec and spec.origin:
            candidates.append(Path(spec.origin).parent / "include")
    except (ImportError, ValueError):
        pass
    for folder in candidates:
        if (folder / "NvInfer.h").exists():
            return folder, [str(c) for c in candidates]
    return None, [str(c) for c in candidates]


def nvcc_cuda_version(nvcc: str) -> tuple[int, int]:
    """(major, minor) of the CUDA toolkit of `nvcc`, read from ``nvcc --version`` ("release 13.0")."""
    out = subprocess.run([nvcc, "--version"], check=True, capture_output=True, text=True).stdout
    match = re.search(r"release (\d+)\.(\d+)", out)
    if match is None:
        raise RuntimeError(f"{nvcc} --version printed no 'release X.Y' line: {out!r}")
    return int(match[1]), int(match[2])


def cuda_archs() -> list[str]:
    """The SM versions of TORCHTRT_EXT_CUDA_ARCHS (default DEFAULT_ARCHS), oldest first as given."""
    return [a.strip() for a in os.environ.get("TORCHTRT_EXT_CUDA_ARCHS", DEFAULT_ARCHS).split(";") if a.strip()]


def sm_codes() -> list[str]:
    """The machine-code targets of TORCHTRT_EXT_CUDA_ARCHS: SM 9.0 as sm_90a (the same devices, plus Hopper's wgmma,
    which the fused DeformConv2d kernel needs), the others as they are."""
    return ["90a" if arch == "90" else arch for arch in cuda_archs()]


def gencode_flags() -> list[str]:
    """nvcc -gencode flags for sm_codes() plus PTX of the newest architecture (the plain one: arch-specific PTX runs
    on no later GPU)."""
    flags = []
    for code in sm_codes():
        flags += ["-gencode", f"arch=compute_{code},code=sm_{code}"]
    newest = cuda_archs()[-1]
    flags += ["-gencode", f"arch=compute_{newest},code=compute_{newest}"]
    return flags


def arch_defines() -> list[str]:
    """Host-code defines naming the device code built: TORCHTRT_EXT_SM90A when an sm_90a binary is in it."""
    return ["-DTORCHTRT_EXT_SM90A"] if "90a" in sm_codes() else []


def dcn_trace() -> bool:
    """Whether TORCHTRT_EXT_DCN_TRACE=1 asks for the diagnostic build (the fused DeformConv2d kernels' stamps)."""
    return os.environ.get("TORCHTRT_EXT_DCN_TRACE") == "1"


def _run(cmd: list[str]) -> None:
    _log(" ".join(cmd))
    subprocess.run(cmd, check=True)


def _nvcc_objects(nvcc: str, sources: list[Path], obj_dir: Path, extra: list[str]) -> list[Path]:
    """Compile each source to its own object, the architectures of one source in parallel (--threads 0)."""
    objects = []
    for source in sources:
        obj = obj_dir / (source.relative_to(CSRC).with_suffix("").as_posix().replace("/", "__") + ".o")
        _run([nvcc, "-c", "-O3", "-std=c++17", "-Xcompiler", "-fPIC,-Wall,-Wextra,-fvisibility=hidden",
              "--threads", "0", "-I", str(CSRC), *gencode_flags(), *arch_defines(), *extra, str(source), "-o", str(obj)])
        objects.append(obj)
    return objects


def _nvcc_link(nvcc: str, objects: list[Path], output: Path, extra: list[str], cudart: str = "static") -> None:
    """Link objects into a shared library. Never with --threads: nvcc 13 runs one device link per architecture and
    in parallel they all write the same temporary *_dlink.reg.c ("nvlink fatal: Could not read file").

    cudart ("static", or "none" for a library without device code) is linked statically and --exclude-libs keeps its
    symbols local: exported, they could bind to (or be bound by) another CUDA runtime in the process, e.g. torch's.

    --discard-all drops the local symbols, which hold the names of nvcc's temporary files (``tmpxft_<pid>_...``): with
    them every rebuild of the same sources gave new bytes, a new plugin library hash and so a miss for every cached
    engine. The exported symbols stay; the build id is a hash of the content, so it is reproducible too.
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    _run([nvcc, "-shared", *gencode_flags(), *map(str, objects), *extra, "-o", str(output), "--cudart", cudart,
          "-Xlinker", "--exclude-libs,ALL", "-Xlinker", "--discard-all"])


def glibc_floor(libraries: list[Path]) -> tuple[int, int]:
    """The newest GLIBC_x.y symbol version the libraries need (objdump -T): the oldest glibc that loads them."""
    versions = [(2, 17)]  # manylinux2014's glibc, the oldest tag pip still maps
    for library in libraries:
        out = subprocess.run(["objdump", "-T", str(library)], check=True, capture_output=True, text=True).stdout
        versions += [(int(a), int(b)) for a, b in re.findall(r"\bGLIBC_(\d+)\.(\d+)\b", out)]
    return max(versions)


class BuildNative(build_ext):
    """Compile the CUDA kernels library and, where TensorRT headers exist, the plugin library."""

    def run(self) -> None:  # noqa: D102 - setuptools hook
        if os.environ.get("TORCHTRT_EXT_SKIP_NATIVE") == "1":
            _log("TORCHTRT_EXT_SKIP_NATIVE=1: native libraries not built")
            return
        out_dir = (ROOT if self.inplace else Path(self.build_lib)) / "torchtrt_ext" / "lib"
        nvcc = find_nvcc()
        if nvcc is None:
            _log("nvcc not found: libtorchtrt_ext_kernels.so and libtorchtrt_ext_plugins.so skipped. "
                 "Install the CUDA toolkit (or set TORCHTRT_EXT_NVCC) and reinstall to get the CUDA kernels.")
            return
        kernels = sorted((CSRC / "kernels").glob("*.cu"))
        if not kernels:
            _log("no csrc/kernels/*.cu sources: native libraries skipped")
            return
        cuda = nvcc_cuda_version(nvcc)
        wanted = os.environ.get("TORCHTRT_EXT_CUDA_MAJOR")
        if wanted and int(wanted) != cuda[0]:
            raise RuntimeError(f"TORCHTRT_EXT_CUDA_MAJOR={wanted} asks for a CUDA {wanted} build, but {nvcc} is CUDA "
                               f"{cuda[0]}.{cuda[1]}: point TORCHTRT_EXT_NVCC at the nvcc of a CUDA {wanted} toolkit")
        with tempfile.TemporaryDirectory(prefix="torchtrt_ext_build_") as tmp:
            self._build_libraries(nvcc, kernels, Path(tmp), out_dir)
        archs = cuda_archs()
        info = {"cuda_version": f"{cuda[0]}.{cuda[1]}", "sm": sm_codes(), "ptx": archs[-1]}
        if dcn_trace():
            info["dcn_trace"] = True
        (out_dir / BUILD_INFO).write_text(json.dumps(info, indent=1) + "\n")
        _log(f"{out_dir / BUILD_INFO}: {info}")

    @staticmethod
    def _build_libraries(nvcc: str, kernels: list[Path], obj_dir: Path, out_dir: Path) -> None:
        kernel_objects = _nvcc_objects(nvcc, kernels, obj_dir, ["-DTORCHTRT_EXT_DCN_TRACE"] if dcn_trace() else [])
        _nvcc_link(nvcc, kernel_objects, out_dir / "libtorchtrt_ext_kernels.so", [])
        include, looked = find_trt_include()
        if include is None:
            _log("TensorRT headers (NvInfer.h) not found in " + ", ".join(looked) +
                 ": libtorchtrt_ext_plugins_autoload.so, libtorchtrt_ext_rtx_alias.so and libtorchtrt_ext_plugins.so "
                 "skipped. "
                 "Set TORCHTRT_EXT_TRT_INCLUDE to the folder holding NvInfer.h.")
            return
        autoload = CSRC / "plugins" / "autoload"
        plugin_sources = sorted(p for p in (CSRC / "plugins").rglob("*.cpp") if autoload not in p.parents)
        if not plugin_sources:
            _log("no csrc/plugins/*.cpp sources: libtorchtrt_ext_plugins.so skipped")
            return
        trt_flags = ["-I", str(include), "-Xcompiler", "-Wno-deprecated-declarations"]
        plugin_objects = _nvcc_objects(nvcc, plugin_sources, obj_dir, trt_flags)
        _nvcc_link(nvcc, plugin_objects + kernel_objects, out_dir / "libtorchtrt_ext_plugins.so", [])
        # Registers the plugin library's creators when merely dlopened (Triton plugins=, ONNX Runtime's TensorRT EP);
        # links it, found beside it through $ORIGIN; never unloaded while its creators sit in TensorRT's registry.
        logging_object = plugin_objects[plugin_sources.index(CSRC / "plugins" / "common" / "logging.cpp")]
        autoload_objects = _nvcc_objects(nvcc, [autoload / "autoload.cpp"], obj_dir, trt_flags)
        _nvcc_link(nvcc, autoload_objects + [logging_object], out_dir / "libtorchtrt_ext_plugins_autoload.so",
                   ["-L", str(out_dir), "-ltorchtrt_ext_plugins", "-ldl",
                    "-Xlinker", "-rpath,$ORIGIN", "-Xlinker", "-z,nodelete"], cudart="none")
        _build_rtx_alias(nvcc, obj_dir, out_dir / "libtorchtrt_ext_rtx_alias.so")


def _build_rtx_alias(nvcc: str, tmp: Path, output: Path) -> None:
    """The library answering to TensorRT-RTX's unversioned name (see csrc/rtx_alias/rtx_alias.cpp). Its NEEDED entry
    comes from linking an empty stand-in that has the wheel's SONAME; the stand-in is thrown away."""
    source = CSRC / "rtx_alias" / "rtx_alias.cpp"
    stand_in = tmp / "rtx_stand_in" / "libtensorrt_rtx.so.1"
    stand_in.parent.mkdir(parents=True, exist_ok=True)
    _run([nvcc, "-shared", "--cudart", "none", "-Xcompiler", "-fPIC", str(source), "-o", str(stand_in),
          "-Xlinker", "-soname,libtensorrt_rtx.so.1"])
    _run([nvcc, "-shared", "--cudart", "none", "-Xcompiler", "-fPIC", str(source), "-o", str(output),
          "-Xlinker", "-soname,libtensorrt_rtx.so", "-Xlinker", "--no-as-needed", "-Xlinker", str(stand_in)])


class NativeWheel(bdist_wheel):
    """Tags the wheel py3-none-manylinux_2_<glibc floor>_<machine> (py3-none-any when no library was built)."""

    def get_tag(self) -> tuple[str, str, str]:  # noqa: D102 - setuptools hook
        lib_dir = Path(self.get_finalized_command("build").build_lib) / "torchtrt_ext" / "lib"
        libraries = sorted(lib_dir.glob("*.so"))
        if not libraries:
            return "py3", "none", "any"
        major, minor = glibc_floor(libraries)
        return "py3", "none", f"manylinux_{major}_{minor}_{platform.machine()}"


class NativeDistribution(Distribution):
    """Marks the wheel as platform specific: it carries shared libraries."""

    def has_ext_modules(self) -> bool:  # noqa: D102 - setuptools hook
        return True


if __name__ == "__main__":  # also under pip (setuptools.build_meta runs this file as __main__); scripts and tests import it
    setup(cmdclass={"build_ext": BuildNative, "bdist_wheel": NativeWheel}, distclass=NativeDistribution)
