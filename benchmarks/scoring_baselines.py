"""The scoring loops a peer would write, the baselines `scoring_throughput.py` and `gpu_bench.py`
time autocomp against (and tests/scoring check autocomp's predictions against).

Contrastive (open_clip models, scores as autocomp's: cosine, or SigLIP's log-odds):
- `per_item_loop` (SugarCrepe-style): per item, its image and all its captions, padded;
- `batched_loop` (CLIP_benchmark-style): batches of items, their images in one batch, their
  captions in batches of 256, padded to the full context; nothing shared across items;
- `padded_distinct`: autocomp before length batching: distinct captions once, batches of 256.
Generative:
- `batched_no_sharing`: chunks of candidates, each row the whole image+prompt prefix and one
  caption, one forward per chunk, no cache, logits only where a caption token is predicted.
"""

from __future__ import annotations

from typing import Any


def _scale(scorer: Any, cos: Any) -> list[float]:
    if scorer.entry.score == "sigmoid":
        cos = scorer.model.logit_scale.exp() * cos + scorer.model.logit_bias
    return cos.tolist()


def per_item_loop(scorer: Any, items: list[list[str]], images: list) -> list[list[float]]:
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


def batched_loop(
    scorer: Any, items: list[list[str]], images: list, per: int = 8, text_batch: int = 256
) -> list[list[float]]:
    """CLIP_benchmark-style: batches of `per` items; images in one batch, the items' captions
    in batches of `text_batch`, padded; no sharing of captions across items."""
    import torch

    model, out = scorer.model, []
    with torch.inference_mode():
        for start in range(0, len(items), per):
            group, pics = items[start : start + per], images[start : start + per]
            img = model.encode_image(torch.stack([scorer.preprocess(p) for p in pics]))
            img = torch.nn.functional.normalize(img, dim=-1)
            flat = [c for captions in group for c in captions]
            txt = torch.cat([
                model.encode_text(scorer.tokenizer(flat[i : i + text_batch]))
                for i in range(0, len(flat), text_batch)
            ])  # fmt: skip
            txt = torch.nn.functional.normalize(txt, dim=-1)
            offset = 0
            for k, captions in enumerate(group):
                rows = txt[offset : offset + len(captions)]
                out.append(_scale(scorer, (rows @ img[k]).float()))
                offset += len(captions)
    return out


def padded_distinct(scorer: Any, items: list[list[str]], images: list) -> list[list[float]]:
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


def batched_no_sharing(scorer: Any, prefix: dict, ids: list[list[int]], batch: int) -> list[float]:
    """The fair generative baseline: chunks of `batch` rows, each the whole prefix + one caption
    (right padded), one forward per chunk, no cache; logits only where a caption token is
    predicted."""
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
