"""Build the binary wheel of one CUDA major version, then check what it holds.

    python scripts/build_wheel.py --cuda 13 [--out dist]        # build torchtrt_ext-cu13, then check it
    python scripts/build_wheel.py --check dist/torchtrt_ext_cu13-0.1.0-py3-none-manylinux_2_34_x86_64.whl

The distribution is named as TensorRT's wheels are (``torchtrt_ext-cu12``, ``torchtrt_ext-cu13``), and its ``[trt]``
and ``[rtx]`` extras name TensorRT's wheels of the same CUDA major version. Since a pyproject's name is static, the
sources are staged in a temporary folder whose pyproject.toml carries the variant's name and extras.

The CUDA 12 variant needs the nvcc of a CUDA 12.8 or newer toolkit (sm_100 and sm_120 arrived in 12.8), given by
TORCHTRT_EXT_NVCC or CUDA_HOME. PyPI's ``nvidia-cuda-nvcc-cu12`` cannot serve: every release of it (12.0.76 to 12.9.86)
ships ptxas, libnvvm and headers but no nvcc driver, cudafe++, fatbinary or nvlink.

The check (run after every build, or alone with --check) needs ``pip install 'torchtrt_ext[wheel]'`` (cuobjdump and
auditwheel) and binutils' nm and readelf. It fails, naming what is wrong, unless: the wheel holds the four libraries
and build_info.json of the expected CUDA major version; cuobjdump lists exactly the architectures of build_info.json
as machine code (sm_XX) and the newest as PTX in the kernels and plugin libraries; those two export their entry points
and no CUDA runtime symbol, and none needs libcudart; the RTX alias needs libtensorrt_rtx.so.1 alone (the [rtx] extra's
wheel ships it); and auditwheel agrees with the wheel's platform tag for the rest.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from torchtrt_ext._native import wheel_name  # noqa: E402 - the one spelling of the variants' names
STAGED = ("setup.py", "pyproject.toml", "README.md", "csrc", "torchtrt_ext")
RTX_ALIAS = "libtorchtrt_ext_rtx_alias.so"
LIBRARIES = ("libtorchtrt_ext_kernels.so", "libtorchtrt_ext_plugins.so", "libtorchtrt_ext_plugins_autoload.so",
             RTX_ALIAS)
# The one library outside the wheel that a library of ours may need: the RTX alias exists to answer to TensorRT-RTX's
# unversioned name and needs the library the tensorrt-rtx wheel (the [rtx] extra) ships, as TensorRT's own plugins
# need libnvinfer without bundling it. auditwheel judges the tag without it; the alias is checked on its own.
ALIAS_NEEDED = {"libtensorrt_rtx.so.1"}
SYSTEM_LIBS = {"libc.so.6", "libm.so.6", "libgcc_s.so.1", "libstdc++.so.6"}  # what every manylinux policy allows
# Entry points each library must export, and the libraries that hold device code.
EXPORTS = {"libtorchtrt_ext_kernels.so": ("torchtrt_ext_cuda_runtime_version", "torchtrt_ext_l2norm_f32"),
           "libtorchtrt_ext_plugins.so": ("getCreators", "setLoggerFinder"),
           "libtorchtrt_ext_plugins_autoload.so": (), RTX_ALIAS: ()}
DEVICE_CODE = ("libtorchtrt_ext_kernels.so", "libtorchtrt_ext_plugins.so")


class WheelError(Exception):
    """The build could not start, or the wheel does not hold what it must."""


def _setup_module() -> ModuleType:
    """setup.py as a module (its setup() call runs only as __main__): the one place that finds nvcc and headers."""
    spec = importlib.util.spec_from_file_location("torchtrt_ext_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _staged_pyproject(text: str, cuda_major: int) -> str:
    """pyproject.toml with the variant's name and the TensorRT wheels of its CUDA major version in the extras."""
    replacements = [('name = "torchtrt_ext"', f'name = "{wheel_name(cuda_major)}"'),
                    ('trt = ["tensorrt>=10.6"]', f'trt = ["tensorrt-cu{cuda_major}>=10.6"]'),
                    ('rtx = ["tensorrt-rtx-cu13>=1.7"]', f'rtx = ["tensorrt-rtx-cu{cuda_major}>=1.7"]')]
    for old, new in replacements:
        if text.count(old) != 1:
            raise WheelError(f"pyproject.toml has {text.count(old)} lines '{old}' (expected one): update "
                             "scripts/build_wheel.py's replacements to the new pyproject.toml")
        text = text.replace(old, new)
    return text


