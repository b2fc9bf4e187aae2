#!/usr/bin/env bash
# Build and check the CUDA 13 wheel (scripts/build_wheel.py), install it into a fresh virtual environment, and run
# the CPU test suite against the INSTALLED package: the tests run from a copy of the checkout without torchtrt_ext/,
# with no nvcc on PATH, no CUDA_HOME and no TensorRT header variable. CI runs this after scripts/test.sh.
# Needs the .venv of scripts/setup_env.sh (it builds the wheel). Arguments go to pytest (default: the whole suite).
# WHEEL_WORK: scratch folder (default build/wheel-test, emptied first); WHEEL: test this wheel instead of building
# one (it is still checked); TORCH_SPEC as in setup_env.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
WORK=$(realpath -m "${WHEEL_WORK:-build/wheel-test}")
rm -rf "$WORK" && mkdir -p "$WORK/tree"
SECONDS=0
if [ -n "${WHEEL:-}" ]; then
  wheel=$(realpath "$WHEEL")
  "$VENV/bin/python" scripts/build_wheel.py --check "$wheel"
else
  "$VENV/bin/python" scripts/build_wheel.py --cuda 13 --out "$WORK/dist"
  wheel=$(ls "$WORK"/dist/torchtrt_ext_cu13-*.whl)
fi
echo "wheel built and checked in ${SECONDS}s"

"${PYTHON:-python3}" -m venv "$WORK/venv"
PIP=("$WORK/venv/bin/python" -m pip install --disable-pip-version-check -q --no-compile)  # no .pyc of all of torch
"${PIP[@]}" "${TORCH_SPEC:-torch==2.13.0}"
"${PIP[@]}" "$wheel[dev,rtx]"
echo "fresh venv with the wheel installed at ${SECONDS}s"

# Everything the tests read (tests/, docs/, examples/, csrc/, setup.py...) except the package itself.
git ls-files -z --cached --others --exclude-standard | grep -zv '^torchtrt_ext/' | tar --null -cf - -T - | tar -xf - -C "$WORK/tree"
# The real tensorrt.plugin package that setup_env.sh unpacked (tests/plugins/real_trtp.py reads it from .deps/).
mkdir -p "$WORK/tree/.deps" && cp -r .deps/tensorrt-plugin-* "$WORK/tree/.deps/" 2>/dev/null || true
cd "$WORK/tree"
clean_env=(env -u CUDA_HOME -u CUDA_PATH -u TORCHTRT_EXT_NVCC -u TORCHTRT_EXT_TRT_INCLUDE -u TensorRT_ROOT
           -u TORCHTRT_EXT_KERNELS_LIB -u TORCHTRT_EXT_PLUGIN_LIB -u TORCHTRT_EXT_PLUGIN_AUTOLOAD_LIB
           PATH="$WORK/venv/bin:/usr/bin:/bin")
"${clean_env[@]}" python - <<'EOF'
import shutil
import sysconfig
from pathlib import Path

import torchtrt_ext
from torchtrt_ext import _native

package = Path(torchtrt_ext.__file__).resolve().parent
assert package.is_relative_to(sysconfig.get_paths()["purelib"]), f"torchtrt_ext imported from {package}, not the wheel"
assert shutil.which("nvcc") is None, f"nvcc is on PATH: {shutil.which('nvcc')}"
_native.kernels_library()
print("installed:", package, "| kernels:", _native.kernels_library_path().name, "| plugins:",
      _native.plugin_library_path(), "|", _native.build_info())
EOF
"${clean_env[@]}" python -m pytest -p no:cacheprovider "$@"
echo "wheel test done in ${SECONDS}s"
