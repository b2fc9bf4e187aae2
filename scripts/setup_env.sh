#!/usr/bin/env bash
# Create .venv (if needed) and install torchtrt_ext with its test tools, on a fresh machine.
# torch is installed first and pinned (2.13.0: the CPU build these machines hold locally); an unpinned torch
# would pull a multi-GB CUDA build. Override with TORCH_SPEC (e.g. TORCH_SPEC="torch==2.11.0").
# EXTRAS picks the extras (default "dev,rtx,docs,wheel": test tools, TensorRT-RTX, the docs build, the wheel check).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)

# The installs (and the nvcc build inside `pip install -e .`, minutes) run again only when something they depend on
# changed since the last run that finished in this venv: the stamp holds a hash of what goes in (pyproject.toml,
# setup.py, every file under csrc/, the TensorRT headers' version file, the settings below, the venv's python) and of
# what came out (torchtrt_ext/lib). A fresh clone (CI) has no venv, so no stamp, so everything runs; a deleted or
# changed library runs the build again. Python sources need nothing: the install is editable.
STAMP="$VENV/.torchtrt_ext_setup_stamp"
setup_inputs() {
  echo "root=$PWD torch=${TORCH_SPEC:-} extras=${EXTRAS:-} archs=${TORCHTRT_EXT_CUDA_ARCHS:-}" \
    "major=${TORCHTRT_EXT_CUDA_MAJOR:-} nvcc=${TORCHTRT_EXT_NVCC:-} skip=${TORCHTRT_EXT_SKIP_NATIVE:-}" \
    "dcn_trace=${TORCHTRT_EXT_DCN_TRACE:-}" \
    "trt=${TORCHTRT_EXT_TRT_INCLUDE:-}:${TensorRT_ROOT:-} nvcc_found=$(command -v nvcc || true)" \
    "$("$VENV/bin/python" --version 2>&1)"
  { find pyproject.toml setup.py csrc ../shared/third_party/tensorrt/include/NvInferVersion.h torchtrt_ext/lib \
    -type f 2>/dev/null || true; } | LC_ALL=C sort | xargs -r sha256sum  # a path that is not there: left out
}
if [ -f "$STAMP" ] && [ "$(setup_inputs | sha256sum)" = "$(cat "$STAMP")" ]; then
  echo "installs skipped: nothing in pyproject.toml, setup.py, csrc/ or torchtrt_ext/lib changed since the last set-up"
else
  rm -f "$STAMP"
  "${PIP[@]}" "${TORCH_SPEC:-torch==2.13.0}"
  "${PIP[@]}" -e ".[${EXTRAS:-dev,rtx,docs,wheel}]"
  setup_inputs | sha256sum > "$STAMP"  # written last: a failed or interrupted install leaves no stamp
fi
# The real tensorrt.plugin package of each release the Python-plugin tests run on (tests/plugins/real_trtp.py,
# RELEASES: one per minor version from 10.13): pure Python, shipped in NVIDIA's TensorRT bindings wheel, whose native
# module cannot load here; unpacked beside the venv, never imported as an installed package. Present ones are kept.
for TRTP_VERSION in 10.13.3.9.post1 10.14.1.48.post1 10.15.1.29 10.16.1.11 11.0.0.114 11.1.0.106 11.2.1.2 \
                    11.3.0.99 11.4.0.106; do
  TRTP_DIR=.deps/tensorrt-plugin-$TRTP_VERSION
  [ -f "$TRTP_DIR/tensorrt_bindings/plugin/__init__.py" ] ||
    "${PIP[@]}" --no-deps --target "$TRTP_DIR" "tensorrt-cu13-bindings==$TRTP_VERSION"
done
echo "environment ready: $VENV ($("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