def build(cuda_major: int, out: Path) -> Path:
    """Build the wheel of `cuda_major` into `out`; return its path."""
    setup = _setup_module()
    nvcc = setup.find_nvcc()
    if nvcc is None:
        raise WheelError("no nvcc found: set TORCHTRT_EXT_NVCC (or CUDA_HOME) to a CUDA toolkit's nvcc")
    found = setup.nvcc_cuda_version(nvcc)
    if found[0] != cuda_major:
        raise WheelError(f"--cuda {cuda_major} needs a CUDA {cuda_major} nvcc, but {nvcc} is CUDA {found[0]}.{found[1]}: "
                         f"set TORCHTRT_EXT_NVCC to the nvcc of a CUDA {cuda_major} toolkit (for 12: 12.8 or newer; "
                         "PyPI's nvidia-cuda-nvcc-cu12 has no nvcc driver)")
    include, looked = setup.find_trt_include()
    if include is None:
        raise WheelError("TensorRT headers (NvInfer.h) not found in " + ", ".join(looked) +
                         ": a wheel without the plugin library is not built; set TORCHTRT_EXT_TRT_INCLUDE")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="torchtrt_ext_wheel_") as tmp:
        stage = Path(tmp) / "src"
        for name in STAGED:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, stage / name, ignore=shutil.ignore_patterns("__pycache__", "*.so", "lib"))
            else:
                stage.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, stage / name)
        pyproject = stage / "pyproject.toml"
        pyproject.write_text(_staged_pyproject(pyproject.read_text(), cuda_major))
        env = {**os.environ, "TORCHTRT_EXT_NVCC": nvcc, "TORCHTRT_EXT_TRT_INCLUDE": str(include),
               "TORCHTRT_EXT_CUDA_MAJOR": str(cuda_major),
               "TORCHTRT_EXT_CUDA_ARCHS": os.environ.get("TORCHTRT_EXT_CUDA_ARCHS", setup.DEFAULT_ARCHS)}
        env.pop("TORCHTRT_EXT_SKIP_NATIVE", None)
        env.pop("TORCHTRT_EXT_DCN_TRACE", None)  # a diagnostic build (setup.py) is never a wheel
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "-w", str(out), str(stage)], check=True, env=env)
    return max(out.glob(f"{wheel_name(cuda_major).replace('-', '_')}-*.whl"), key=lambda w: w.stat().st_mtime)


def _tool(name: str) -> str:
    """Path of `name` on PATH, else in pip's nvidia-* packages (nvidia-cuda-cuobjdump puts cuobjdump there)."""
    found = shutil.which(name)
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(folder).glob(f"*/bin/{name}")):
            return str(candidate)
    raise WheelError(f"{name} not found on PATH nor in pip's nvidia packages: pip install 'torchtrt_ext[wheel]'")


