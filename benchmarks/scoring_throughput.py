"""Scoring throughput: autocomp against the loops a peer would write, medians of every path.

Every path runs in one process, interleaved (each repeat runs every path in turn, so a change
of the machine's load hits all of them), and each figure is printed with the load it ran under:
the load average and the cores other processes kept busy (benchmarks/common.py). The shapes it
prints are checked before anything is timed (a mismatch stops it with one line, exit 3).

Contrastive (Color items at each `--n`: the positive and its N^(2N) - 1 Confusion negatives,
`--items` items, tiny random-weight open_clip encoders on the CPU), paths from
`scoring_baselines.py` and autocomp itself:
- per-item loop (SugarCrepe-style): per item, encode its image and all its captions, padded;
- batched loop (CLIP_benchmark-style): batches of 8 items, images in one batch, the items'
  captions in batches of 256, padded to the full context; no sharing across items;
- autocomp before length batching: distinct captions once, batches of 256, padded;
- autocomp, 256 a batch (no cache bound): autocomp with text batches of 256 captions whatever
  their length (SigLIP's 64 positions: 16,384 positions a batch), the A/B of the cache bound;
- autocomp, open_clip's tokenizer: autocomp calling open_clip's tokenizer on every caption, the
  A/B of the word-piece cache (PieceTokenizer);
- autocomp: `OpenClipScorer.score` (distinct captions once, sorted by length, causal towers cut
  to each batch's longest caption, CPU text batches bounded by the cache).
Every path's largest score difference from the batched loop and whether every item's
prediction (argmax) is the same.

Generative (one image of `--image-tokens` tokens, set through the image processor's own size
fields, and for LLaVA the vision tower's image size; the chat prompt; the 729 candidates of a
Color N=3 item cut to 16-24 tokens; by default the tiny VLMs widened to 256 x 2 layers with
random weights, so that attention and the linear layers weigh about as in a real model):
- batched, no sharing (the fair baseline): each row the whole prefix + its caption, one forward
  per batch, no cache, logits only at caption positions; its batch size is the fastest of a
  sweep (`--sweep`, timed on `--sweep-candidates` candidates, printed);
- shared, split attention (autocomp): the prefix once; each chunk runs only its own tokens and
  attends to the one prefix cache through the split attention (no copy per candidate);
- shared, repeated cache (before): the prefix cache copied per candidate of a chunk.
float32, CPU; the token-count limit (tokens the baseline runs / tokens the shared path runs),
each speed-up as a fraction of it, and every path's max |diff| against the baseline.
`--profile`: each path once under torch.profiler (attention and cache-copy shares).

Usage: python benchmarks/scoring_throughput.py [--items 200] [--n 2 3] [--repeats 3]
       [--contrastive-models tiny-clip tiny-siglip] [--paths per-item batched padded uncapped
       tokenizer autocomp] [--skip-generative] [--skip-contrastive] [--image-tokens 576]
       [--sweep 1 2 4 8 16 32 64] [--sweep-candidates 128]
       [--width 256 --layers 2 --heads 8] [--chunk 128] [--profile]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("AUTOCOMP_CACHE", tempfile.mkdtemp(prefix="autocomp-tiny-"))
sys.path.insert(0, str(Path(__file__).parent))

from PIL import Image  # noqa: E402

from autocomp.protocol.concepts import sample_concepts  # noqa: E402
from autocomp.protocol.family import load_family  # noqa: E402
from autocomp.protocol.minimal import minimal_caption  # noqa: E402
from autocomp.protocol.negatives import build_candidates  # noqa: E402
from autocomp.scoring import ScoreRequest, load_scorer  # noqa: E402
from common import cores, cpu_model, interleave, load_text, others_text, require  # noqa: E402
from scoring_baselines import (  # noqa: E402
    batched_loop,
    batched_no_sharing,
    padded_distinct,
    per_item_loop,
)


def color_items(count: int, n: int = 3) -> list[list[str]]:
    """`count` Color items of N objects: each the positive and its N^(2N) - 1 Confusion
    negatives (checked)."""
    family = load_family("color")
    items = []
    for c in sample_concepts(family, n, count, seed=0):
        sets = build_candidates(
            family, c.objects, c.labels, minimal_caption(family, c.objects, c.labels)
        )
        items.append([sets.caption, *sets.confusion])
    per = n ** (2 * n)
    require(
        len(items) == count and all(len(c) == per for c in items),
        f"{count} Color N={n} items of {per} captions each (got {len(items)} items of "
        f"{sorted({len(c) for c in items})})",
    )
    return items


# ----------------------------------------------------------------------------- generative


def widen(config, width: int, layers: int, heads: int) -> None:
    """The language model `width` wide (in place): the tiny one (32 wide) is so narrow that
    attention over the prefix outweighs the linear layers, which a real VLM's are not. Head
    size width / heads, a quarter of the heads for K/V (GQA)."""
    text = config.get_text_config()
    text.hidden_size, text.intermediate_size, text.num_hidden_layers = width, 4 * width, layers
    text.num_attention_heads, text.num_key_value_heads = heads, max(1, heads // 4)
    text.head_dim = width // heads
    if getattr(text, "layer_types", None):
        text.layer_types = text.layer_types[:1] * layers
    if hasattr(config, "vision_config") and hasattr(config.vision_config, "out_hidden_size"):
        config.vision_config.out_hidden_size = width  # Qwen-VL: the merger's output
        half = text.head_dim // 2  # multimodal RoPE sections (temporal, height, width)
        section = [half // 4, (half - half // 4) // 2, half - half // 4 - (half - half // 4) // 2]
        for rope in (text.rope_parameters, getattr(text, "rope_scaling", None)):
            if isinstance(rope, dict) and "mrope_section" in rope:
                rope["mrope_section"] = section


def reshape(scorer, image_tokens: int, wide: tuple[int, int, int] | None) -> Image.Image:
    """Make one image `image_tokens` tokens long through the processor's own fields, widen the
    language model (`wide`), rebuild the model once with random weights; the image to score.
    Qwen2.5-VL: `size.shortest_edge` / `longest_edge` are pixel counts (transformers 5: the
    min/max pixels), one token per (patch x merge)^2 pixels. LLaVA: a CLIP tower of one fixed
    image size, (size / patch)^2 tokens (the CLS token dropped), so the tower is rebuilt at
    that size and the processor resizes and crops to it."""
    import torch
    from transformers.image_utils import SizeDict

    side = math.isqrt(image_tokens)
    require(side * side == image_tokens, f"image tokens {image_tokens}: must be a square grid")
    config = scorer.model.config.__class__.from_dict(scorer.model.config.to_dict())
    processor = scorer.processor.image_processor
    if getattr(processor, "merge_size", None):
        edge = side * processor.patch_size * processor.merge_size
        processor.size = SizeDict(shortest_edge=edge * edge, longest_edge=edge * edge)
    else:
        edge = side * config.vision_config.patch_size
        config.vision_config.image_size = edge
        processor.size = SizeDict(shortest_edge=edge)
        processor.crop_size = SizeDict(height=edge, width=edge)
    if wide:
        widen(config, *wide)
    torch.manual_seed(0)
    scorer.model = type(scorer.model)._from_config(config, dtype=scorer.model.dtype).eval()
    return Image.new("RGB", (edge, edge), (180, 40, 40))


class Setup:
    """One image of `image_tokens` tokens (asserted in the prefix), the chat prompt, the 729
    candidates of a Color N=3 item cut to 16-24 tokens."""

    def __init__(
        self, model: str, image_tokens: int, chunk: int, wide: tuple[int, int, int] | None
    ) -> None:
        self.model, self.chunk = model, chunk
        self.scorer = scorer = load_scorer(model, device="cpu", chunk_size=chunk)
        self.image = reshape(scorer, image_tokens, wide)
        self.prefix = scorer._prefix_inputs(self.image)
        config = scorer.model.config
        image_token = getattr(config, "image_token_id", None) or config.image_token_index
        self.image_tokens = int((self.prefix["input_ids"] == image_token).sum())
        require(
            self.image_tokens == image_tokens,
            f"{model}: the prefix holds {self.image_tokens} image tokens, not {image_tokens}",
        )
        self.prefix_tokens = self.prefix["input_ids"].shape[1]
        # 729 distinct captions of 16-24 tokens (20 on average): lengths differ within a batch
        captions = [f"{i:03d} {c[: 12 + i % 9]}" for i, c in enumerate(color_items(1)[0])]
        self.requests = [ScoreRequest("img", c) for c in captions]
        self.ids = scorer._caption_ids(captions)
        lengths = {len(c) for c in self.ids}
        require(
            len(set(captions)) == 729 and min(lengths) >= 16 and max(lengths) <= 24,
            f"729 distinct candidates of 16-24 tokens (got {len(set(captions))}, {lengths})",
        )
        self.caption_tokens = sum(len(c) for c in self.ids)
        # token-count limit: tokens the baseline runs / tokens the shared path runs
        everything = len(self.ids) * self.prefix_tokens + self.caption_tokens
        self.limit = everything / (self.prefix_tokens + self.caption_tokens)
        text = config.get_text_config()
        self.shape = f"{text.hidden_size} wide x {text.num_hidden_layers} layers"
        self.baseline_batch = chunk
        scorer.score(self.requests[:2], {"img": self.image})  # warm-up (allocator, kernels)

    def sweep(self, batches: list[int], candidates: int, repeats: int) -> None:
        """The baseline's fastest batch size, timed on the first `candidates` candidates."""
        ids = self.ids[:candidates]
        paths = {
            b: (lambda b=b: batched_no_sharing(self.scorer, self.prefix, ids, b)) for b in batches
        }
        runs = interleave(paths, repeats)
        self.baseline_batch = min(batches, key=lambda b: runs[b].median)
        times = ", ".join(f"{b}: {runs[b].median:.2f} s" for b in batches)
        edge = self.baseline_batch in (min(batches), max(batches)) and len(batches) > 1
        print(
            f"  baseline batch sweep ({len(ids)} candidates, medians of {repeats}; "
            f"{load_text(runs)}): {times} -> batch {self.baseline_batch}"
            + (" (at the sweep's edge: widen --sweep, a faster baseline may lie beyond)"
               if edge and self.baseline_batch != 1 else "")
        )  # fmt: skip

    def paths(self) -> dict[str, Callable[[], list[float]]]:
        scorer, images = self.scorer, {"img": self.image}
        return {
            "batched, no sharing": lambda: batched_no_sharing(
                scorer, self.prefix, self.ids, self.baseline_batch
            ),
            "shared, split attention (autocomp)": lambda: scorer.score(self.requests, images),
            "shared, repeated cache (before)": lambda: _repeated(scorer, self.requests, images),
        }


