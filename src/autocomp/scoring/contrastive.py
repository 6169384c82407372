"""Contrastive scoring with open_clip: CLIP-family cosine, SigLIP-family sigmoid score.

Per call, each distinct image and each distinct caption is encoded exactly once (the counts are
kept in `calls`), in batches. Scores:
- cosine (CLIP family): cos(image, caption);
- sigmoid (SigLIP family): logit_scale * cos + logit_bias, the log-odds of the sigmoid-loss score
  (Zhai et al. 2023). Stored as log-odds, not as sigmoid(...), which saturates to ties in float32.
Weights come from open_clip's own pretrained table, a local file (`file:NAME` in
AUTOCOMP_WEIGHTS_DIR), or the tiny random variant; preprocessing (mean/std, interpolation,
resize mode, QuickGELU) from the registry entry, which is the truth for it.

Speed, with the same scores as open_clip's own `encode_text` (tests/scoring/test_contrastive.py):
- Captions are sorted by token length and each batch is encoded only up to its longest caption
  when the text tower is causal and pools at the end-of-text token (CLIP): positions after the
  EOT cannot change it. A non-causal tower (SigLIP: no mask, pools the last position) sees the
  padding, so it always runs at its full, fixed context (64 tokens).
- On a CPU a text batch holds at most `CPU_TEXT_FLOATS` floats of the residual stream
  (captions x positions x width; at most `batch_size` captions): past that the tower's
  activations fall out of the core's cache and a caption costs up to twice as much (measured on
  the tiny towers, 64 wide, and a ViT-B/16 text tower, 512 wide: docs/performance.md). A
  SigLIP tower, which always runs its 64 positions, gets batches of 128 tiny captions instead
  of 256. On a GPU the batch is what a quarter of the free memory holds.
- Token ids are cached per (tokenizer, caption) in the process, so models with the same
  tokenizer scored in one process tokenize each caption once; with open_clip's BPE tokenizer
  the ids of each word piece are cached too (`PieceTokenizer`: the same ids, about half the
  tokenizing time, which was 45 % of a tiny tower's scoring at N=3).
- Captions longer than the context are truncated by the tokenizer, as in every CLIP evaluation;
  `truncated(texts)` says which were, so the score stage counts them instead of hiding them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from autocomp.devices import select_device
from autocomp.errors import WITHOUT_PROFILE, UsageError, raised_not_logged, weights_error
from autocomp.scoring import Scorer, ScoreRequest
from autocomp.scoring.registry import ModelEntry
from autocomp.scoring.tokens import TOKEN_CACHE, TOKEN_CACHE_LIMIT, PieceTokenizer, tokenizer_key

WEIGHTS_DIR_ENV = "AUTOCOMP_WEIGHTS_DIR"
CPU_TEXT_FLOATS = 2**19  # residual-stream floats (captions x positions x width) per CPU text batch


SCHEMAS = ("hf-hub:", "local-dir:")  # open_clip architectures that carry their own weights


def resolve_weights(entry: ModelEntry) -> str | None:
    """What to pass to open_clip as `pretrained` (None: the architecture names its weights,
    `hf-hub:ORG/NAME` or `local-dir:/path`)."""
    if (entry.architecture or "").startswith(SCHEMAS):
        return None
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


def preprocess_options(entry: ModelEntry) -> dict[str, Any]:
    """open_clip keyword arguments for the registry's preprocessing (the registry is the truth)."""
    pre = entry.preprocess or {}
    options: dict[str, Any] = {}
    if "mean" in pre:
        options["image_mean"] = tuple(float(v) for v in pre["mean"])
    if "std" in pre:
        options["image_std"] = tuple(float(v) for v in pre["std"])
    if "interpolation" in pre:
        options["image_interpolation"] = str(pre["interpolation"])
    if "resize_mode" in pre:
        options["image_resize_mode"] = str(pre["resize_mode"])
    if pre.get("quick_gelu"):
        options["force_quick_gelu"] = True
    return options


def text_batches(lengths: Sequence[int], most: int, positions: int | None) -> Iterator[range]:
    """Consecutive batches over captions sorted by token length (`lengths`, ascending: what each
    caption makes its batch run): each the longest run of at most `most` captions that, when
    `positions` is given, holds at most that many positions (captions x its longest; a caption
    longer than that alone). Lengths ascend, so that count is found by bisection."""
    start, total = 0, len(lengths)
    while start < total:
        low, high = 1, min(most, total - start)
        while positions and low < high:
            mid = (low + high + 1) // 2
            if mid * lengths[start + mid - 1] <= positions:
                low = mid
            else:
                high = mid - 1
        count = low if positions else high
        yield range(start, start + count)
        start += count