def _output(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def _needed(path: Path) -> list[str]:
    """The NEEDED entries of a shared library (readelf)."""
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", _output("readelf", "-d", str(path)))


def _arch_order(code: str) -> int:
    """Sort key of an SM code ("90a" after "89", before "100")."""
    return int(code.rstrip("a"))


def _check_library(path: Path, info: dict[str, Any]) -> list[str]:
    """What is wrong with one library of the wheel (empty when nothing)."""
    problems = []
    problems += [f"{path.name} needs {lib} (cudart must be linked statically)"
                 for lib in _needed(path) if "cudart" in lib]
    exported = {line.split()[-1] for line in _output("nm", "-D", "--defined-only", str(path)).splitlines() if line}
    problems += [f"{path.name} does not export {name}" for name in EXPORTS[path.name] if name not in exported]
    leaked = sorted(name for name in exported if name.startswith(("cuda", "__cuda", "cu")) and "torchtrt" not in name)
    if leaked:
        problems.append(f"{path.name} exports CUDA runtime symbols {leaked[:5]} (link with --exclude-libs)")
    if path.name not in DEVICE_CODE:
        return problems
    cuobjdump = _tool("cuobjdump")
    sm = set(re.findall(r"\.sm_(\d+a?)\.cubin", _output(cuobjdump, "--list-elf", str(path))))
    ptx = set(re.findall(r"\.sm_(\d+)\.ptx", _output(cuobjdump, "--list-ptx", str(path))))
    if sm != set(info["sm"]) or ptx != {info["ptx"]}:
        problems.append(f"{path.name}: cuobjdump lists machine code for sm {sorted(sm, key=_arch_order)} and PTX for "
                        f"{sorted(ptx, key=_arch_order)}, build_info.json says sm {info['sm']} and PTX {info['ptx']}")
    print(f"  {path.name}: {path.stat().st_size / 2**20:.1f} MiB, SASS sm_{', sm_'.join(sorted(sm, key=_arch_order))}; "
          f"PTX compute_{', compute_'.join(sorted(ptx, key=_arch_order))}")
    return problems


def check(wheel: Path, cuda_major: int | None = None) -> None:
    """Check a built wheel (see the module docstring); raise WheelError listing every problem found."""
    print(f"{wheel.name}: {wheel.stat().st_size / 2**20:.1f} MiB")
    with tempfile.TemporaryDirectory(prefix="torchtrt_ext_check_") as tmp:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(tmp)
        lib_dir = Path(tmp) / "torchtrt_ext" / "lib"
        missing = [name for name in (*LIBRARIES, "build_info.json") if not (lib_dir / name).is_file()]
        if missing:
            raise WheelError(f"{wheel.name} lacks torchtrt_ext/lib/{', '.join(missing)}")
        info = json.loads((lib_dir / "build_info.json").read_text())
        major = int(info["cuda_version"].split(".")[0])
        problems = [] if cuda_major in (None, major) else [f"built for CUDA {info['cuda_version']}, not {cuda_major}"]
        if not wheel.name.startswith(wheel_name(major).replace("-", "_") + "-"):
            problems.append(f"a CUDA {major} build must be named {wheel_name(major)}")
        for name in LIBRARIES:
            problems += _check_library(lib_dir / name, info)
        needed = set(_needed(lib_dir / RTX_ALIAS)) - SYSTEM_LIBS
        if needed != ALIAS_NEEDED:
            problems.append(f"{RTX_ALIAS} needs {sorted(needed)}, expected exactly {sorted(ALIAS_NEEDED)}")
        without_alias = Path(tmp) / wheel.name  # the same name: auditwheel reads the tag from it
        with zipfile.ZipFile(wheel) as archive, zipfile.ZipFile(without_alias, "w") as copy:
            for item in archive.infolist():
                if item.filename.endswith(f"/{RTX_ALIAS}"):
                    continue
                data = archive.read(item)
                if item.filename.endswith(".dist-info/RECORD"):  # auditwheel opens every file RECORD lists
                    data = b"".join(line for line in data.splitlines(keepends=True) if RTX_ALIAS.encode() not in line)
                copy.writestr(item, data)
        shown = _output(sys.executable, "-m", "auditwheel", "show", str(without_alias))
    tag = wheel.name.rsplit("-", 1)[1].removesuffix(".whl")
    if f'"{tag}"' not in shown.replace("\n", " "):
        problems.append(f"auditwheel does not confirm the tag {tag}: {' '.join(shown.split())}")
    if problems:
        raise WheelError(f"{wheel.name}:\n  " + "\n  ".join(problems))
    print(f"  ok: CUDA {info['cuda_version']}, tag {tag} (auditwheel agrees)")


def main(argv: list[str] | None = None) -> int:
    """Command line: build (and check) a variant, or only check a wheel."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cuda", type=int, choices=(12, 13), help="CUDA major version of the variant to build")
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="folder for the wheel (default: dist)")
    parser.add_argument("--check", type=Path, metavar="WHEEL", help="only check this wheel")
    parser.add_argument("--headers", action="store_true",
                        help="only say where the TensorRT headers a build needs are (exit 1: not found, and where looked)")
    args = parser.parse_args(argv)
    if args.headers:
        include, looked = _setup_module().find_trt_include()
        print(include if include else "TensorRT headers (NvInfer.h) not found in " + ", ".join(looked))
        return 0 if include else 1
    if (args.cuda is None) == (args.check is None):
        parser.error("give --cuda to build, or --check WHEEL")
    try:
        check(args.check) if args.check else check(build(args.cuda, args.out), args.cuda)
    except WheelError as exc:
        print(f"build_wheel: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
