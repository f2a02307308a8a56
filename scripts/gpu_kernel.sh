#!/bin/sh
# Kernel curve s(N) for the Qwen2.5-1.5B and -7B architectures (random weights) on one GPU.
# Needs only python3 with torch + transformers; writes results/bench_kernel_gpu_*.json and a PNG.
# Usage: scripts/gpu_kernel.sh [--trials 5] [--device cuda] ...   (see scripts/gpu_kernel.py --help)
set -eu
cd "$(dirname "$0")/.."
exec python3 scripts/gpu_kernel.py "$@"