def text_width(model: Any) -> int:
    """The width of an open_clip model's text tower (its residual stream); 1024 if unknown (a
    Hugging Face text tower)."""
    for tower in (model, getattr(model, "text", None)):
        for part in (tower, getattr(tower, "transformer", None)):
            width = getattr(part, "width", None)
            if isinstance(width, int):
                return width
    return 1024


def text_batch_size(device: str, width: int, context: int, default: int) -> int:
    """Captions per text batch: `default` on a CPU; on a GPU, what a quarter of the free memory
    holds (activations of about 16 x width floats per token, between 64 and 4,096)."""
    if not device.startswith("cuda"):
        return default
    import torch

    free, _ = torch.cuda.mem_get_info(torch.device(device))
    per_caption = 16 * width * context * 4
    return int(min(4096, max(64, free // 4 // per_caption)))


class OpenClipScorer(Scorer):
    """Scores (image, caption) pairs with an open_clip model."""

    def __init__(
        self,
        entry: ModelEntry,
        device: str | None = None,
        batch_size: int = 256,
        text_batch: int | None = None,
        **_: Any,
    ) -> None:
        import open_clip

        from autocomp.tiny.scoring import register_open_clip_configs

        register_open_clip_configs()
        if entry.architecture is None:
            raise ValueError(f"{entry.name}: an open_clip model needs its architecture")
        self.entry = entry
        self.device = select_device(device)
        precision = "fp16" if entry.dtype == "float16" and self.device != "cpu" else "fp32"
        pretrained = resolve_weights(entry)
        try:
            with raised_not_logged():  # the raise below is the one line
                model, _, preprocess = open_clip.create_model_and_transforms(
                    entry.architecture,
                    pretrained=pretrained,
                    device=self.device,
                    precision=precision,
                    **preprocess_options(entry),
                )
            self.tokenizer = open_clip.get_tokenizer(entry.architecture)
        except (RuntimeError, OSError, ValueError) as exc:
            raise weights_error(
                f"weights of {entry.name}", f"{entry.architecture}/{pretrained}", exc,
                WITHOUT_PROFILE,
            ) from exc  # fmt: skip
        self.model = model.eval()
        self.preprocess = preprocess
        self.batch_size = batch_size
        self.context = int(self.tokenizer.context_length)
        self.trim = _trimmable(self.model)
        self.tokens = TOKEN_CACHE.setdefault(tokenizer_key(entry.architecture), {})
        self.pieces = PieceTokenizer.of(self.tokenizer)
        width = text_width(self.model)
        self.text_batch = text_batch or text_batch_size(
            self.device, width, self.context, batch_size
        )
        # an explicit text_batch is kept as given; the CPU default is bounded by the cache
        cpu = text_batch is None and not self.device.startswith("cuda")
        self.text_positions = max(1, CPU_TEXT_FLOATS // width) if cpu else None
        self.calls = {
            "image_encodes": 0, "text_encodes": 0, "image_batches": 0, "text_batches": 0,
            "text_positions": 0,
        }  # fmt: skip

    # ------------------------------------------------------------------------- tokens

    def _tokenize(self, texts: Sequence[str]) -> None:
        """Token ids of every caption not yet cached, and whether the context truncated it."""
        todo = [t for t in dict.fromkeys(texts) if t not in self.tokens]
        if not todo:
            return
        if len(self.tokens) + len(todo) > TOKEN_CACHE_LIMIT:
            self.tokens.clear()
        if self.pieces is not None:  # open_clip's BPE tokenizer, its pieces cached (exact)
            ids, cut = self.pieces.rows(todo, self.context)
        else:
            probe = self.tokenizer(todo, context_length=self.context + 1)
            pad = self.tokenizer([""], context_length=self.context + 1)[0, -1]
            cut = (probe[:, self.context] != pad).tolist()
            ids = probe[:, : self.context].clone()
            if any(cut):  # the tokenizer's own truncation (it keeps the end-of-text token)
                rows = [i for i, flag in enumerate(cut) if flag]
                ids[rows] = self.tokenizer([todo[i] for i in rows], context_length=self.context)
        for text, row, flag in zip(todo, ids, cut):
            self.tokens[text] = (row, bool(flag))

    def truncated(self, texts: Sequence[str]) -> list[bool]:
        """Whether each caption is longer than the model's text context (and was cut)."""
        self._tokenize(texts)
        return [self.tokens[t][1] for t in texts]

    def token_counts(self, texts: Sequence[str]) -> None:
        """None: a cosine or sigmoid score is not a sum over the caption's tokens."""
        return None

    # ------------------------------------------------------------------------- encoders

    def _encode_images(self, items: list[Any]) -> Any:
        import torch

        out = []
        dtype = next(self.model.parameters()).dtype
        with torch.inference_mode():
            for start in range(0, len(items), self.batch_size):
                chunk = items[start : start + self.batch_size]
                pixels = torch.stack([self.preprocess(im) for im in chunk]).to(self.device)
                feats = self.model.encode_image(pixels.to(dtype))
                out.append(torch.nn.functional.normalize(feats.float(), dim=-1))
                self.calls["image_encodes"] += len(chunk)
                self.calls["image_batches"] += 1
        return torch.cat(out) if out else torch.empty(0)

    def _encode_texts(self, texts: list[str]) -> Any:
        """Normalised text features in the order of `texts`, batched by token length."""
        import torch

        self._tokenize(texts)
        ids = torch.stack([self.tokens[t][0] for t in texts])
        lengths = ids.argmax(dim=-1) + 1 if self.trim else torch.full((len(texts),), self.context)
        order = torch.argsort(lengths, stable=True)
        ordered = lengths[order].tolist()
        feats = torch.empty(len(texts), 0)
        with torch.inference_mode():
            for span in text_batches(ordered, self.text_batch, self.text_positions):
                rows = order[span.start : span.stop]
                batch = ids[rows]
                if self.trim:
                    batch = batch[:, : int(lengths[rows].max())]
                out = self._text_features(batch.to(self.device))
                out = torch.nn.functional.normalize(out.float(), dim=-1).cpu()
                if feats.shape[1] == 0:
                    feats = torch.empty(len(texts), out.shape[1])
                feats[rows] = out
                self.calls["text_encodes"] += len(rows)
                self.calls["text_batches"] += 1
                self.calls["text_positions"] += batch.numel()
        return feats

    def _text_features(self, tokens: Any) -> Any:
        if not self.trim or tokens.shape[1] == self.context:
            return self.model.encode_text(tokens)
        return _encode_text_prefix(self.model, tokens)

    def text_similarities(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """The cosine of the text features of each (query, text) pair, each distinct text
        encoded once (SugarCrepe++'s text-only task compares its captions so, for every
        model: VLMs/test_Variants_CLIP.py:76-78)."""
        if not pairs:
            return []
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        feats = self._encode_texts(texts)
        row = {t: i for i, t in enumerate(texts)}
        import torch

        left = torch.tensor([row[a] for a, _ in pairs], dtype=torch.long)
        right = torch.tensor([row[b] for _, b in pairs], dtype=torch.long)
        return (feats[left] * feats[right]).sum(-1).tolist()

    def score(self, requests: Sequence[ScoreRequest], images: Mapping[str, Any]) -> list[float]:
        """Cosine or sigmoid score per request; each distinct image and caption encoded once."""
        if not requests:
            return []
        keyed = [(r.image_key, r.text) for r in requests if r.image_key is not None]
        if len(keyed) < len(requests):
            raise ValueError("contrastive models cannot score a caption without an image")
        image_keys = list(dict.fromkeys(k for k, _ in keyed))
        texts = list(dict.fromkeys(t for _, t in keyed))
        image_feats = self._encode_images([images[k] for k in image_keys]).to("cpu")
        text_feats = self._encode_texts(texts)
        image_row = {k: i for i, k in enumerate(image_keys)}
        text_row = {t: i for i, t in enumerate(texts)}
        import torch

        img_idx = torch.tensor([image_row[k] for k, _ in keyed], dtype=torch.long)
        txt_idx = torch.tensor([text_row[t] for _, t in keyed], dtype=torch.long)
        cos = (image_feats[img_idx] * text_feats[txt_idx]).sum(-1)
        if self.entry.score == "sigmoid":
            scale = self.model.logit_scale.exp().float().cpu()
            bias = self.model.logit_bias.float().cpu()
            cos = scale * cos + bias
        return cos.tolist()


# ----------------------------------------------------------------------------- ad-hoc models


def _model_config(architecture: str, shown: str) -> dict[str, Any]:
    import open_clip

    from autocomp.tiny.scoring import register_open_clip_configs

    register_open_clip_configs()
    config = open_clip.get_model_config(architecture)
    if config is None:
        import difflib

        close = difflib.get_close_matches(architecture, open_clip.list_models(), n=3, cutoff=0.5)
        hint = f"closest: {', '.join(close)}; " if close else ""
        raise UsageError(
            "models",
            shown,
            f"unknown open_clip architecture {architecture}; {hint}open_clip.list_models() "
            "lists all (or give hf-hub:ORG/NAME)",
        )
    return config


def _checkpoint(pretrained: str, shown: str) -> str | None:
    """The absolute `file:` form of a checkpoint path (file:PATH or PATH; a relative file:NAME
    is looked up in AUTOCOMP_WEIGHTS_DIR as in the registry), or None if it names no file."""
    is_file_form = pretrained.startswith("file:")
    raw = pretrained.removeprefix("file:")
    base = Path(os.environ.get(WEIGHTS_DIR_ENV, ".")) if is_file_form else Path(".")
    path = (base / raw).resolve()
    if path.is_file():
        return f"file:{path}"
    if is_file_form:
        raise UsageError(
            "models", shown, f"checkpoint {path} not found; give file:/path/to/checkpoint"
        )
    return None


def open_clip_details(
    architecture: str, pretrained: str | None, shown: str, config: dict | None = None
) -> dict[str, Any]:
    """Registry fields of an open_clip model that is not registered, from open_clip's own
    tables: `weights`, `score` (sigmoid when the model config has a logit bias: SigLIP; cosine
    otherwise) and `preprocess` (the pretrained tag's, or the exported open_clip_config.json's
    `preprocess_cfg`, over open_clip's defaults). An unknown architecture or tag is a usage
    error with the choices, before anything is loaded. `config`: the open_clip_config.json of
    an `hf-hub:` / `local-dir:` architecture, already read."""
    import open_clip
    from open_clip.transform import PreprocessCfg

    preprocess = dict(vars(PreprocessCfg()))
    weights: str | None
    if architecture.startswith(SCHEMAS):
        config = config or {}
        model_cfg = config.get("model_cfg")
        if not isinstance(model_cfg, dict):
            raise UsageError("models", shown, "its open_clip_config.json has no model_cfg")
        preprocess.update(config.get("preprocess_cfg") or {})
        weights = architecture
        quick_gelu = bool(model_cfg.get("quick_gelu"))
    else:
        model_cfg = _model_config(architecture, shown)
        tags = open_clip.list_pretrained_tags_by_model(architecture)
        weights = _checkpoint(pretrained or "", shown) if pretrained not in tags else None
        if pretrained in tags:
            tag = open_clip.get_pretrained_cfg(architecture, pretrained)
            preprocess.update({k: v for k, v in tag.items() if k in preprocess})
            weights = str(pretrained)
            quick_gelu = bool(tag.get("quick_gelu") or model_cfg.get("quick_gelu"))
        elif weights is None:
            listed = ", ".join(tags[:8]) + (f" and {len(tags) - 8} more" if len(tags) > 8 else "")
            listed = listed or "none"
            raise UsageError(
                "models",
                shown,
                f"unknown pretrained weights {pretrained!r} for {architecture} (its tags in "
                f"open_clip.list_pretrained(): {listed}); or give file:/path/to/checkpoint",
            )
        else:
            quick_gelu = bool(model_cfg.get("quick_gelu"))
    size: Any = (model_cfg.get("vision_cfg") or {}).get("image_size", preprocess["size"])
    sigmoid = "init_logit_bias" in model_cfg or "logit_bias" in model_cfg
    return {
        "weights": weights,
        "score": "sigmoid" if sigmoid else "cosine",
        "preprocess": {
            "resolution": size if isinstance(size, int) else list(size),
            "mean": [float(v) for v in preprocess["mean"]],
            "std": [float(v) for v in preprocess["std"]],
            "interpolation": str(preprocess["interpolation"]),
            "resize_mode": str(preprocess["resize_mode"]),
            "quick_gelu": quick_gelu,
        },
    }


def open_clip_pair_for_hub(repo_id: str) -> tuple[str, str] | None:
    """The (architecture, tag) of open_clip's pretrained table whose weights live in the hub
    repository `repo_id`, if any."""
    import open_clip

    for architecture, tag in open_clip.list_pretrained():
        hub = open_clip.get_pretrained_cfg(architecture, tag).get("hf_hub", "")
        if hub.strip("/") == repo_id:
            return architecture, tag
    return None


def _trimmable(model: Any) -> bool:
    """A text tower whose output at the EOT token ignores later positions: a causal mask and
    argmax (EOT) pooling, on open_clip's CLIP class (its text tower's parts are attributes)."""
    import open_clip

    return (
        isinstance(model, open_clip.CLIP)
        and getattr(model, "attn_mask", None) is not None
        and getattr(model, "text_pool_type", None) == "argmax"
    )


def _encode_text_prefix(model: Any, tokens: Any) -> Any:
    """open_clip's CLIP.encode_text over the first L positions only (L = tokens.shape[1])."""
    import torch
    from open_clip.transformer import text_global_pool

    length = tokens.shape[1]
    cast_dtype = model.transformer.get_cast_dtype()
    x = model.token_embedding(tokens).to(cast_dtype)
    x = x + model.positional_embedding[:length].to(cast_dtype)
    x = model.transformer(x, attn_mask=model.attn_mask[:length, :length])
    x = model.ln_final(x)
    x = text_global_pool(x, tokens, model.text_pool_type)
    if model.text_projection is not None:
        if isinstance(model.text_projection, torch.nn.Linear):
            x = model.text_projection(x)
        else:
            x = x @ model.text_projection
    return x
