#!/usr/bin/env bash
# Set up the environment (scripts/setup_env.sh) and run the whole test suite plus the type check.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
VENV=${VENV:-.venv}
"$VENV/bin/python" -m pytest "$@"
if [ -f mypy.ini ]; then
  "$VENV/bin/python" -m mypy
fi
