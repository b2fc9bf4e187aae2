#!/usr/bin/env bash
# What CI must have before the suite runs (.ci/run calls this after scripts/setup_env.sh): a missing piece would turn
# tests into skips and the run green, so it fails the run instead, saying what is missing and what to do.
# - the [rtx] extra: tensorrt_rtx imports and makes a builder (CI builds real engines with it, on the CPU);
# - the TensorRT headers (../shared/third_party/tensorrt/include beside every clone, CI's included): the plugin
#   library, its tests and the wheel are built against them.
# VENV picks the virtual environment (default .venv). Exit status: 0 when both are there, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${VENV:-.venv}/bin/python
status=0
RTX_CHECK='import tensorrt_rtx as trt; trt.Builder(trt.Logger(trt.Logger.ERROR)); print(trt.__version__)'
if ! rtx=$("$PY" -c "$RTX_CHECK" 2>&1); then
  echo "FAILED: the [rtx] extra is broken: tensorrt_rtx does not import or make a builder: $(tail -n 1 <<< "$rtx")" >&2
  echo "  remedy: reinstall it into $PY's environment: scripts/setup_env.sh (EXTRAS=dev,rtx,docs,wheel)" >&2
  status=1
fi
if ! headers=$("$PY" scripts/build_wheel.py --headers); then
  echo "FAILED: $headers" >&2
  echo "  remedy: CI's clone has ../shared/third_party/tensorrt/include beside it; restore it (or set" \
       "TORCHTRT_EXT_TRT_INCLUDE to the folder holding NvInfer.h)" >&2
  status=1
fi
exit $status
