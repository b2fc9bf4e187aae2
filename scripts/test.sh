#!/usr/bin/env bash
# Set up the environment (scripts/setup_env.sh) and run the whole test suite plus the type check.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
VENV=${VENV:-.venv}
"$VENV/bin/python" -m pytest "$@"
# Type check the op contract, the graph rewrites and the TensorRT-facing modules (the latter against tensorrt-stubs,
# installed apart from the venv, see mypy.ini).
"$VENV/bin/python" -m tests.backend.trt_stubs
"$VENV/bin/python" -m mypy torchtrt_ext/ops torchtrt_ext/passes torchtrt_ext/backend torchtrt_ext/runtime.py \
    torchtrt_ext/cache.py torchtrt_ext/compile.py torchtrt_ext/cli