def _repeated(scorer, requests: list, images: dict) -> list[float]:
    scorer.split = False
    try:
        return scorer.score(requests, images)
    finally:
        scorer.split = True


def _argmax(values: list[float]) -> int:
    return max(range(len(values)), key=values.__getitem__)


def generative(setup: Setup, repeats: int) -> None:
    """Every path's median of `repeats` (interleaved), its speed-up over the baseline at its
    best batch and the fraction of the token-count limit that is; every path's scores against
    the baseline's."""
    runs = interleave(setup.paths(), repeats)
    base = runs["batched, no sharing"]
    for name, run in runs.items():
        require(len(run.result) == len(setup.ids), f"{name}: {len(run.result)} scores")
    print(
        f"{setup.model} ({setup.shape}), prefix {setup.prefix_tokens} tokens "
        f"({setup.image_tokens} of image, counted in the prefix), {len(setup.ids)} candidates "
        f"of {setup.caption_tokens / len(setup.ids):.1f} tokens; baseline batch "
        f"{setup.baseline_batch}, autocomp chunk {setup.chunk}; medians of {repeats}, "
        f"interleaved; token-count limit {setup.limit:.1f}x; {load_text(runs)}"
    )
    print(
        f"  {'path':<38}{'s':>8}{'speed-up':>10}{'of limit':>10}{'max |diff|':>12}  argmax"
        f"  other cores  walls"
    )
    for name, run in runs.items():
        ratio = base.median / run.median
        diff = max(abs(x - y) for x, y in zip(run.result, base.result))
        same = "same" if _argmax(run.result) == _argmax(base.result) else "DIFFERS"
        share = "" if run is base else f"{ratio / setup.limit:.0%}"
        print(
            f"  {name:<38}{run.median:>8.2f}{ratio:>9.1f}x{share:>10}"
            f"{diff:>12.1e}  {same:<6}  {others_text(run.others):>11}  {run.walls}"
        )


