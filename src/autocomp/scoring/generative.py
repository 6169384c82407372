"""Generative MLLM scoring with transformers: a caption's summed token log-likelihood.

For each image, the chat prompt (the image and an instruction in the user turn, then the
assistant turn opening) is the *prefix*; each candidate caption is the continuation. The score is
the sum of log p(token) over the caption's tokens (tokenised on their own, no special tokens).

Shared prefix (the default): the prefix runs once per image into a batch-1 KV cache; candidates
then run in chunks, each a batch of only its own tokens (right padded), and the first caption
token is scored from the prefix's last logits. The language model's attention is swapped, for
the chunk only, for a split attention (`_split_attention`, the cascade/Hydragen decomposition):
every candidate's queries are folded into one sequence per K/V head that attends to the one
prefix cache in a single fused call, each candidate attends causally to its own tokens in a
second, and the two are merged by their log-sum-exps. Nothing is copied per candidate and no
mask is built. Where that cannot reproduce a layer (a sliding window that cuts into the prefix,
logit soft-capping) chunks fall back to the prefix cache copied and repeated per candidate
(`split = False`); `packed = True` runs a chunk as one packed row with a 4D mask instead (kept
for comparison). All give the naive path's scores to float rounding. Chunks hold `chunk_size`
candidates (on a GPU more, as many as a quarter of the free memory holds) and halve on
out-of-memory until they fit. `naive=True` runs
one full forward per candidate: the reference the shared path is tested against. Blind requests
(image None) use the same prompt without the image (paper A.8).

Longer than 450 lines on purpose: the scorer and the split attention it swaps in stay one module,
whose names (`_split_attention`, `_SPLIT`) the tests and benchmarks patch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any

from autocomp.devices import select_device, select_dtype
from autocomp.errors import WITHOUT_PROFILE, weights_error
from autocomp.scoring import Scorer, ScoreRequest
from autocomp.scoring.placement import load_options
from autocomp.scoring.registry import ModelEntry

DEFAULT_PROMPT = "Describe this image in one sentence."
BLIND_PROMPT = "Write one sentence describing a picture."
CAPTION_TOKENS = 1_000_000  # captions whose token ids a scorer keeps before it starts over


def chat_text(processor: Any, with_image: bool, prompt: str) -> str:
    """The prefix as chat text: the user turn (the image placeholder, unexpanded, and the
    instruction `prompt`), then the assistant turn's opening. Every engine scores captions
    after this prefix."""
    content: list[dict[str, str]] = [{"type": "image"}] if with_image else []
    content.append({"type": "text", "text": prompt})
    messages = [{"role": "user", "content": content}]
    return str(processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))


def caption_ids(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Each caption's token ids, tokenised on its own (no special tokens): the prefix/caption
    boundary every engine scores at."""
    ids = tokenizer(texts, add_special_tokens=False).input_ids
    for text, caption in zip(texts, ids):
        if not caption:
            raise ValueError(f"caption {text!r} has no tokens")
    return [list(caption) for caption in ids]


def _is_oom(exc: BaseException) -> bool:
    return "out of memory" in str(exc).lower()


