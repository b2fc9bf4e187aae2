#!/usr/bin/env bash
# On a GPU machine (the H200 the device tool lends): build the native libraries for this GPU, run the whole
# test suite (GPU tests included), then the benchmarks. Logs go to $1 (default ./gpu_logs).
# BENCH=0 skips the benchmark; PYTEST_ARGS replaces the pytest arguments (default: tests). Exits non-zero when torch
# sees no GPU (before building anything), the build fails, a test fails or the benchmark fails.
# The GPU machine has torch, onnx, onnxscript and onnxruntime but no onnx-graphsurgeon: carry its wheel in .whl/.
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=${1:-gpu_logs}
mkdir -p "$LOGS"
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
# Every gpu test skips where torch sees no GPU: a CPU-only torch or a broken driver here would pass the run. Fail.
if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_check: FAILED: torch $(python3 -c 'import torch; print(torch.__version__)' 2>&1) sees no CUDA GPU" \
       "(torch.cuda.is_available() is False), so every gpu test would skip; install a CUDA build of torch and" \
       "check the driver (nvidia-smi)" >&2
  exit 1
fi
arch=$(python3 -c 'import torch; m, n = torch.cuda.get_device_capability(); print(f"{m}{n}")')
python3 -c 'import torch, onnx, onnxscript; print("torch", torch.__version__, torch.cuda.get_device_name(0), "onnx", onnx.__version__, "onnxscript", onnxscript.__version__)' | tee "$LOGS/env.txt"
TORCHTRT_EXT_CUDA_ARCHS=$arch python3 setup.py build_ext --inplace > "$LOGS/build.log" 2>&1 || { tail -20 "$LOGS/build.log"; exit 1; }
ls torchtrt_ext/lib | tee -a "$LOGS/env.txt"
python3 -m pytest -q -rs -p no:cacheprovider ${PYTEST_ARGS:-tests} 2>&1 | tee "$LOGS/pytest.txt" | tail -40
status=${PIPESTATUS[0]}
if [ "${BENCH:-1}" = 1 ]; then
  python3 bench/detector.py --json "$LOGS/detector.json" 2>&1 | tee "$LOGS/detector.txt" | tail -40
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
exit "$status"  # pytest's (or the benchmark's) failure is the script's
