"""scripts/build_wheel.py without building (CI builds and checks the real CUDA 13 wheel in scripts/test_wheel.sh):
the staged pyproject of each variant, the refusal of an nvcc of the wrong CUDA major, and the check of a wheel that
lacks the libraries."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import types
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build_wheel.py"


@pytest.fixture(scope="module")
def build_wheel() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_wheel_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("major", [12, 13])
def test_variant_pyproject_names_the_wheel_and_its_tensorrt(build_wheel: ModuleType, major: int) -> None:
    staged = build_wheel._staged_pyproject((ROOT / "pyproject.toml").read_text(), major)
    assert f'name = "torchtrt_ext-cu{major}"' in staged
    assert f'trt = ["tensorrt-cu{major}>=10.6"]' in staged and f'rtx = ["tensorrt-rtx-cu{major}>=1.7"]' in staged
    assert 'name = "torchtrt_ext"' not in staged


def test_variant_pyproject_refuses_an_unexpected_layout(build_wheel: ModuleType) -> None:
    with pytest.raises(build_wheel.WheelError, match=r"pyproject.toml has 0 lines 'name = \"torchtrt_ext\"'"):
        build_wheel._staged_pyproject('[project]\nname = "other"\n', 13)


def test_cuda12_with_a_cuda13_nvcc_is_refused_before_building(tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("no nvcc on this machine")
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    if "release 12." in version:
        pytest.skip(f"{nvcc} is a CUDA 12 nvcc: it would build the CUDA 12 wheel")
    result = subprocess.run([sys.executable, str(SCRIPT), "--cuda", "12", "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=300, env={**os.environ, "TORCHTRT_EXT_NVCC": nvcc})
    assert result.returncode == 1
    assert "--cuda 12 needs a CUDA 12 nvcc" in result.stderr and "TORCHTRT_EXT_NVCC" in result.stderr, result.stderr
    assert not list(tmp_path.iterdir())


def test_check_reports_a_wheel_without_libraries(build_wheel: ModuleType, tmp_path: Path) -> None:
    wheel = tmp_path / "torchtrt_ext_cu13-0.1.0-py3-none-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:  # a stand-in wheel: the package without its lib/ folder
        archive.writestr("torchtrt_ext/__init__.py", "")
    with pytest.raises(build_wheel.WheelError, match=r"lacks torchtrt_ext/lib/libtorchtrt_ext_kernels.so, .*"
                                                     r"build_info.json"):
        build_wheel.check(wheel)


def test_the_wheel_build_drops_the_diagnostic_and_skip_settings(build_wheel: ModuleType, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # stand-ins for setup.py's finders and for pip: only build()'s own orchestration runs
    stand_in_setup = types.SimpleNamespace(find_nvcc=lambda: "/stand-in/nvcc", nvcc_cuda_version=lambda nvcc: (13, 0),
                                           find_trt_include=lambda: (Path("/stand-in/include"), []),
                                           DEFAULT_ARCHS="90")
    monkeypatch.setattr(build_wheel, "_setup_module", lambda: stand_in_setup)
    # only the pyproject staged: the installed-wheel test's tree has no torchtrt_ext/ to copy
    monkeypatch.setattr(build_wheel, "STAGED", ("pyproject.toml",))
    seen: dict[str, str] = {}

    def pip_wheel(cmd: list[str], check: bool, env: dict[str, str]) -> None:
        seen.update(env)
        out = Path(cmd[cmd.index("-w") + 1])
        (out / "torchtrt_ext_cu13-0.1.0-py3-none-manylinux_2_34_x86_64.whl").write_bytes(b"")

    monkeypatch.setattr(build_wheel.subprocess, "run", pip_wheel)
    monkeypatch.setenv("TORCHTRT_EXT_DCN_TRACE", "1")
    monkeypatch.setenv("TORCHTRT_EXT_SKIP_NATIVE", "1")
    wheel = build_wheel.build(13, tmp_path / "out")
    assert wheel.name.startswith("torchtrt_ext_cu13-")
    assert "TORCHTRT_EXT_DCN_TRACE" not in seen and "TORCHTRT_EXT_SKIP_NATIVE" not in seen
    assert seen["TORCHTRT_EXT_CUDA_MAJOR"] == "13" and seen["TORCHTRT_EXT_NVCC"] == "/stand-in/nvcc"


def test_headers_names_the_folder_a_build_would_use(tmp_path: Path) -> None:
    """.ci/run asks this before the wheel test: the folder of TORCHTRT_EXT_TRT_INCLUDE when it holds NvInfer.h."""
    (tmp_path / "NvInfer.h").write_text("// stand-in: only its presence is looked at\n")
    result = subprocess.run([sys.executable, str(SCRIPT), "--headers"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "TORCHTRT_EXT_TRT_INCLUDE": str(tmp_path)})
    assert result.returncode == 0 and result.stdout.strip() == str(tmp_path), result.stdout + result.stderr
