"""Scoring throughput: autocomp against the baselines a peer would write, medians of every path.

Contrastive (Color N=3 items: the positive and 728 Confusion negatives each, tiny random-weight
encoders on CPU), in one run:
- per-item loop (SugarCrepe-style): per item, encode its image and all its captions, padded;
- batched loop (CLIP_benchmark-style): batches of items, images in one batch, the items'
  captions in batches of 256, padded to the full context; no sharing across items;
- autocomp before length batching: distinct captions once, batches of 256, padded;
- autocomp: distinct captions once, sorted by length, each batch only as long as it must be
  (causal EOT-pooled towers), token ids cached per tokenizer.
Each path's median of `--repeats` runs; the largest score difference and whether every item's
prediction (argmax) agrees with the padded path.

Generative (one image, an image+prompt prefix of ~600 tokens, the 729 candidates of a Color N=3
item cut to 16-24 tokens; by default the tiny VLMs widened to 256 x 2 layers, random weights, so
that attention and the linear layers weigh about as in a real model, not as in a 32-wide one):
- batched, no sharing (the fair baseline): chunks of `--chunk` candidates, each row the whole
  prefix + its caption, one forward per chunk, no cache, logits only at caption positions;
- shared, split attention (autocomp): the prefix once; each chunk runs only its own tokens and
  attends to the one prefix cache through the split attention (no copy per candidate);
- shared, repeated cache (before): the prefix cache copied per candidate of a chunk.
Same chunk size, dtype (float32) and device (CPU) for all; the paths run interleaved, medians of
`--repeats`; the token-count limit (tokens the baseline runs / tokens the shared path runs), each
speed-up as a fraction of it, and every path's max |diff| against the baseline. `--profile`:
each path once under torch.profiler (attention and cache-copy shares, top operators).

Usage: python benchmarks/scoring_throughput.py [--items 40] [--repeats 3] [--skip-generative]
       [--skip-contrastive] [--width 256 --layers 2 --heads 8] [--chunk 128] [--profile]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("AUTOCOMP_CACHE", tempfile.mkdtemp(prefix="autocomp-tiny-"))

from PIL import Image  # noqa: E402

from autocomp.protocol.concepts import sample_concepts  # noqa: E402
from autocomp.protocol.family import load_family  # noqa: E402
from autocomp.protocol.minimal import minimal_caption  # noqa: E402
from autocomp.protocol.negatives import build_candidates  # noqa: E402
from autocomp.scoring import ScoreRequest, load_scorer  # noqa: E402


def color_items(count: int) -> list[list[str]]:
    family = load_family("color")
    items = []
    for c in sample_concepts(family, 3, count, seed=0):
        sets = build_candidates(
            family, c.objects, c.labels, minimal_caption(family, c.objects, c.labels)
        )
        items.append([sets.caption, *sets.confusion])
    return items


def median_time(fn: Callable[[], list[float]], repeats: int) -> tuple[float, list[float]]:
    times, result = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def batched_no_sharing(scorer, prefix: dict, ids: list[list[int]], batch: int) -> list[float]:
    """The fair baseline: chunks of `batch` rows, each the whole prefix + one caption (right
    padded), one forward per chunk, no cache; logits only where a caption token is predicted."""
    import torch

    out: list[float] = []
    device = prefix["input_ids"].device
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        count, width = len(chunk), max(len(c) for c in chunk)
        cand = torch.zeros(count, width, dtype=torch.long)
        mask = torch.zeros(count, width, dtype=torch.long)
        for j, caption in enumerate(chunk):
            cand[j, : len(caption)] = torch.tensor(caption)
            mask[j, : len(caption)] = 1
        cand, mask = cand.to(device), mask.to(device)
        rows = dict(prefix)
        rows["input_ids"] = torch.cat([prefix["input_ids"].expand(count, -1), cand], 1)
        rows["attention_mask"] = torch.cat([prefix["attention_mask"].expand(count, -1), mask], 1)
        for key in prefix:
            if key.endswith("token_type_ids"):
                rows[key] = torch.cat([prefix[key].expand(count, -1), torch.zeros_like(cand)], 1)
        if "image_grid_thw" in prefix:  # Qwen-VL: patches of every row concatenated
            rows["pixel_values"] = prefix["pixel_values"].repeat(count, 1)
            rows["image_grid_thw"] = prefix["image_grid_thw"].repeat(count, 1)
        elif "pixel_values" in prefix:
            rows["pixel_values"] = prefix["pixel_values"].expand(count, -1, -1, -1)
        scorer._forget_rope_deltas()
        with torch.inference_mode():
            logits = scorer.model(**rows, logits_to_keep=width + 1).logits[:, :-1].float()
        logp = torch.log_softmax(logits, -1).gather(2, cand[:, :, None]).squeeze(-1)
        out += (logp * mask).sum(1).tolist()
    return out


def widen(scorer, width: int, layers: int, heads: int) -> None:
    """Replace the tiny model by the same architecture `width` wide (random weights): the tiny
    one (32 wide) is so narrow that attention over the prefix outweighs the linear layers, which
    a real VLM's are not. Head size width / heads, a quarter of the heads for K/V (GQA)."""
    import torch

    config = scorer.model.config.__class__.from_dict(scorer.model.config.to_dict())
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
    torch.manual_seed(0)
    scorer.model = type(scorer.model)._from_config(config, dtype=scorer.model.dtype).eval()