def profile(setup: Setup) -> None:
    """Where each path's time goes (torch.profiler, one run each): attention, the prefix
    cache's copies, and the operators that take most time."""
    import copy

    import torch
    from torch.profiler import ProfilerActivity, record_function
    from transformers import AttentionInterface

    from autocomp.scoring import generative as gen

    def labelled(label: str, fn: Callable) -> Callable:
        def run(*args, **kwargs):
            with record_function(label):
                return fn(*args, **kwargs)

        return run

    mapping = AttentionInterface._global_mapping
    saved = dict(mapping), gen._split_attention, copy.deepcopy
    mapping["sdpa"] = labelled("attention", mapping["sdpa"])
    gen._split_attention = labelled("attention", gen._split_attention)
    mapping.pop(gen._SPLIT, None)  # registered again, labelled, on first use
    copy.deepcopy = labelled("cache copy", copy.deepcopy)
    cache_class = type(setup.scorer.model(**setup.prefix, use_cache=True).past_key_values)
    repeat = cache_class.batch_repeat_interleave
    cache_class.batch_repeat_interleave = labelled("cache copy", repeat)
    try:
        for name, fn in setup.paths().items():
            with (
                torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof,
                record_function("path"),
            ):
                fn()
            events = {e.key: e for e in prof.key_averages()}
            total = events["path"].cpu_time_total
            shares = ", ".join(
                f"{label} {events[label].cpu_time_total / total:.0%}"
                for label in ("attention", "cache copy")
                if label in events
            )
            print(f"  {name}: {total / 1e6:.2f} s profiled; {shares or 'no labelled parts'}")
            top = sorted(
                (e for e in events.values() if e.key.startswith("aten::")),
                key=lambda e: e.self_cpu_time_total,
                reverse=True,
            )[:6]
            print(
                "    " + ", ".join(f"{e.key[6:]} {e.self_cpu_time_total / total:.0%}" for e in top)
            )
    finally:
        mapping.clear()
        mapping.update(saved[0])
        gen._split_attention, copy.deepcopy = saved[1], saved[2]
        cache_class.batch_repeat_interleave = repeat


