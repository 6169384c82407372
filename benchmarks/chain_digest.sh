#!/usr/bin/env bash
# The fixed chain whose bytes a refactor must not change: sample, negatives (1 and 2 workers,
# both protocols), caption, render, validate, curate, and scoring tiny-clip and tiny-siglip,
# all with the tiny profile and seed 0. Prints one "sha256  path" line per output file (sorted),
# so two runs (before and after a change) can be compared with diff.
#   benchmarks/chain_digest.sh OUT_DIR > digests.txt
set -euo pipefail
out=${1:?usage: chain_digest.sh OUT_DIR}
bin=${AUTOCOMP:-$(dirname "$0")/../.venv/bin/autocomp}
export HF_HUB_OFFLINE=1
rm -rf "$out"; mkdir -p "$out"
$bin sample --family color --n 2 --count 6 --seed 0 --out "$out/concepts.parquet" >/dev/null
$bin negatives --input "$out/concepts.parquet" --out "$out/neg-w1.parquet" --workers 1 >/dev/null
$bin negatives --input "$out/concepts.parquet" --out "$out/neg-w2.parquet" --workers 2 >/dev/null
$bin negatives --input "$out/concepts.parquet" --out "$out/neg-strict.parquet" --protocol strict --workers 1 >/dev/null
$bin caption --profile tiny --concepts "$out/concepts.parquet" --out "$out/captions" >/dev/null
$bin render --profile tiny --captions "$out/captions" --out "$out/render" >/dev/null
$bin validate --profile tiny --render "$out/render" --out "$out/verdicts" >/dev/null
$bin curate --keep-rejected --render "$out/render" --verdicts "$out/verdicts" --captions "$out/captions" --out "$out/curated" >/dev/null
$bin negatives --input "$out/curated/curated.parquet" --out "$out/benchmark.parquet" --workers 1 >/dev/null
for m in tiny-clip tiny-siglip; do
  $bin score --model $m --benchmark "$out/benchmark.parquet" --images "$out/render" --out "$out/scores" >/dev/null
done
# JSON records name the output folder: hash them with it replaced by OUT
cd "$out" && find . -type f ! -name '*.log' | sort | while read -r f; do
  case "$f" in
    *.json) echo "$(sed "s#$(pwd)#OUT#g" "$f" | sha256sum | cut -d' ' -f1)  $f" ;;
    *) sha256sum "$f" ;;
  esac
done