class Setup:
    """One image, a prefix of ~600 tokens (`image_tokens` of image where the tiny processor
    allows, the rest prompt), the 729 candidates of a Color N=3 item cut to 16-24 tokens."""

    def __init__(
        self, model: str, image_tokens: int, chunk: int, wide: tuple[int, int, int] | None
    ) -> None:
        self.model, self.image_tokens, self.chunk = model, image_tokens, chunk
        self.scorer = scorer = load_scorer(model, device="cpu", chunk_size=chunk)
        if wide:
            widen(scorer, *wide)
        self.image = Image.new("RGB", (64, 64), (180, 40, 40))
        if image_tokens and hasattr(scorer.processor.image_processor, "max_pixels"):
            # Qwen-VL: one merged token per 28x28 pixels; real 1024x1024 images: ~1,300 tokens.
            pixels = image_tokens * 28 * 28
            scorer.processor.image_processor.min_pixels = pixels
            scorer.processor.image_processor.max_pixels = pixels
            side = int(pixels**0.5)
            self.image = Image.new("RGB", (side, side), (180, 40, 40))
        # The tiny tokenizers are byte-level: 1 character = 1 token. Fill the rest with prompt.
        probe = scorer._prefix_inputs(self.image)["input_ids"].shape[1]
        words = "Look at the picture carefully and describe the objects, colors and layout. " * 10
        scorer.prompt = words[: max(20, 600 - probe + len(scorer.prompt))]
        self.prefix = scorer._prefix_inputs(self.image)
        self.prefix_tokens = self.prefix["input_ids"].shape[1]
        # 729 distinct captions of 16-24 tokens (20 on average): lengths differ within a batch
        captions = [f"{i:03d} {c[: 12 + i % 9]}" for i, c in enumerate(color_items(1)[0])]
        self.requests = [ScoreRequest("img", c) for c in captions]
        self.ids = scorer._caption_ids(captions)
        self.caption_tokens = sum(len(c) for c in self.ids)
        # token-count limit: tokens the baseline runs / tokens the shared path runs
        everything = len(self.ids) * self.prefix_tokens + self.caption_tokens
        self.limit = everything / (self.prefix_tokens + self.caption_tokens)
        text = scorer.model.config.get_text_config()
        self.shape = f"{text.hidden_size} wide x {text.num_hidden_layers} layers"
        scorer.score(self.requests[:2], {"img": self.image})  # warm-up (allocator, kernels)

    def paths(self) -> dict[str, Callable[[], list[float]]]:
        scorer, images = self.scorer, {"img": self.image}
        return {
            "batched, no sharing": lambda: batched_no_sharing(
                scorer, self.prefix, self.ids, self.chunk
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
    """Every path's median of `repeats`, its speed-up over the baseline and the fraction of the
    token-count limit that is; every path's scores against the baseline's."""
    paths, runs, scores = setup.paths(), {}, {}
    for _ in range(repeats):  # interleaved: a change of the machine's load hits every path
        for name, fn in paths.items():
            t0 = time.perf_counter()
            scores[name] = fn()
            runs.setdefault(name, []).append(time.perf_counter() - t0)
    times = {name: statistics.median(values) for name, values in runs.items()}
    base = scores["batched, no sharing"]
    print(
        f"{setup.model} ({setup.shape}), prefix {setup.prefix_tokens} tokens "
        f"({setup.image_tokens or 'few'} of image), {len(setup.ids)} candidates of "
        f"{setup.caption_tokens / len(setup.ids):.1f} tokens, batches of {setup.chunk}, medians "
        f"of {repeats}; token-count limit {setup.limit:.1f}x"
    )
    print(f"  {'path':<38}{'s':>8}{'speed-up':>10}{'of limit':>10}{'max |diff|':>12}  argmax")
    for name, wall in times.items():
        ratio = times["batched, no sharing"] / wall
        diff = max(abs(x - y) for x, y in zip(scores[name], base))
        same = "same" if _argmax(scores[name]) == _argmax(base) else "DIFFERS"
        print(
            f"  {name:<38}{wall:>8.2f}{ratio:>9.1f}x{ratio / setup.limit:>10.0%}{diff:>12.1e}"
            f"  {same}"
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


def per_item_loop(scorer, items: list[list[str]], images: list) -> list[list[float]]:
    """SugarCrepe-style: one item at a time, its image and all its captions, padded."""
    import torch

    model, out = scorer.model, []
    with torch.inference_mode():
        for image, captions in zip(images, items):
            img = torch.nn.functional.normalize(
                model.encode_image(scorer.preprocess(image).unsqueeze(0)), dim=-1
            )
            txt = torch.nn.functional.normalize(
                model.encode_text(scorer.tokenizer(captions)), dim=-1
            )
            out.append(_scale(scorer, (txt @ img[0]).float()))
    return out


def batched_loop(scorer, items: list[list[str]], images: list, per: int = 8) -> list[list[float]]:
    """CLIP_benchmark-style: batches of `per` items; images in one batch, the items' captions
    in batches of 256, padded; no sharing of captions across items."""
    import torch

    model, out = scorer.model, []
    with torch.inference_mode():
        for start in range(0, len(items), per):
            group, pics = items[start : start + per], images[start : start + per]
            img = model.encode_image(torch.stack([scorer.preprocess(p) for p in pics]))
            img = torch.nn.functional.normalize(img, dim=-1)
            flat = [c for captions in group for c in captions]
            txt = torch.cat([
                model.encode_text(scorer.tokenizer(flat[i : i + 256]))
                for i in range(0, len(flat), 256)
            ])  # fmt: skip
            txt = torch.nn.functional.normalize(txt, dim=-1)
            offset = 0
            for k, captions in enumerate(group):
                rows = txt[offset : offset + len(captions)]
                out.append(_scale(scorer, (rows @ img[k]).float()))
                offset += len(captions)
    return out


def padded_distinct(scorer, items: list[list[str]], images: list) -> list[list[float]]:
    """autocomp before length batching: distinct captions once, batches of 256, padded."""
    import torch

    texts = list(dict.fromkeys(c for captions in items for c in captions))
    model = scorer.model
    with torch.inference_mode():
        img = model.encode_image(torch.stack([scorer.preprocess(p) for p in images]))
        img = torch.nn.functional.normalize(img, dim=-1)
        txt = torch.cat([
            model.encode_text(scorer.tokenizer(texts[i : i + 256]))
            for i in range(0, len(texts), 256)
        ])  # fmt: skip
        txt = torch.nn.functional.normalize(txt, dim=-1)
    row = {t: i for i, t in enumerate(texts)}
    return [
        _scale(scorer, (txt[[row[c] for c in captions]] @ img[k]).float())
        for k, captions in enumerate(items)
    ]


def _scale(scorer, cos) -> list[float]:
    if scorer.entry.score == "sigmoid":
        cos = scorer.model.logit_scale.exp() * cos + scorer.model.logit_bias
    return cos.tolist()


def autocomp(scorer, items: list[list[str]], images: list) -> list[list[float]]:
    scorer.tokens.clear()  # every run tokenizes afresh, as the baselines do
    requests = [ScoreRequest(f"img{k}", c) for k, captions in enumerate(items) for c in captions]
    flat = scorer.score(requests, {f"img{k}": p for k, p in enumerate(images)})
    out, offset = [], 0
    for captions in items:
        out.append(flat[offset : offset + len(captions)])
        offset += len(captions)
    return out


def contrastive(model: str, count: int, repeats: int) -> None:
    import torch

    torch.set_grad_enabled(False)
    items = color_items(count)
    images = [Image.new("RGB", (64, 64), (10 * i % 256, 80, 160)) for i in range(count)]
    scorer = load_scorer(model, device="cpu")
    pairs = sum(len(c) for c in items)
    distinct = len({c for captions in items for c in captions})
    paths = [
        ("per-item loop (SugarCrepe-style)", per_item_loop),
        ("batched loop (CLIP_benchmark-style)", batched_loop),
        ("autocomp before length batching", padded_distinct),
        ("autocomp", autocomp),
    ]
    results = {}
    for name, fn in paths:
        results[name] = median_time(lambda fn=fn: fn(scorer, items, images), repeats)
    reference = results["autocomp before length batching"][1]
    ours = results["autocomp"][0]
    print(
        f"{model} ({'causal, EOT-pooled' if scorer.trim else 'non-causal'} text tower), {count} "
        f"Color N=3 items, {pairs:,} pairs, {distinct:,} distinct captions, medians of {repeats}:"
    )
    print(f"  {'path':<38}{'s':>7}{'captions/s':>12}{'autocomp is':>13}{'max |diff|':>12}  same")
    for name, (wall, scores) in results.items():
        diff = max(abs(a - b) for x, y in zip(scores, reference) for a, b in zip(x, y))
        same = all(
            max(range(len(x)), key=x.__getitem__) == max(range(len(y)), key=y.__getitem__)
            for x, y in zip(scores, reference)
        )
        print(
            f"  {name:<38}{wall:>7.2f}{pairs / wall:>12,.0f}{wall / ours:>12.2f}x"
            f"{diff:>12.1e}  {same}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny-qwen2.5-vl", "tiny-llava"])
    parser.add_argument("--items", type=int, default=40, help="Color N=3 items (contrastive)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=128, help="candidates per generative chunk")
    parser.add_argument("--width", type=int, default=256, help="generative: 0 = tiny as built")
    parser.add_argument("--layers", type=int, default=2, help="generative: with --width")
    parser.add_argument("--heads", type=int, default=8, help="generative: with --width")
    parser.add_argument("--profile", action="store_true", help="generative: where time goes")
    parser.add_argument("--skip-generative", action="store_true")
    parser.add_argument("--skip-contrastive", action="store_true")
    args = parser.parse_args()
    if not args.skip_contrastive:
        print("contrastive (CPU, tiny random-weight encoders):")
        for model in ("tiny-clip", "tiny-siglip"):
            contrastive(model, args.items, args.repeats)
    if not args.skip_generative:
        print("generative (CPU, random-weight VLMs):")
        wide = (args.width, args.layers, args.heads) if args.width else None
        for model in args.models:  # Qwen-VL: 540 image tokens; LLaVA's tiny tower gives 17
            setup = Setup(model, 540, args.chunk, wide)
            generative(setup, args.repeats)
            if args.profile:
                profile(setup)


if __name__ == "__main__":
    main()
