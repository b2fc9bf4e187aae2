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
"${PIP[@]}" "${TORCH_SPEC:-torch==2.13.0}"
"${PIP[@]}" -e ".[${EXTRAS:-dev,rtx,docs,wheel}]"
# The real tensorrt.plugin package for the Python-plugin tests (tests/plugins/real_trtp.py): pure Python, shipped in
# NVIDIA's TensorRT bindings wheel, whose native module cannot load here; unpacked beside the venv, never imported as
# an installed package.
TRTP_VERSION=11.4.0.106
TRTP_DIR=.deps/tensorrt-plugin-$TRTP_VERSION
[ -f "$TRTP_DIR/tensorrt_bindings/plugin/__init__.py" ] ||
  "${PIP[@]}" --no-deps --target "$TRTP_DIR" "tensorrt-cu13-bindings==$TRTP_VERSION"
echo "environment ready: $VENV ($("$VENV/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