class VlmScorer(Scorer):
    """Scores captions by their log-likelihood under a vision-language model."""

    split = True  # chunks attend to the one prefix cache through the split attention
    grow = True  # on a GPU, chunks larger than chunk_size where free memory holds them
    packed = False  # chunks as one packed row (no cache copies) instead of a repeated cache

    def __init__(
        self,
        entry: ModelEntry,
        device: str | None = None,
        chunk_size: int = 128,
        naive: bool = False,
        random_weights: bool = False,
        max_memory: dict[Any, str] | None = None,
        offload_folder: str | None = None,
        **_: Any,
    ) -> None:
        import transformers

        self.entry = entry
        self.device = select_device(device)
        if self.device == "cpu":
            # transformers' own switch: on CPU, SDPA handles grouped-query attention with a mask
            # itself, instead of materialising the repeated prefix K/V for every candidate
            # (measured: 13.6x -> 21.7x over the naive path). CUDA keeps transformers' default,
            # where masked GQA would fall back to the slow math kernel.
            os.environ.setdefault("TRANSFORMERS_SDPA_FORCE_GQA", "1")
        self.chunk_size = chunk_size
        self.naive = naive
        self.prompt = entry.prompt or DEFAULT_PROMPT
        source = str(self._weights())
        dtype = select_dtype(entry.dtype, self.device)
        try:
            model_class = getattr(transformers, entry.model_class or "")
            self.processor = transformers.AutoProcessor.from_pretrained(
                source,
                trust_remote_code=entry.trust_remote_code,
                revision=None if entry.is_tiny else entry.revision,
            )
            if random_weights:  # throughput benchmarks: the architecture without its weights
                config = transformers.AutoConfig.from_pretrained(
                    source, trust_remote_code=entry.trust_remote_code
                )
                self.model = model_class._from_config(config, dtype=dtype).to(self.device)
            else:  # several GPUs (or a given budget): accelerate places the layers
                placement = load_options(entry, self.device, max_memory, offload_folder)
                self.model = model_class.from_pretrained(
                    source,
                    dtype=dtype,
                    trust_remote_code=entry.trust_remote_code,
                    revision=None if entry.is_tiny else entry.revision,
                    **placement,
                )
                if not placement:
                    self.model = self.model.to(self.device)
        except (OSError, ValueError, AttributeError) as exc:
            raise weights_error(f"weights of {entry.name}", source, exc, WITHOUT_PROFILE) from exc
        self.model.eval()
        self.calls = {"prefix_forwards": 0, "candidate_forwards": 0, "chunks": 0, "tokenized": 0}
        self.caption_tokens: dict[str, list[int]] = {}  # caption -> ids (_caption_ids)

    def _weights(self) -> Any:
        if self.entry.is_tiny:
            from autocomp.tiny.scoring import ensure_vlm

            return ensure_vlm(self.entry)
        return self.entry.weights

    # ------------------------------------------------------------------ inputs

    def _prefix_inputs(self, image: Any, prompt: str | None = None) -> dict[str, Any]:
        default = self.prompt if image is not None else BLIND_PROMPT
        text = chat_text(self.processor, image is not None, prompt or default)
        kwargs: dict[str, Any] = {"text": [text], "return_tensors": "pt"}
        if image is not None:
            kwargs["images"] = [image]
        inputs = self.processor(**kwargs)
        return {k: v.to(self.device) for k, v in inputs.items()}

    def _forget_rope_deltas(self) -> None:
        # Qwen-VL models keep the multimodal RoPE offsets of the last prefill on the module; a
        # new prefix (another image, or none) must compute its own.
        inner = getattr(self.model, "model", None)
        if inner is not None and hasattr(inner, "rope_deltas"):
            inner.rope_deltas = None

    def _caption_ids(self, texts: list[str]) -> list[list[int]]:
        """Each caption's token ids, tokenized once per scorer (a pod): the candidates of a
        family:N recur across its items and parts (the same ids: a caption is tokenized on its
        own, no special tokens, so its ids do not depend on the others)."""
        known = self.caption_tokens
        todo = [t for t in dict.fromkeys(texts) if t not in known]
        if todo:
            # a text-only model's processor is its tokenizer (a blind language-model baseline)
            ids = caption_ids(getattr(self.processor, "tokenizer", self.processor), todo)
            if len(known) + len(todo) > CAPTION_TOKENS:
                known.clear()
            known.update(zip(todo, ids))
            self.calls["tokenized"] += len(todo)
        return [known[t] for t in texts]

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """How many tokens each caption's score sums over (the same tokenisation `score`
        uses; no forward pass): the score stage divides by it for the per-token score. (The
        blind multiple-choice test needs no method of its own: autocomp.scoring.choice asks
        `score` for each option label as the reply to a prompt listing the options.)"""
        return [len(ids) for ids in self._caption_ids(list(texts))]

    def truncated(self, texts: Sequence[str]) -> list[bool]:
        """All False: every caption is scored whole (its tokens follow the prefix; none cut)."""
        return [False] * len(texts)

    # ------------------------------------------------------------------ scoring

    def score(self, requests: Sequence[ScoreRequest], images: Mapping[str, Any]) -> list[float]:
        """Summed caption log-likelihood per request; one prefix pass per distinct
        (image, prompt)."""
        import torch

        groups: dict[tuple[str | None, str | None], list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault((r.image_key, r.prompt), []).append(i)
        scores = [0.0] * len(requests)
        with torch.inference_mode():
            for (key, prompt), positions in groups.items():
                image = None if key is None else images[key]
                prefix = self._prefix_inputs(image, prompt)
                texts = [requests[i].text for i in positions]
                ids = self._caption_ids(texts)
                values = self._naive(prefix, ids) if self.naive else self._shared(prefix, ids)
                for i, v in zip(positions, values):
                    scores[i] = v
        return scores

    def _naive(self, prefix: dict[str, Any], ids: list[list[int]]) -> list[float]:
        import torch

        out = []
        length = prefix["input_ids"].shape[1]
        for caption in ids:
            cand = torch.tensor([caption], device=self.device)
            full = dict(prefix)
            full["input_ids"] = torch.cat([prefix["input_ids"], cand], 1)
            full["attention_mask"] = torch.cat([prefix["attention_mask"], torch.ones_like(cand)], 1)
            for key in prefix:
                if key.endswith("token_type_ids"):
                    full[key] = torch.cat([prefix[key], torch.zeros_like(cand)], 1)
            self._forget_rope_deltas()
            logits = self.model(**full).logits[0, length - 1 : -1].float()
            logp = torch.log_softmax(logits, -1).gather(1, cand[0][:, None])
            out.append(logp.sum().item())
            self.calls["candidate_forwards"] += 1
        return out

    def _shared(self, prefix: dict[str, Any], ids: list[list[int]]) -> list[float]:
        import torch

        self._forget_rope_deltas()
        out = self.model(**prefix, use_cache=True, logits_to_keep=1)  # only the last is read
        self.calls["prefix_forwards"] += 1
        cache = out.cache if hasattr(out, "cache") else out.past_key_values
        last = torch.log_softmax(out.logits[0, -1].float(), -1)
        rope_deltas = getattr(getattr(self.model, "model", None), "rope_deltas", None)
        results: list[float] = []
        start = 0
        while start < len(ids):
            size = min(self._chunk_limit(ids, prefix["input_ids"].shape[1]), len(ids) - start)
            try:
                results += self._chunk(prefix, cache, last, rope_deltas, ids[start : start + size])
            except (torch.OutOfMemoryError, RuntimeError) as exc:
                if not _is_oom(exc) or size == 1:
                    raise
                self.chunk_size, self.grow = max(1, size // 2), False
                if self.device.startswith("cuda"):
                    torch.cuda.empty_cache()
                continue
            start += size
        return results

    def _chunk_limit(self, ids: list[list[int]], length: int) -> int:
        """Candidates per chunk: `chunk_size`; on a GPU, more if a quarter of the free memory
        holds them (per caption token about 12 bytes per vocabulary entry for the logits and
        their float copy, 8 per head and prefix token for the attention's float32 scores, and
        64 x hidden + 12 x intermediate bytes of activations), until an out-of-memory error
        has shrunk the chunk once."""
        if not (self.grow and self.device.startswith("cuda")):
            return self.chunk_size
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(self.device))
        text = self.model.config.get_text_config()
        per_token = 12 * text.vocab_size + 64 * text.hidden_size
        per_token += 8 * text.num_attention_heads * length
        per_token += 12 * getattr(text, "intermediate_size", 4 * text.hidden_size)
        fits = free // 4 // (per_token * max(len(c) for c in ids))
        return int(max(self.chunk_size, min(fits, len(ids), 4096)))

    def _chunk(
        self, prefix: dict[str, Any], cache: Any, last: Any, rope_deltas: Any, ids: list[list[int]]
    ) -> list[float]:
        if self.packed:
            return self._packed_chunk(prefix, cache, last, rope_deltas, ids)
        if self.split:
            try:
                return self._split_chunk(prefix, cache, last, rope_deltas, ids)
            except _NotSplittable:
                self.split = False  # e.g. a sliding window shorter than prefix + caption
        return self._repeated_chunk(prefix, cache, last, rope_deltas, ids)

    def _padded(self, ids: list[list[int]]) -> tuple[Any, Any]:
        """Candidates right-padded into a batch: token ids and a 0/1 mask of real tokens."""
        import torch

        width = max(len(c) for c in ids)
        cand = torch.tensor([c + [0] * (width - len(c)) for c in ids], device=self.device)
        mask = torch.tensor([[1] * len(c) + [0] * (width - len(c)) for c in ids])
        return cand, mask.to(self.device)

    def _split_chunk(
        self, prefix: dict[str, Any], cache: Any, last: Any, rope_deltas: Any, ids: list[list[int]]
    ) -> list[float]:
        """Score a chunk of candidates as a batch of their own tokens, with attention split into
        the prefix part (every candidate's queries against the one batch-1 prefix cache, as one
        matrix product: the cache is read once per chunk, never copied) and the candidate's own
        causal part, merged exactly by their softmax normalisers (`_split_attention`). Right
        padding needs no mask: a real token never attends to a later (padding) position."""
        import torch

        cand, mask = self._padded(ids)
        length = prefix["input_ids"].shape[1]
        positions = torch.arange(length, length + cand.shape[1], device=self.device)
        positions = positions.expand(cand.shape[0], -1)
        if rope_deltas is not None:  # multimodal RoPE (Qwen-VL): 3 x batch x length
            positions = (positions + rope_deltas.to(self.device)).unsqueeze(0).expand(3, -1, -1)
        with _split_attention_over(self.model, cache):
            logits = self.model(input_ids=cand, position_ids=positions, use_cache=False).logits
        self.calls["candidate_forwards"] += len(ids)
        self.calls["chunks"] += 1
        return _summed(logits, last, cand, mask)

    def _repeated_chunk(
        self, prefix: dict[str, Any], cache: Any, last: Any, rope_deltas: Any, ids: list[list[int]]
    ) -> list[float]:
        """Score a chunk of candidates as a batch, over a copy of the prefix cache repeated once
        per candidate."""
        import copy

        import torch

        cand, mask = self._padded(ids)
        count, width = cand.shape
        length = prefix["input_ids"].shape[1]
        chunk_cache = copy.deepcopy(cache)
        chunk_cache.batch_repeat_interleave(count)
        attention = torch.cat([prefix["attention_mask"].expand(count, -1), mask], 1)
        positions = torch.arange(length, length + width, device=self.device).expand(count, -1)
        if rope_deltas is not None:  # multimodal RoPE (Qwen-VL): 3 x batch x length
            positions = (positions + rope_deltas.to(self.device)).unsqueeze(0).expand(3, -1, -1)
        logits = self.model(
            input_ids=cand, attention_mask=attention, cache=chunk_cache, position_ids=positions
        ).logits
        self.calls["candidate_forwards"] += count
        self.calls["chunks"] += 1
        return _summed(logits, last, cand, mask)

    def _packed_chunk(
        self, prefix: dict[str, Any], cache: Any, last: Any, rope_deltas: Any, ids: list[list[int]]
    ) -> list[float]:
        """Score a chunk of candidates packed into one row after the prefix: each candidate
        token attends to the whole prefix and to its own earlier tokens (a 4D mask), with the
        positions it would have alone. The prefix cache is read by every candidate, never
        repeated per candidate; afterwards it is cut back to the prefix for the next chunk."""
        import torch

        length = prefix["input_ids"].shape[1]
        sizes = torch.tensor([len(c) for c in ids], device=self.device)
        flat = torch.tensor([t for c in ids for t in c], device=self.device)
        owner = torch.repeat_interleave(torch.arange(len(ids), device=self.device), sizes)
        starts = torch.cumsum(sizes, 0) - sizes
        offset = torch.arange(flat.numel(), device=self.device) - starts[owner]
        own = (owner[:, None] == owner[None, :]) & (offset[:, None] >= offset[None, :])
        seen = prefix["attention_mask"][0].bool().expand(flat.numel(), -1)
        allowed = torch.cat([seen, own], 1)
        dtype = self.model.dtype
        mask = torch.zeros(allowed.shape, dtype=dtype, device=self.device)
        mask = mask.masked_fill(~allowed, torch.finfo(dtype).min)[None, None]
        positions = (length + offset)[None]
        if rope_deltas is not None:  # multimodal RoPE (Qwen-VL): 3 x batch x length
            positions = (positions + rope_deltas.to(self.device)).unsqueeze(0).expand(3, -1, -1)
        try:
            logits = self.model(
                input_ids=flat[None], attention_mask=mask, cache=cache, position_ids=positions
            ).logits[0]
        finally:
            _cut_back(cache, length)
        self.calls["candidate_forwards"] += len(ids)
        self.calls["chunks"] += 1
        logits = logits.float()
        follows = owner[1:] == owner[:-1]  # token i+1 continues the candidate of token i
        nxt = logits[:-1].gather(1, flat[1:, None]).squeeze(1) - torch.logsumexp(logits[:-1], -1)
        scores = last[flat[starts]].clone()
        scores.index_add_(0, owner[1:], torch.where(follows, nxt, torch.zeros_like(nxt)))
        return scores.tolist()


def _cut_back(cache: Any, length: int) -> None:
    """Drop what a chunk appended to the prefix cache, layer by layer (a chunk that failed part
    way appended to some layers only)."""
    for layer in getattr(cache, "layers", []):
        extra = layer.get_seq_length() - length
        if extra > 0:
            layer.crop(-extra)


class _NotSplittable(Exception):
    """The split attention cannot reproduce this layer's attention (e.g. a sliding window that
    cuts into the prefix); the chunk runs over a repeated cache instead."""


_SPLIT = "autocomp_split_prefix"
_PREFIX_CACHE: ContextVar[Any] = ContextVar("autocomp_prefix_cache", default=None)


@contextmanager
def _split_attention_over(model: Any, cache: Any) -> Iterator[None]:
    """While the block runs, the language model's attention layers use `_split_attention` over
    `cache` (the batch-1 prefix cache); their attention setting is restored afterwards."""
    from transformers import AttentionInterface

    if _SPLIT not in AttentionInterface._global_mapping:
        AttentionInterface.register(_SPLIT, _split_attention)
    config = model.config.get_text_config()
    before = config._attn_implementation
    token = _PREFIX_CACHE.set(cache)
    config._attn_implementation = _SPLIT
    try:
        yield
    finally:
        config._attn_implementation = before
        _PREFIX_CACHE.reset(token)


def _split_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """Attention of a batch of candidates over [one shared prefix ; each candidate's own causal
    tokens], without repeating the prefix K/V per candidate (cascade/Hydragen-style).

    query: batch x heads x S x d; key/value: the candidates' own, batch x kv_heads x S x d; the
    prefix K/V (1 x kv_heads x P x d) come from the cache set by `_split_attention_over`. Every
    candidate's queries are folded into one sequence per K/V head and attend to the prefix in
    one call; each candidate attends causally to its own tokens in a second; the two partial
    results are merged by their log-sum-exps, which equals attention over the concatenated
    keys up to float rounding."""
    import torch

    window = kwargs.get("sliding_window")
    layer = _PREFIX_CACHE.get().layers[module.layer_idx]
    prefix_key, prefix_value = layer.keys, layer.values
    if kwargs.get("softcap") is not None or (
        window and prefix_key.shape[2] + query.shape[2] > window
    ):
        raise _NotSplittable(module.layer_idx)
    batch, heads, size, dim = query.shape
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    scale = dim**-0.5 if scaling is None else scaling
    # prefix part: per K/V head, all (candidate, position, group) queries as one sequence
    folded = query.transpose(1, 2).reshape(batch, size, kv_heads, groups, dim)
    folded = folded.permute(2, 0, 1, 3, 4).reshape(1, kv_heads, -1, dim)
    shared, shared_lse = _attend(folded, prefix_key, prefix_value, False, scale)
    shared = shared.reshape(kv_heads, batch, size, groups, dim).permute(1, 2, 0, 3, 4)
    shared_lse = shared_lse.reshape(kv_heads, batch, size, groups).permute(1, 2, 0, 3)
    # own part: each candidate's causal attention to its own tokens (small: S x S)
    own, own_lse = _attend(
        query, key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1), True, scale
    )
    own = own.transpose(1, 2).reshape(batch, size, kv_heads, groups, dim)
    own_lse = own_lse.transpose(1, 2).reshape(batch, size, kv_heads, groups)
    # merged: each part weighted by its share of the whole softmax normaliser
    total = torch.logaddexp(shared_lse, own_lse)
    out = own.float() * torch.exp(own_lse - total)[..., None]
    out.addcmul_(shared.float(), torch.exp(shared_lse - total)[..., None])
    return out.to(query.dtype).reshape(batch, size, heads, dim), None