# ----------------------------------------------------------------------------- contrastive


def autocomp(scorer, items: list[list[str]], images: list) -> list[list[float]]:
    """autocomp's own path: `OpenClipScorer.score`, every item's candidates in one call."""
    scorer.tokens.clear()  # every run tokenizes afresh, as the baselines do
    if scorer.pieces is not None:
        scorer.pieces.ids.clear()  # and learns its word pieces anew
    requests = [ScoreRequest(f"img{k}", c) for k, captions in enumerate(items) for c in captions]
    flat = scorer.score(requests, {f"img{k}": p for k, p in enumerate(images)})
    out, offset = [], 0
    for captions in items:
        out.append(flat[offset : offset + len(captions)])
        offset += len(captions)
    return out


def autocomp_uncapped(scorer, items: list[list[str]], images: list) -> list[list[float]]:
    """autocomp as it was before its CPU text batches were bounded by the cache (256 a batch
    whatever their length)."""
    saved, scorer.text_positions = scorer.text_positions, None
    try:
        return autocomp(scorer, items, images)
    finally:
        scorer.text_positions = saved


def autocomp_plain_tokenizer(scorer, items: list[list[str]], images: list) -> list[list[float]]:
    """autocomp with open_clip's own tokenizer call on every caption (no word-piece cache)."""
    saved, scorer.pieces = scorer.pieces, None
    try:
        return autocomp(scorer, items, images)
    finally:
        scorer.pieces = saved


CONTRASTIVE_PATHS = {  # short name (--paths): (printed name, path)
    "per-item": ("per-item loop (SugarCrepe-style)", per_item_loop),
    "batched": ("batched loop (CLIP_benchmark-style)", batched_loop),
    "padded": ("autocomp before length batching", padded_distinct),
    "uncapped": ("autocomp, 256 a batch (no cache bound)", autocomp_uncapped),
    "tokenizer": ("autocomp, open_clip's tokenizer", autocomp_plain_tokenizer),
    "autocomp": ("autocomp", autocomp),
}
PEER = "batched loop (CLIP_benchmark-style)"


