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

Generative (one image, an image+prompt prefix of about 600 tokens, 729 candidates of 15 tokens):
- batched, no sharing: chunks of candidates, each row the whole prefix + its caption;
- shared prefix (autocomp): the prefix once, its KV cache repeated for each chunk's candidates;
- shared prefix, packed chunks: each chunk one row after the prefix with a 4D mask (no copy).
Medians of both; the ratio against the token-count limit (prefix + 15) / 15.

Usage: python benchmarks/scoring_throughput.py [--items 40] [--repeats 3] [--skip-generative]
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
    padded), one forward per chunk, no cache."""
    import torch

    out: list[float] = []
    length, device = prefix["input_ids"].shape[1], prefix["input_ids"].device
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
            logits = scorer.model(**rows).logits[:, length - 1 : -1].float()
        logp = torch.log_softmax(logits, -1).gather(2, cand[:, :, None]).squeeze(-1)
        out += (logp * mask).sum(1).tolist()
    return out


def generative(model: str, image_tokens: int, repeats: int, chunk: int) -> None:
    """~600-token prefix: `image_tokens` of image (where the tiny processor allows) + prompt."""
    shared = load_scorer(model, device="cpu", chunk_size=chunk)
    image = Image.new("RGB", (64, 64), (180, 40, 40))
    if image_tokens and hasattr(shared.processor.image_processor, "max_pixels"):
        # Qwen-VL: one merged token per 28x28 pixels; real 1024x1024 images give ~1,300 tokens.
        pixels = image_tokens * 28 * 28
        shared.processor.image_processor.min_pixels = pixels
        shared.processor.image_processor.max_pixels = pixels
        side = int(pixels**0.5)
        image = Image.new("RGB", (side, side), (180, 40, 40))
    # The tiny tokenizers are byte-level: 1 character = 1 token. Fill the rest with prompt.
    probe = shared._prefix_inputs(image)["input_ids"].shape[1]
    words = "Look at the picture carefully and describe the objects, colors and layout. " * 10
    shared.prompt = words[: max(20, 600 - probe + len(shared.prompt))]
    prefix = shared._prefix_inputs(image)
    prefix_tokens = prefix["input_ids"].shape[1]
    captions = [f"{c[:15]:<15}" for c in color_items(1)[0]]
    captions = [f"{i:03d} " + c[:11] for i, c in enumerate(captions)]  # 729 distinct, 15 tokens
    requests = [ScoreRequest("img", c) for c in captions]
    ids = shared._caption_ids(captions)
    shared.score(requests[:2], {"img": image})  # warm-up (allocator, kernels)
    t_shared, a = median_time(lambda: shared.score(requests, {"img": image}), repeats)
    shared.packed = True
    t_packed, c = median_time(lambda: shared.score(requests, {"img": image}), repeats)
    shared.packed = False
    t_batched, b = median_time(lambda: batched_no_sharing(shared, prefix, ids, chunk), repeats)
    diff = max(abs(x - y) for x, y in [*zip(a, b), *zip(c, b)])
    same = max(range(len(a)), key=a.__getitem__) == max(range(len(b)), key=b.__getitem__)
    kind = "image-heavy" if image_tokens else "text-heavy"
    limit = (prefix_tokens + 15) / 15
    ratio = t_batched / t_shared
    print(
        f"{model:<16} {kind:<11} prefix {prefix_tokens}, {len(captions)} x 15 tokens, chunks of "
        f"{chunk}: batched no-sharing {t_batched:.2f} s, shared {t_shared:.2f} s (medians of "
        f"{repeats}): {ratio:.1f}x = {ratio / limit:.0%} of the ~{limit:.0f}x limit; packed "
        f"chunks {t_packed:.2f} s ({t_batched / t_packed:.1f}x); "
        f"max |diff| {diff:.1e}, same argmax: {same}"
    )


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
    parser.add_argument("--skip-generative", action="store_true")
    parser.add_argument("--skip-contrastive", action="store_true")
    args = parser.parse_args()
    if not args.skip_contrastive:
        print("contrastive (CPU, tiny random-weight encoders):")
        for model in ("tiny-clip", "tiny-siglip"):
            contrastive(model, args.items, args.repeats)
    if not args.skip_generative:
        print("generative (CPU, tiny random-weight VLMs):")
        for model in args.models:
            generative(model, 0, args.repeats, args.chunk)
        generative("tiny-qwen2.5-vl", 540, args.repeats, args.chunk)


if __name__ == "__main__":
    main()
