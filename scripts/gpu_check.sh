#!/usr/bin/env bash
# On a GPU machine (the H200 the device tool lends): build the native libraries for this GPU, run the whole
# test suite (GPU tests included), then the benchmarks. Logs go to $1 (default ./gpu_logs).
# BENCH=0 skips the benchmark; PYTEST_ARGS replaces the pytest arguments (default: tests).
# The GPU machine has torch, onnx, onnxscript and onnxruntime but no onnx-graphsurgeon: carry its wheel in .whl/.
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=${1:-gpu_logs}
mkdir -p "$LOGS"
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
arch=$(python3 -c 'import torch; m, n = torch.cuda.get_device_capability(); print(f"{m}{n}")')
python3 -c 'import torch, onnx, onnxscript; print("torch", torch.__version__, torch.cuda.get_device_name(0), "onnx", onnx.__version__, "onnxscript", onnxscript.__version__)' | tee "$LOGS/env.txt"
TORCHTRT_EXT_CUDA_ARCHS=$arch python3 setup.py build_ext --inplace > "$LOGS/build.log" 2>&1 || { tail -20 "$LOGS/build.log"; exit 1; }
ls torchtrt_ext/lib | tee -a "$LOGS/env.txt"
python3 -m pytest -q -rs -p no:cacheprovider ${PYTEST_ARGS:-tests} 2>&1 | tee "$LOGS/pytest.txt" | tail -40
if [ "${BENCH:-1}" = 1 ]; then
  python3 bench/detector.py --json "$LOGS/detector.json" 2>&1 | tee "$LOGS/detector.txt" | tail -40
fi