def contrastive(model: str, n: int, count: int, repeats: int, chosen: list[str]) -> None:
    """The `chosen` paths (always the batched peer loop and autocomp) on `count` Color N=`n`
    items, interleaved; times, ratios to autocomp, and every path's scores and predictions
    against the batched peer loop's."""
    import torch

    torch.set_grad_enabled(False)
    items = color_items(count, n)
    images = [Image.new("RGB", (64, 64), (10 * i % 256, 80, 160)) for i in range(count)]
    scorer = load_scorer(model, device="cpu")
    pairs = sum(len(c) for c in items)
    distinct = len({c for captions in items for c in captions})
    picked = [k for k in CONTRASTIVE_PATHS if k in {*chosen, "batched", "autocomp"}]
    paths = {
        CONTRASTIVE_PATHS[k][0]: (lambda fn=CONTRASTIVE_PATHS[k][1]: fn(scorer, items, images))
        for k in picked
    }
    for k in picked:  # warm-up: allocator, kernels, the BPE cache
        CONTRASTIVE_PATHS[k][1](scorer, items[:2], images[:2])
    runs = interleave(paths, repeats)
    for name, run in runs.items():
        got = [len(x) for x in run.result]
        require(got == [len(c) for c in items], f"{name}: scores per item {got[:3]}...")
    reference, ours = runs[PEER].result, runs["autocomp"].median
    batches = (
        f"{scorer.text_batch} captions"
        if scorer.text_positions is None
        else f"up to {scorer.text_batch} captions and {scorer.text_positions:,} positions"
    )
    print(
        f"{model} ({'causal, EOT-pooled' if scorer.trim else 'non-causal'} text tower, context "
        f"{scorer.context}), {count} Color N={n} items, {pairs:,} pairs, {distinct:,} distinct "
        f"captions; autocomp text batches of {batches}; medians of {repeats}, interleaved; "
        f"{load_text(runs)}"
    )
    print(
        f"  {'path':<38}{'s':>7}{'captions/s':>12}{'autocomp is':>13}{'max |diff|':>12}"
        f"  {'same argmax':<12}other cores  walls"
    )
    for name, run in runs.items():
        diff = max(abs(a - b) for x, y in zip(run.result, reference) for a, b in zip(x, y))
        same = sum(_argmax(x) == _argmax(y) for x, y in zip(run.result, reference))
        verdict = "all" if same == count else f"{same}/{count} ({count - same} DIFFER)"
        print(
            f"  {name:<38}{run.median:>7.2f}{pairs / run.median:>12,.0f}"
            f"{run.median / ours:>12.2f}x{diff:>12.1e}  {verdict:<12}"
            f"{others_text(run.others):>11}  {run.walls}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny-qwen2.5-vl", "tiny-llava"])
    parser.add_argument("--contrastive-models", nargs="+", default=["tiny-clip", "tiny-siglip"])
    parser.add_argument("--items", type=int, default=200, help="Color items per N (contrastive)")
    parser.add_argument("--n", type=int, nargs="+", default=[2, 3], help="contrastive: N")
    parser.add_argument(
        "--paths", nargs="+", default=list(CONTRASTIVE_PATHS), choices=list(CONTRASTIVE_PATHS),
        help="contrastive paths (the batched peer loop and autocomp always run)",
    )  # fmt: skip
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=128, help="autocomp's generative chunk")
    parser.add_argument("--image-tokens", type=int, default=576, help="generative (a square)")
    parser.add_argument(
        "--sweep", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64],
        help="generative: the baseline's batch sizes to try",
    )  # fmt: skip
    parser.add_argument("--sweep-candidates", type=int, default=128)
    parser.add_argument("--sweep-repeats", type=int, default=2)
    parser.add_argument("--width", type=int, default=256, help="generative: 0 = tiny as built")
    parser.add_argument("--layers", type=int, default=2, help="generative: with --width")
    parser.add_argument("--heads", type=int, default=8, help="generative: with --width")
    parser.add_argument("--profile", action="store_true", help="generative: where time goes")
    parser.add_argument("--skip-generative", action="store_true")
    parser.add_argument("--skip-contrastive", action="store_true")
    args = parser.parse_args()
    import open_clip
    import torch
    import transformers

    print(
        f"machine: {cores()} cores, {cpu_model()}, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), transformers {transformers.__version__}, "
        f"open_clip {open_clip.__version__}; load average {os.getloadavg()[0]:.1f} at the start"
    )
    if not args.skip_contrastive:
        print("contrastive (CPU, tiny random-weight encoders):")
        for n in args.n:
            for model in args.contrastive_models:
                contrastive(model, n, args.items, args.repeats, args.paths)
    if not args.skip_generative:
        print("generative (CPU, random-weight VLMs):")
        wide = (args.width, args.layers, args.heads) if args.width else None
        for model in args.models:
            setup = Setup(model, args.image_tokens, args.chunk, wide)
            setup.sweep(args.sweep, args.sweep_candidates, args.sweep_repeats)
            generative(setup, args.repeats)
            if args.profile:
                profile(setup)


if __name__ == "__main__":
    main()
