"""Generative MLLM scoring with transformers: a caption's summed token log-likelihood.

For each image, the chat prompt (the image and an instruction in the user turn, then the
assistant turn opening) is the *prefix*; each candidate caption is the continuation. The score is
the sum of log p(token) over the caption's tokens (tokenised on their own, no special tokens).

Shared prefix (the default): the prefix runs once per image; its KV cache is copied and repeated
for a chunk of candidates, which then run only their own tokens; the first caption token is
scored from the prefix's last logits. With `packed = True` a chunk instead runs as one packed
row after the prefix, each candidate attending to the prefix's cache and to its own tokens only
(a 4D mask, positions as if alone): no copy of the cache per candidate, but attention over the
masked candidate x candidate block. Both give the naive path's scores; on a 2-core CPU the
repeated cache was faster at chunks of 16-32 and even at 64-128, so it stays the default until
`benchmarks/gpu.sh` measures both on a GPU. Chunks start at
`chunk_size` candidates and halve on out-of-memory until they fit. `naive=True` runs one full
forward per candidate: the reference the shared path is tested against. Blind requests (image
None) use the same prompt without the image (paper A.8).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from autocomp.devices import select_device, select_dtype
from autocomp.errors import weights_error
from autocomp.scoring import ScoreRequest
from autocomp.scoring.placement import load_options
from autocomp.scoring.registry import ModelEntry

DEFAULT_PROMPT = "Describe this image in one sentence."
BLIND_PROMPT = "Write one sentence describing a picture."


def _is_oom(exc: BaseException) -> bool:
    return "out of memory" in str(exc).lower()


class VlmScorer:
    """Scores captions by their log-likelihood under a vision-language model."""

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
            raise weights_error(f"weights of {entry.name}", source, exc) from exc
        self.model.eval()
        self.calls = {"prefix_forwards": 0, "candidate_forwards": 0, "chunks": 0}

    def _weights(self) -> Any:
        if self.entry.is_tiny:
            from autocomp.tiny.scoring import ensure_vlm

            return ensure_vlm(self.entry)
        return self.entry.weights

    # ------------------------------------------------------------------ inputs

    def _prefix_inputs(self, image: Any, prompt: str | None = None) -> dict[str, Any]:
        content: list[dict[str, str]] = []
        if image is not None:
            content.append({"type": "image"})
        default = self.prompt if image is not None else BLIND_PROMPT
        content.append({"type": "text", "text": prompt or default})
        messages = [{"role": "user", "content": content}]
        text = self.processor.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )
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
        ids = self.processor.tokenizer(texts, add_special_tokens=False).input_ids
        for text, caption in zip(texts, ids):
            if not caption:
                raise ValueError(f"caption {text!r} has no tokens")
        return ids

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """How many tokens each caption's score sums over (the same tokenisation `score`
        uses; no forward pass): the score stage divides by it for the per-token score. (The
        blind multiple-choice test needs no method of its own: autocomp.scoring.choice asks
        `score` for each option label as the reply to a prompt listing the options.)"""
        return [len(ids) for ids in self._caption_ids(list(texts))]

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
        out = self.model(**prefix, use_cache=True)
        self.calls["prefix_forwards"] += 1
        cache = out.cache if hasattr(out, "cache") else out.past_key_values
        last = torch.log_softmax(out.logits[0, -1].float(), -1)
        rope_deltas = getattr(getattr(self.model, "model", None), "rope_deltas", None)
        results: list[float] = []
        start = 0
        while start < len(ids):
            size = min(self.chunk_size, len(ids) - start)
            try:
                results += self._chunk(prefix, cache, last, rope_deltas, ids[start : start + size])
            except (torch.OutOfMemoryError, RuntimeError) as exc:
                if not _is_oom(exc) or self.chunk_size == 1:
                    raise
                self.chunk_size = max(1, self.chunk_size // 2)
                if self.device.startswith("cuda"):
                    torch.cuda.empty_cache()
                continue
            start += size
        return results

    def _chunk(
        self, prefix: dict[str, Any], cache: Any, last: Any, rope_deltas: Any, ids: list[list[int]]
    ) -> list[float]:
        if self.packed:
            return self._packed_chunk(prefix, cache, last, rope_deltas, ids)
        return self._repeated_chunk(prefix, cache, last, rope_deltas, ids)

    def _repeated_chunk(
        self, prefix: dict[str, Any], cache: Any, last: Any, rope_deltas: Any, ids: list[list[int]]
    ) -> list[float]:
        """Score a chunk of candidates as a batch, over a copy of the prefix cache repeated once
        per candidate."""
        import copy

        import torch

        count, width = len(ids), max(len(c) for c in ids)
        length = prefix["input_ids"].shape[1]
        cand = torch.zeros(count, width, dtype=torch.long, device=self.device)
        mask = torch.zeros(count, width, dtype=torch.long, device=self.device)
        for j, caption in enumerate(ids):
            cand[j, : len(caption)] = torch.tensor(caption, device=self.device)
            mask[j, : len(caption)] = 1
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
        logp = torch.log_softmax(logits.float(), -1)
        first = last[cand[:, :1]]
        rest = logp[:, :-1].gather(2, cand[:, 1:, None]).squeeze(-1)
        return (torch.cat([first, rest], 1) * mask).sum(1).tolist()

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


def has_model_class(name: str) -> bool:
    """Whether transformers has the model class `name` (an ad-hoc model's architecture)."""
    import transformers

    try:
        return isinstance(getattr(transformers, name), type)
    except (AttributeError, ImportError, RuntimeError):
        return False
