"""Contrastive scoring with open_clip: CLIP-family cosine, SigLIP-family sigmoid score.

Per call, each distinct image and each distinct caption is encoded exactly once (the counts are
kept in `calls`), in batches. Scores:
- cosine (CLIP family): cos(image, caption);
- sigmoid (SigLIP family): logit_scale * cos + logit_bias, the log-odds of the sigmoid-loss score
  (Zhai et al. 2023). Stored as log-odds, not as sigmoid(...), which saturates to ties in float32.
Weights and preprocessing come from open_clip's own pretrained table (mean/std, resolution,
QuickGELU), a local file (`file:NAME` in AUTOCOMP_WEIGHTS_DIR), or the tiny random variant.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autocomp.devices import select_device
from autocomp.errors import UsageError, weights_error
from autocomp.scoring import ScoreRequest
from autocomp.scoring.registry import ModelEntry

WEIGHTS_DIR_ENV = "AUTOCOMP_WEIGHTS_DIR"


def resolve_weights(entry: ModelEntry) -> str:
    """What to pass to open_clip as `pretrained`."""
    if entry.is_tiny:
        from autocomp.tiny.scoring import ensure_open_clip_weights

        return str(ensure_open_clip_weights(entry))
    if entry.weights.startswith("file:"):
        folder = Path(os.environ.get(WEIGHTS_DIR_ENV, "."))
        path = folder / entry.weights.removeprefix("file:")
        if not path.is_file():
            raise UsageError(
                f"weights of {entry.name}",
                str(path),
                f"not found; download them ({entry.notes or 'see the registry'}) and set "
                f"{WEIGHTS_DIR_ENV} to their folder",
            )
        return str(path)
    return entry.weights


class OpenClipScorer:
    """Scores (image, caption) pairs with an open_clip model."""

    def __init__(
        self, entry: ModelEntry, device: str | None = None, batch_size: int = 256, **_: Any
    ) -> None:
        import open_clip

        from autocomp.tiny.scoring import register_open_clip_configs

        register_open_clip_configs()
        self.entry = entry
        self.device = select_device(device)
        precision = "fp16" if entry.dtype == "float16" and self.device != "cpu" else "fp32"
        pretrained = resolve_weights(entry)
        try:
            model, _, preprocess = open_clip.create_model_and_transforms(
                entry.architecture, pretrained=pretrained, device=self.device, precision=precision
            )
            self.tokenizer = open_clip.get_tokenizer(entry.architecture)
        except (RuntimeError, OSError, ValueError) as exc:
            raise weights_error(
                f"weights of {entry.name}", f"{entry.architecture}/{pretrained}", exc
            ) from exc
        self.model = model.eval()
        self.preprocess = preprocess
        self.batch_size = batch_size
        self.calls = {"image_encodes": 0, "text_encodes": 0, "image_batches": 0, "text_batches": 0}

    def _encode(self, items: list[Any], kind: str) -> Any:
        import torch

        out = []
        with torch.inference_mode():
            for start in range(0, len(items), self.batch_size):
                chunk = items[start : start + self.batch_size]
                if kind == "image":
                    pixels = torch.stack([self.preprocess(im) for im in chunk]).to(self.device)
                    feats = self.model.encode_image(pixels.to(next(self.model.parameters()).dtype))
                else:
                    feats = self.model.encode_text(self.tokenizer(chunk).to(self.device))
                out.append(torch.nn.functional.normalize(feats.float(), dim=-1))
                self.calls[f"{kind}_encodes"] += len(chunk)
                self.calls[f"{kind}_batches"] += 1
        return torch.cat(out)

    def score(self, requests: Sequence[ScoreRequest], images: Mapping[str, Any]) -> list[float]:
        """Cosine or sigmoid score per request; each distinct image and caption encoded once."""
        if any(r.image_key is None for r in requests):
            raise ValueError("contrastive models cannot score a caption without an image")
        image_keys = list(dict.fromkeys(r.image_key for r in requests))
        texts = list(dict.fromkeys(r.text for r in requests))
        image_feats = self._encode([images[k] for k in image_keys], "image")
        text_feats = self._encode(texts, "text")
        image_row = {k: i for i, k in enumerate(image_keys)}
        text_row = {t: i for i, t in enumerate(texts)}
        import torch

        img_idx = torch.tensor([image_row[r.image_key] for r in requests])
        txt_idx = torch.tensor([text_row[r.text] for r in requests])
        cos = (image_feats[img_idx] * text_feats[txt_idx]).sum(-1)
        if self.entry.score == "sigmoid":
            scale = self.model.logit_scale.exp().float()
            bias = self.model.logit_bias.float()
            cos = scale * cos + bias
        return cos.tolist()
