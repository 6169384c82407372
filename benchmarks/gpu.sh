#!/usr/bin/env bash
# GPU throughput at the paper's real shapes with random weights (no download, no network), every
# figure against a baseline in the same run and next to the paper's Table 22: scoring (CLIP
# ViT-H/14-378, SigLIP2 Giant, Qwen2.5-VL-7B on 1024 px renders), validation (Grounding DINO,
# SAM2.1-L, Gemma-3-12B VQA), rendering (SD3.5 Large, 1024 px). The whole script is cut at
# 8 minutes (GPU_BENCH_LIMIT, seconds); each path is time-boxed (--budget). Run from anywhere:
#
#   benchmarks/gpu.sh                  # on one H100/H200-class GPU (one line and exit 2 if none)
#   benchmarks/gpu.sh --dry-run        # every step, shrunken, on this CPU (a few minutes)
#   benchmarks/gpu.sh --plan           # the shapes as JSON
#
# PYTHON picks the interpreter (default: python3 on PATH); the package's sources come first.
# VLLM_PYTHON (optional): the vllm environment's python; benchmarks/vllm_scoring.py runs first.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
python="${PYTHON:-python3}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export PYTHONPATH="$root/src:$here${PYTHONPATH:+:$PYTHONPATH}"
export AUTOCOMP_CACHE="${AUTOCOMP_CACHE:-$(mktemp -d)}"
export PYTORCH_CUDA_ALLOC_CONF="${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}"
# vLLM scoring beside the shared-prefix path, when VLLM_PYTHON names the python of an environment
# with vLLM (it pins its own torch; on a lent GPU: the caption image's): time-boxed, then the rest
if [ -n "${VLLM_PYTHON:-}" ] && [ "${1:-}" != "--plan" ]; then
  timeout --signal=TERM --kill-after=20 "${VLLM_BENCH_LIMIT:-240}" "$VLLM_PYTHON" -u \
    "$here/vllm_scoring.py" --prefixes 8 --prefix-tokens 1200 --captions 256 \
    || echo "vllm scoring stopped: exit $?"
  # the same with real image tokens (a tiny Qwen2.5-VL, 1,296 of them per 1,008 px image)
  timeout --signal=TERM --kill-after=20 "${VLLM_BENCH_LIMIT:-240}" "$VLLM_PYTHON" -u \
    "$here/vllm_scoring.py" --vlm --image-px 1008 --prefixes 8 --captions 256 \
    || echo "vllm scoring (images) stopped: exit $?"
fi
exec timeout --signal=TERM --kill-after=20 "${GPU_BENCH_LIMIT:-480}" \
  "$python" -u "$here/gpu_bench.py" "$@"
