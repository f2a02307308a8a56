#!/usr/bin/env bash
# Install the llama.cpp backend (llama-cpp-python, compiled from source) into the project venv.
# Idempotent: a no-op when it is already importable. pip keeps the built wheel in its cache, so a
# machine compiles it once (about 14 minutes on 2 cores; -DLLAVA_BUILD=OFF skips multimodal code).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${COPY_AS_DECODE_VENV:-$root/.venv}
if "$venv/bin/python" -c "import llama_cpp" >/dev/null 2>&1; then
  exit 0
fi
echo "installing llama-cpp-python (compiles llama.cpp; about 14 minutes the first time on 2 cores)..." >&2
CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF}" "$venv/bin/pip" install -q "llama-cpp-python==0.3.36"
