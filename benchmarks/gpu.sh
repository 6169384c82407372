#!/usr/bin/env bash
# GPU throughput of the paper's full-size models with random weights (no download, no network):
# SD3.5-L rendering, validation (Grounding DINO + SAM2 + VQA), scoring (ViT-L/14, SigLIP SO400M,
# Qwen2.5-VL-7B shared prefix vs batched). One table, and GPU-hours per 100k concepts against the
# paper's 154 A100 GPU-hours. Each model is time-boxed (--budget, seconds); the whole script is
# cut at 8 minutes (GPU_BENCH_LIMIT). Run from anywhere:
#
#   benchmarks/gpu.sh                  # on the GPU machine
#   benchmarks/gpu.sh --tiny           # the same code with tiny models (CPU check)
#   benchmarks/gpu.sh --dry-run        # the plan only
#
# PYTHON picks the interpreter (default: python3 on PATH); the package's sources come first.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
python="${PYTHON:-python3}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export PYTHONPATH="$root/src:$here${PYTHONPATH:+:$PYTHONPATH}"
export AUTOCOMP_CACHE="${AUTOCOMP_CACHE:-$(mktemp -d)}"
export PYTORCH_CUDA_ALLOC_CONF="${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}"
exec timeout --signal=TERM --kill-after=20 "${GPU_BENCH_LIMIT:-480}" \
  "$python" -u "$here/gpu_bench.py" "$@"
