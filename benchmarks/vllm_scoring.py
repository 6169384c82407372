"""vLLM scoring against the transformers shared-prefix path, side by side in one run.

Run with the `vllm` environment's python (`make vllm-env`): vLLM pins its own torch. Paths,
each scoring the same requests (`--prefixes` prompts of about `--prefix-tokens` tokens each, the
image's share of a real prefix stood in for by text, or with `--vlm` `--prefixes` images of
`--image-px` square through a tiny Qwen2.5-VL, the image's share of the prefix real image tokens;
each prompt or image with the `--captions` candidates of a Color N=3 item, real captions that
share their first words):
- vllm exact (autocomp): autocomp.scoring.vllm_engine with the prefix cache read and checked:
  each prefix once (warm), the candidates from the cached blocks on, a candidate whose cached
  span reached its caption completed from a boundary request of its shared head (counted);
- vllm no prefix cache: the same engine with prefix caching off, vLLM's default for requests
  that ask for prompt log-probs: every candidate recomputes its whole prefix;
- transformers shared prefix: autocomp.scoring.generative (the prefix once per prompt, each
  chunk of candidates attending to its cache through the split attention).
The paths run interleaved (each repeat runs each in turn), medians printed with the machine's
load; every path's max |diff| from the transformers path and whether each prompt's best caption
is the same; the engines' start-up is printed apart. A text-only Qwen2 (autocomp.tiny's,
widened to `--hidden` x `--layers`; head_dim 64: vLLM's CPU attention needs it), random
weights, float32 (with `--vlm`, a Qwen2.5-VL of the same text width and depth and a one-block
vision tower, images resized to at most `--image-px` squared pixels); on a CPU, or on a GPU from benchmarks/gpu.sh with VLLM_PYTHON set (a small
model there: the engines' overheads more than a large model's throughput). `--block-size` sets
vLLM's cache block (default: the engine's, 128 tokens).

Usage: python benchmarks/vllm_scoring.py [--prefixes 4] [--prefix-tokens 600] [--captions 64]
       [--repeats 3] [--block-size N] [--chunk 256] [--hidden 512 --layers 4] [--device cuda]
       [--vlm --image-px 672]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("AUTOCOMP_CACHE", tempfile.mkdtemp(prefix="autocomp-tiny-"))
sys.path.insert(0, str(Path(__file__).parent))

from autocomp.scoring import ScoreRequest, load_scorer  # noqa: E402
from autocomp.scoring.registry import ModelEntry  # noqa: E402
from common import cpu_model, interleave, load_text, require  # noqa: E402
from scoring_throughput import color_items  # noqa: E402

TEXT_MODEL = {
    "name": "tiny-qwen2-text-vllm", "title": "Tiny Qwen2 text (random weights)",
    "backend": "transformers_vlm", "score": "loglik", "model_class": "Qwen2ForCausalLM",
    "weights": "tiny", "tiny_config": "qwen2_text_vllm", "dtype": "float32", "gpus": 0,
    "gpu_memory_gb": 0, "trust_remote_code": False,
}  # fmt: skip


def _entry(hidden: int, layers: int) -> ModelEntry:
    """The tiny text Qwen2, widened to `hidden` (head_dim 64) x `layers` under a name of its
    own (so that compute, not the engines' per-request overhead, is what is timed)."""
    from autocomp.tiny import scoring

    config = f"qwen2_text_{hidden}x{layers}"
    sizes = (hidden, hidden // 64, max(1, hidden // 128))
    scoring.VLM_BUILDERS[config] = functools.partial(
        scoring._build_qwen2_text, sizes=sizes, layers=layers
    )
    raw = {**TEXT_MODEL, "name": f"tiny-qwen2-text-{hidden}x{layers}", "tiny_config": config}
    fields = {k: v for k, v in raw.items() if k in ModelEntry.__dataclass_fields__}
    return ModelEntry(**fields, raw=raw)


def _vlm_entry(hidden: int, layers: int, side: int) -> ModelEntry:
    """The tiny Qwen2.5-VL at `hidden` (head_dim 64) x `layers`, images up to `side` squared."""
    from autocomp.tiny import scoring

    config = f"qwen2_5_vl_{hidden}x{layers}_{side}px"
    sizes = (hidden, hidden // 64, max(1, hidden // 128))
    scoring.VLM_BUILDERS[config] = functools.partial(
        scoring._build_qwen2_5_vl, sizes=sizes, layers=layers, pixels=side * side
    )
    raw = {**TEXT_MODEL, "name": f"tiny-qwen2.5-vl-{hidden}x{layers}-{side}px",
           "model_class": "Qwen2_5_VLForConditionalGeneration", "tiny_config": config}  # fmt: skip
    fields = {k: v for k, v in raw.items() if k in ModelEntry.__dataclass_fields__}
    return ModelEntry(**fields, raw=raw)


def image_requests(images: int, side: int, captions: int) -> tuple[list[ScoreRequest], dict]:
    """Per image (random pixels, `side` square) the first `captions` candidates of a Color N=3
    item, under the model's default prompt."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    pictures = {
        f"image-{i}": Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8))
        for i in range(images)
    }
    items = color_items(images, 3)
    out = [
        ScoreRequest(key, text) for key, item in zip(pictures, items) for text in item[:captions]
    ]
    return out, pictures


def requests_for(prefixes: int, prefix_tokens: int, captions: int) -> list[ScoreRequest]:
    """Per prompt the first `captions` candidates of a Color N=3 item; the prompts differ in
    their first words (no prefix shared across them) and are about `prefix_tokens` long (the
    byte-level tokenizer: one token a character)."""
    items = color_items(prefixes, 3)
    out = []
    for i, item in enumerate(items):
        head = f"Picture {i}: "
        prompt = head + ("a photo of coloured objects. " * prefix_tokens)[: prefix_tokens - 40]
        out += [ScoreRequest(None, text, prompt) for text in item[:captions]]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefixes", type=int, default=4)
    parser.add_argument("--prefix-tokens", type=int, default=600)
    parser.add_argument("--captions", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--block-size", type=int, default=None)
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=512, help="width (head_dim 64)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--device", default=None, help="the transformers path's (default: auto)")
    parser.add_argument("--vlm", action="store_true", help="a tiny Qwen2.5-VL and real images")
    parser.add_argument("--image-px", type=int, default=672, help="with --vlm: the images' side")
    args = parser.parse_args(argv)
    import vllm

    if args.vlm:
        requests, images = image_requests(args.prefixes, args.image_px, args.captions)
        entry = _vlm_entry(args.hidden, args.layers, args.image_px)
        model = f"Qwen2.5-VL {args.hidden} x {args.layers} layers, {args.image_px} px images"
    else:
        requests, images = requests_for(args.prefixes, args.prefix_tokens, args.captions), {}
        entry = _entry(args.hidden, args.layers)
        model = f"text Qwen2 {args.hidden} x {args.layers} layers"
    started = {}
    scorers = {}
    for name, options in (
        ("vllm exact (autocomp)", {"engine": "vllm", "block_size": args.block_size}),
        ("vllm no prefix cache", {"engine": "vllm", "naive": True}),
        ("transformers shared prefix", {"engine": "transformers"}),
    ):
        t0 = time.perf_counter()
        scorers[name] = load_scorer(entry, device=args.device, batch_size=args.chunk, **options)
        started[name] = time.perf_counter() - t0
    exact = scorers["vllm exact (autocomp)"]
    first = requests[0]
    length = len(exact._group(images.get(first.image_key), first.prompt, [first.text]).expanded)
    tokens = sum(exact.token_counts([r.text for r in requests]))
    print(
        f"vLLM {vllm.__version__} on {cpu_model()}; {args.prefixes} prompts of {length} "
        f"tokens, {args.captions} captions each ({tokens / len(requests):.1f} tokens on "
        f"average), block size {exact.block_size}; float32, {model} (head_dim 64), random weights"
    )
    require(len(requests) == args.prefixes * args.captions, "requests per prompt")
    paths = {name: (lambda s=s: s.score(requests, images)) for name, s in scorers.items()}
    before = dict(exact.calls)
    runs = interleave(paths, args.repeats)
    reference = runs["transformers shared prefix"].result
    print(
        f"{'path':30} {'median s':>9} {'vs transformers':>16} {'max |diff|':>11} "
        f"{'same best':>9} {'start-up s':>10}"
    )
    for name, run in runs.items():
        got = run.result
        diff = max(abs(a - b) for a, b in zip(got, reference))
        same = all(
            max(range(i, i + args.captions), key=lambda k: got[k])
            == max(range(i, i + args.captions), key=lambda k: reference[k])
            for i in range(0, len(requests), args.captions)
        )
        ratio = runs["transformers shared prefix"].median / run.median
        print(
            f"{name:30} {run.median:9.2f} {ratio:15.2f}x {diff:11.2e} {str(same):>9} "
            f"{started[name]:10.1f}"
        )
    done = {k: exact.calls[k] - before[k] for k in exact.calls}
    print(
        f"vllm exact, per repeat: {done['prefix_forwards'] // args.repeats} warm prefixes, "
        f"{done['candidate_forwards'] // args.repeats} candidates, "
        f"{done['boundaries'] // args.repeats} boundary requests, "
        f"{done['rescored'] // args.repeats} rescored without the cache"
    )
    print(load_text(runs))


if __name__ == "__main__":
    main()
