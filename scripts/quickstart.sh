#!/usr/bin/env bash
# Set up the environment (scripts/setup_env.sh) and run the main example, examples/quickstart.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
"${VENV:-.venv}/bin/python" examples/quickstart.py