def _attend(query: Any, key: Any, value: Any, causal: bool, scale: float) -> tuple[Any, Any]:
    """Softmax attention (same number of heads) and its log-sum-exp per query (float32).

    On a CPU, torch's fused flash kernel, which returns both; elsewhere the product written out
    in float32 (a fused kernel with the log-sum-exp on CUDA is the next step; see
    docs/performance.md)."""
    import torch

    if query.device.type == "cpu" and _flash_cpu():
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            query, key, value, 0.0, causal, scale=scale
        )[:2]
        return out, lse.float()
    return _attend_math(query, key, value, causal, scale)


def _attend_math(query: Any, key: Any, value: Any, causal: bool, scale: float) -> tuple[Any, Any]:
    import torch

    scores = (query.float() * scale) @ key.float().transpose(-1, -2)
    if causal:
        size = scores.shape[-1]
        above = torch.ones(size, size, dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(above, float("-inf"))
    lse = torch.logsumexp(scores, -1)
    out = torch.exp(scores - lse[..., None]) @ value.float()
    return out.to(query.dtype), lse


@cache
def _flash_cpu() -> bool:
    import torch

    return hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu")


def _summed(logits: Any, last: Any, cand: Any, mask: Any) -> list[float]:
    """Each candidate's summed log-likelihood: its first token from the prefix's last
    log-probabilities `last`, the rest from the chunk's logits; padding masked out."""
    import torch

    logits = logits[:, :-1].float()  # each position predicts the next caption token
    rest = logits.gather(2, cand[:, 1:, None]).squeeze(-1) - torch.logsumexp(logits, -1)
    first = last[cand[:, :1]]
    return (torch.cat([first, rest], 1) * mask).sum(1).tolist()


def has_model_class(name: str) -> bool:
    """Whether transformers has the model class `name` (an ad-hoc model's architecture)."""
    import transformers

    try:
        return isinstance(getattr(transformers, name), type)
    except (AttributeError, ImportError, RuntimeError):
        return False
