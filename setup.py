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

Environment variables:
  TORCHTRT_EXT_CUDA_ARCHS   semicolon list of SM versions, default "75;80;86;89;90" (PTX of the last is added)
  TORCHTRT_EXT_TRT_INCLUDE  folder holding NvInfer.h (else: ../shared/third_party/tensorrt/include beside the
                            checkout, TensorRT_ROOT/include, system folders, .deps/TensorRT/include, pip's tensorrt)
  TORCHTRT_EXT_NVCC         the nvcc to use (else: $CUDA_HOME/bin/nvcc, then PATH)
  TORCHTRT_EXT_SKIP_NATIVE  set to 1 to skip both libraries

Rebuild in place after editing csrc/: ``python setup.py build_ext --inplace``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
CSRC = ROOT / "csrc"
DEFAULT_ARCHS = "75;80;86;89;90"


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


def gencode_flags() -> list[str]:
    """nvcc -gencode flags for TORCHTRT_EXT_CUDA_ARCHS plus PTX of the newest architecture."""
    archs = [a.strip() for a in os.environ.get("TORCHTRT_EXT_CUDA_ARCHS", DEFAULT_ARCHS).split(";") if a.strip()]
    flags = []
    for arch in archs:
        flags += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
    flags += ["-gencode", f"arch=compute_{archs[-1]},code=compute_{archs[-1]}"]
    return flags


def _run(cmd: list[str]) -> None:
    _log(" ".join(cmd))
    subprocess.run(cmd, check=True)


def _nvcc_objects(nvcc: str, sources: list[Path], obj_dir: Path, extra: list[str]) -> list[Path]:
    """Compile each source to its own object, the architectures of one source in parallel (--threads 0)."""
    objects = []
    for source in sources:
        obj = obj_dir / (source.relative_to(CSRC).with_suffix("").as_posix().replace("/", "__") + ".o")
        _run([nvcc, "-c", "-O3", "-std=c++17", "-Xcompiler", "-fPIC,-Wall,-Wextra,-fvisibility=hidden",
              "--threads", "0", "-I", str(CSRC), *gencode_flags(), *extra, str(source), "-o", str(obj)])
        objects.append(obj)
    return objects


def _nvcc_link(nvcc: str, objects: list[Path], output: Path, extra: list[str]) -> None:
    """Link objects into a shared library. Never with --threads: nvcc 13 runs one device link per architecture and
    in parallel they all write the same temporary *_dlink.reg.c ("nvlink fatal: Could not read file")."""
    output.parent.mkdir(parents=True, exist_ok=True)
    _run([nvcc, "-shared", *gencode_flags(), *map(str, objects), *extra, "-o", str(output), "-lcudart"])


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
        with tempfile.TemporaryDirectory(prefix="torchtrt_ext_build_") as tmp:
            self._build_libraries(nvcc, kernels, Path(tmp), out_dir)

    @staticmethod
    def _build_libraries(nvcc: str, kernels: list[Path], obj_dir: Path, out_dir: Path) -> None:
        kernel_objects = _nvcc_objects(nvcc, kernels, obj_dir, [])
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
                    "-Xlinker", "-rpath,$ORIGIN", "-Xlinker", "-z,nodelete"])
        _build_rtx_alias(nvcc, obj_dir, out_dir / "libtorchtrt_ext_rtx_alias.so")


def _build_rtx_alias(nvcc: str, tmp: Path, output: Path) -> None:
    """The library answering to TensorRT-RTX's unversioned name (see csrc/rtx_alias/rtx_alias.cpp). Its NEEDED entry
    comes from linking an empty stand-in that has the wheel's SONAME; the stand-in is thrown away."""
    source = CSRC / "rtx_alias" / "rtx_alias.cpp"
    stand_in = tmp / "rtx_stand_in" / "libtensorrt_rtx.so.1"
    stand_in.parent.mkdir(parents=True, exist_ok=True)
    _run([nvcc, "-shared", "-Xcompiler", "-fPIC", str(source), "-o", str(stand_in),
          "-Xlinker", "-soname,libtensorrt_rtx.so.1"])
    _run([nvcc, "-shared", "-Xcompiler", "-fPIC", str(source), "-o", str(output),
          "-Xlinker", "-soname,libtensorrt_rtx.so", "-Xlinker", "--no-as-needed", "-Xlinker", str(stand_in)])


class NativeDistribution(Distribution):
    """Marks the wheel as platform specific: it carries shared libraries."""

    def has_ext_modules(self) -> bool:  # noqa: D102 - setuptools hook
        return True


if __name__ == "__main__":  # pip and `python setup.py` run it as __main__; tests import find_trt_include
    setup(cmdclass={"build_ext": BuildNative}, distclass=NativeDistribution)
