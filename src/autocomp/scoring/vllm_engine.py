"""Generative MLLM scoring with vLLM: a caption's summed token log-likelihood from
`prompt_logprobs`, equal to the transformers shared-prefix path (scoring/generative.py).

The prefix (chat text with the image placeholder, tokenised as the model's processor tokenises
it) and each caption (tokenised on its own: the same boundary as the transformers path) are sent
as token ids with the image; vLLM expands the placeholder, and every output's prompt ids are
checked against the processor's own expanded prefix followed by the caption, so both engines
score the same tokens. A caption's score is the sum of the prompt log-probs of its tokens.

The prefix cache, exactly (the vLLM release the `vllm` environment pins, 0.32.0; file:line in
docs/backends.md). A request that asks for prompt log-probs skips *reading* the prefix cache by
default (SamplingParams.skip_reading_prefix_cache defaults to True when prompt_logprobs is set;
KVCacheManager.get_computed_blocks then returns no hit), so every candidate would recompute the
whole image+prompt prefix. We set skip_reading_prefix_cache=False, which is exact only where
the cache hit stops before the caption: the model runner computes prompt log-prob rows from
`num_computed_tokens` (the cache hit) on, and the rows before it are left unwritten
(`LogprobsTensors.empty_cpu`), i.e. stale. Hits are whole blocks (`block_size` tokens). So:

1. each prefix runs once first (a warm request, one token generated), which caches its whole
   blocks; if the prefix length P is a multiple of the block size its last row (the
   log-probabilities of the first caption token) would then be cached, so the warm request
   returns the full next-token distribution and that token's log-prob is taken from it;
2. the candidates run with the cache read; each output's `num_cached_tokens` C (the hit the
   scheduler recorded at its first scheduling) is checked: the rows a caption needs start at
   P - 1 (at P when P is a block multiple). Two captions that share their first tokens can
   share a whole block past the prefix, so a candidate's hit can reach into its caption (with
   a Color item's captions, which share their first words, most of them do once the prefix's
   tail and their first words fill a block). Its missing rows (positions P .. C) depend only
   on its first C tokens, so they are taken from a **boundary request** of exactly those C
   tokens (prefix + caption head, whole blocks; one per distinct head, reading the cache):
   its own rows give positions past its own hit, and its next-token distribution gives the
   row at C; where the boundary's own hit reaches into the caption too, the same again on
   its head (recursively, each level shorter by a block). A candidate is rescored with
   skip_reading_prefix_cache=True (a full recompute) only where vLLM reports no hit count.

The cache is emptied at the start of each `score` call (a caption scored before would be found
whole in it), and every row read is checked to hold the caption's own token.

`naive=True` disables the prefix cache (every candidate recomputes its prefix: the cost the
issue measured, about P / caption-length times the work). `max_model_len` (the entry's, else
DEFAULT_MAX_MODEL_LEN) bounds prefix + caption; a longer one is refused before anything is
scored, never truncated. Tensor parallelism is the entry's `gpus`. Without torchvision (the
caption image's CPU variant) a multimodal model is refused in one line before vLLM starts.

Over 450 lines because the engine's exactness is one argument read top to bottom: the cache
rules above, the boundary requests that complete a collided candidate, and the check on every
row read, beside the start-up faults that each end in one line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

from autocomp.errors import UsageError
from autocomp.scoring import Scorer, ScoreRequest
from autocomp.scoring.generative import BLIND_PROMPT, DEFAULT_PROMPT, caption_ids, chat_text
from autocomp.scoring.registry import ModelEntry

DEFAULT_MAX_MODEL_LEN = 4096  # prefix + caption tokens; an entry's `max_model_len` overrides it
# The prefix cache's block (tokens), on every platform (vLLM's GPU default is 16): a candidate
# recomputes the prefix's tail past its last whole block (B / 2 tokens on average); smaller
# blocks make more candidates' hits reach into their captions (each distinct head: a boundary).
DEFAULT_BLOCK_SIZE = 128
CPU_KV_CACHE_BYTES = 1 << 30  # the KV cache on a CPU platform (vLLM's default there is a share
# of the whole machine's memory)
ENGINE_HINT = (
    "the vllm engine needs vLLM, which pins its own torch: run in the `vllm` environment "
    "(`make vllm-env`) or the caption image, or score with `engine: transformers`"
)
# The caption image's CPU variant has no torchvision (images/imagetool.py PRUNE): there the engine
# scores text-only models (docs/backends.md, Engines)
NO_TORCHVISION = (
    "cannot score the multimodal model {model} here: this environment has no torchvision, which "
    "vLLM's multimodal models and their processors import (the caption image's CPU variant "
    "leaves it out); score it on a GPU score class (the caption image), in the `vllm` "
    "environment (`make vllm-env`), or with `engine: transformers`"
)


@dataclass
class _Group:
    """One (image, prompt): its prefix (unexpanded ids sent to vLLM, expanded length P) and its
    distinct captions."""

    image: Any
    sent: list[int]  # the prefix ids sent (the image placeholder unexpanded)
    expanded: list[int]  # the prefix ids after the processor's expansion (what is scored after)
    captions: list[list[int]]  # the distinct captions' ids
    by_text: dict[str, tuple[int, ...]]  # each caption text's ids
    first: dict[int, float] | None = None  # first caption token -> log-prob (P a block multiple)


@dataclass
class _Span:
    """A request of a prefix + caption `head` (a boundary or a candidate): the log-probs of the
    tokens it computed itself (position -> log-prob, after its hit of `cached` tokens) and, for
    a boundary, those of the next tokens its continuations need (`after`)."""

    head: tuple[int, ...]
    rows: dict[int, float]
    cached: int
    after: dict[int, float]


class VllmScorer(Scorer):
    """Scores captions by their log-likelihood under a vision-language model served by vLLM."""

    def __init__(
        self,
        entry: ModelEntry,
        device: str | None = None,
        chunk_size: int = 256,
        naive: bool = False,
        max_model_len: int | None = None,
        kv_cache_bytes: int | None = None,
        block_size: int | None = None,
        **_: Any,
    ) -> None:
        # the engine core runs in this process: no spawned engine process (which would need a
        # __main__ guard in every caller); vLLM reads this when the engine is built
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        try:
            import vllm
            from vllm.platforms import current_platform
        except ImportError as exc:
            raise UsageError("engine", "vllm", f"is not installed here; {ENGINE_HINT}") from exc
        import transformers

        self.entry = entry
        self.device = device or ("cpu" if current_platform.is_cpu() else "cuda")
        self.chunk_size = chunk_size
        self.naive = naive
        self.prompt = entry.prompt or DEFAULT_PROMPT
        self.max_model_len = int(max_model_len or entry.value("max_model_len") or
                                 DEFAULT_MAX_MODEL_LEN)  # fmt: skip
        revision = None if entry.is_tiny else entry.revision
        try:
            source = str(self._weights())
            self.processor = transformers.AutoProcessor.from_pretrained(
                source, trust_remote_code=entry.trust_remote_code, revision=revision
            )
        except ImportError as exc:  # transformers: "requires ... Torchvision", "Could not import"
            if find_spec("torchvision"):
                raise
            raise UsageError("engine", "vllm", NO_TORCHVISION.format(model=entry.name)) from exc
        # a text-only model's processor is its tokenizer
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        if hasattr(self.processor, "image_processor") and not find_spec("torchvision"):
            # vLLM's multimodal model modules import torchvision (vllm 0.32.0
            # model_executor/models/llava.py:61 -> pixtral.py:19 -> transformers' pixtral image
            # processor); without it the engine fails to "inspect" the architecture
            raise UsageError("engine", "vllm", NO_TORCHVISION.format(model=entry.name))
        options: dict[str, Any] = {}
        if current_platform.is_cpu():
            options["kv_cache_memory_bytes"] = kv_cache_bytes or CPU_KV_CACHE_BYTES
            options["enforce_eager"] = True  # no graph compile: it costs ~85 s at start here
        elif kv_cache_bytes:
            options["kv_cache_memory_bytes"] = kv_cache_bytes
        options["block_size"] = block_size or DEFAULT_BLOCK_SIZE
        try:
            self.llm = vllm.LLM(
                model=source,
                revision=revision,
                trust_remote_code=entry.trust_remote_code,
                dtype=entry.dtype,
                tensor_parallel_size=max(1, entry.gpus),
                max_model_len=self.max_model_len,
                enable_prefix_caching=not naive,
                limit_mm_per_prompt={"image": 1},
                max_logprobs=-1,  # a warm request may return the whole next-token distribution
                seed=0,
                **options,
            )
        except (RuntimeError, ValueError) as exc:  # memory, kernels: say which setting
            message = " ".join(str(exc).split())[:300]
            raise UsageError(
                f"vllm engine of {entry.name}",
                type(exc).__name__,
                f"cannot start ({message}); change what it names: the KV cache "
                "(kv_cache_bytes), the entry's `max_model_len`, or its `gpus`",
            ) from exc
        self.block_size = int(self.llm.llm_engine.vllm_config.cache_config.block_size)
        self.calls = {"prefix_forwards": 0, "candidate_forwards": 0, "boundaries": 0,
                      "rescored": 0, "chunks": 0}  # fmt: skip

    def _weights(self) -> Any:
        if self.entry.is_tiny:
            from autocomp.tiny.scoring import ensure_vlm

            return ensure_vlm(self.entry)
        return self.entry.weights

    # ------------------------------------------------------------------ the Scorer protocol

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """How many tokens each caption's score sums over (no forward pass)."""
        return [len(ids) for ids in caption_ids(self.tokenizer, list(texts))]

    def truncated(self, texts: Sequence[str]) -> list[bool]:
        """All False: a caption is scored whole or refused (longer than max_model_len)."""
        return [False] * len(texts)

    def score(self, requests: Sequence[ScoreRequest], images: Mapping[str, Any]) -> list[float]:
        """Summed caption log-likelihood per request; one prefix per distinct (image, prompt)."""
        keys: dict[tuple[str | None, str | None], list[int]] = {}
        for i, r in enumerate(requests):
            keys.setdefault((r.image_key, r.prompt), []).append(i)
        groups: list[_Group] = []
        for (key, prompt), positions in keys.items():
            image = None if key is None else images[key]
            texts = list(dict.fromkeys(requests[i].text for i in positions))
            groups.append(self._group(image, prompt, texts))
        self._check_lengths(groups, keys)
        found = self._naive(groups) if self.naive else self._cached(groups)
        scores = [0.0] * len(requests)
        for positions, group in zip(keys.values(), groups):
            for i in positions:
                scores[i] = found[id(group)][group.by_text[requests[i].text]]
        return scores

    # ------------------------------------------------------------------ inputs

    def _group(self, image: Any, prompt: str | None, texts: list[str]) -> _Group:
        default = self.prompt if image is not None else BLIND_PROMPT
        text = chat_text(self.processor, image is not None, prompt or default)
        kwargs: dict[str, Any] = {"text": [text]}
        if image is not None:
            kwargs["images"] = [image]
        expanded = [int(t) for t in self.processor(**kwargs)["input_ids"][0]]
        # the ids as the processor's tokenizer makes them (its special-token defaults), before
        # the processor expands the image placeholder: vLLM expands them itself
        sent = [int(t) for t in self.tokenizer(text)["input_ids"]]
        ids = [tuple(c) for c in caption_ids(self.tokenizer, texts)]
        by_text = dict(zip(texts, ids))
        return _Group(image, sent, expanded, [list(c) for c in dict.fromkeys(ids)], by_text)

    def _check_lengths(self, groups: list[_Group], keys: Mapping[Any, Any]) -> None:
        """Refuse, before anything is scored, a prefix + caption longer than max_model_len."""
        for (key, _), group in zip(keys, groups):
            longest = max(group.captions, key=len)
            total = len(group.expanded) + len(longest)
            if total > self.max_model_len:
                text = self.tokenizer.decode(longest)
                raise UsageError(
                    f"caption of image {key}",
                    text[:80],
                    f"is {total} tokens with its prompt, more than the vllm engine's "
                    f"max_model_len {self.max_model_len}; raise `max_model_len` in the "
                    f"registry entry of {self.entry.name}",
                )

    def _prompt(self, ids: list[int], image: Any) -> dict[str, Any]:
        prompt: dict[str, Any] = {"prompt_token_ids": ids}
        if image is not None:
            prompt["multi_modal_data"] = {"image": image}
        return prompt

    # ------------------------------------------------------------------ scoring

    def _params(self, read_cache: bool, **extra: Any) -> Any:
        from vllm import SamplingParams

        return SamplingParams(
            max_tokens=1, temperature=0.0, detokenize=False, prompt_logprobs=0,
            skip_reading_prefix_cache=not read_cache, **extra,
        )  # fmt: skip

    def _generate(self, prompts: list[dict[str, Any]], params: Any) -> list[Any]:
        outputs: list[Any] = []
        for start in range(0, len(prompts), max(1, self.chunk_size)):
            chunk = prompts[start : start + max(1, self.chunk_size)]
            outputs += self.llm.generate(chunk, params, use_tqdm=False)
            self.calls["chunks"] += 1
        return outputs

    def _naive(self, groups: list[_Group]) -> dict[int, dict[tuple[int, ...], float]]:
        """Every candidate a full forward (prefix caching off)."""
        jobs = [(g, c) for g in groups for c in g.captions]
        outputs = self._generate(
            [self._prompt(g.sent + c, g.image) for g, c in jobs], self._params(False)
        )
        self.calls["candidate_forwards"] += len(jobs)
        found: dict[int, dict[tuple[int, ...], float]] = {id(g): {} for g in groups}
        for (g, c), out in zip(jobs, outputs):
            found[id(g)][tuple(c)] = self._summed(g, c, out, len(g.expanded) - 1)
        return found

    def _cached(self, groups: list[_Group]) -> dict[int, dict[tuple[int, ...], float]]:
        """Warm each prefix, score the candidates reading the cache (from an empty one: each
        call alike), complete those whose hit reached their caption (the module doc)."""
        self.llm.reset_prefix_cache()
        self._warm(groups)
        jobs = [(g, c) for g in groups for c in g.captions]
        outputs = self._generate(
            [self._prompt(g.sent + c, g.image) for g, c in jobs], self._params(True)
        )
        self.calls["candidate_forwards"] += len(jobs)
        found: dict[int, dict[tuple[int, ...], float]] = {id(g): {} for g in groups}
        again: list[tuple[_Group, list[int]]] = []
        late: list[tuple[_Group, _Span]] = []
        for (g, c), out in zip(jobs, outputs):
            start = self._first_row(g)
            if out.num_cached_tokens is None:
                again.append((g, c))
            elif out.num_cached_tokens > start:  # the hit reaches into the caption
                late.append((g, self._span(g, tuple(c), out, set())))
            else:
                found[id(g)][tuple(c)] = self._summed(g, c, out, start)
        if late:
            spans = self._boundaries(late)
            for g, span in late:
                found[id(g)][span.head] = float(sum(self._head_rows(g, span, spans)))
        if again:
            outputs = self._generate(
                [self._prompt(g.sent + c, g.image) for g, c in again], self._params(False)
            )
            self.calls["rescored"] += len(again)
            for (g, c), out in zip(again, outputs):
                if out.num_cached_tokens:
                    raise RuntimeError(f"vLLM read {out.num_cached_tokens} cached tokens "
                                       "for a request told to skip the prefix cache")  # fmt: skip
                found[id(g)][tuple(c)] = self._summed(g, c, out, len(g.expanded) - 1)
        return found

    def _span(self, group: _Group, head: tuple[int, ...], out: Any, after: set[int]) -> _Span:
        """The rows a request of prefix + `head` computed itself (those after its cache hit and
        in the caption), and the log-probs of the `after` tokens at its end."""
        self._check_prompt(group, list(head), out)
        length = len(group.expanded)
        cached = int(out.num_cached_tokens or 0)
        rows = {
            p: self._row(out, p, head[p - length])
            for p in range(max(cached + 1, length), length + len(head))
        }
        dist = out.outputs[0].logprobs[0] if after else {}
        missing = [t for t in after if t not in dist]
        if missing:
            raise RuntimeError(f"vLLM returned no log-prob for tokens {missing} after a "
                               "boundary request")  # fmt: skip
        return _Span(head, rows, cached, {t: dist[t].logprob for t in after})

    def _boundaries(self, late: list[tuple[_Group, _Span]]) -> dict[tuple[int, tuple], _Span]:
        """Run a boundary request for each distinct head of whole blocks a late candidate's
        hit covered (and, level by level, for those a boundary's own hit covers), each with
        the next tokens its continuations need; keyed by (group, head)."""
        from vllm import SamplingParams

        params = SamplingParams(
            max_tokens=1, temperature=0.0, detokenize=False, prompt_logprobs=0, logprobs=-1,
            skip_reading_prefix_cache=False,
        )  # fmt: skip
        spans: dict[tuple[int, tuple], _Span] = {}
        groups = {id(g): g for g, _ in late}
        wanted = self._wanted({}, [(g, s) for g, s in late])
        while wanted:
            keys = list(wanted)
            prompts = [self._prompt(groups[k[0]].sent + list(k[1]), groups[k[0]].image)
                       for k in keys]  # fmt: skip
            outputs = self._generate(prompts, params)
            self.calls["boundaries"] += len(keys)
            made = []
            for key, out in zip(keys, outputs):
                spans[key] = self._span(groups[key[0]], key[1], out, wanted[key])
                made.append((groups[key[0]], spans[key]))
            wanted = self._wanted(spans, made)
        return spans

    def _wanted(
        self, spans: Mapping[tuple[int, tuple], _Span], made: list[tuple[_Group, _Span]]
    ) -> dict[tuple[int, tuple], set[int]]:
        """The boundary requests `made` spans need (not run yet, or run without asking for
        this next token): for a span whose hit C reaches past the prefix, its first C - P
        caption tokens, with the token at C."""
        wanted: dict[tuple[int, tuple], set[int]] = {}
        for g, span in made:
            cut = span.cached - len(g.expanded)
            if cut <= 0:  # the hit stops in the prefix (or at its end: the warm request)
                continue
            key, token = (id(g), span.head[:cut]), span.head[cut]
            if key in spans and token in spans[key].after:
                continue
            known = spans[key].after if key in spans else {}  # run again, asking for more
            wanted.setdefault(key, set(known)).add(token)
        return wanted

    def _head_rows(
        self, group: _Group, span: _Span, spans: Mapping[tuple[int, tuple], _Span]
    ) -> list[float]:
        """The log-probs of every caption token of `span` (positions P on): those before its
        hit from the boundary of its first C - P tokens, the one at C from that boundary's
        next-token log-probs (the warm request's where C = P), the rest its own."""
        length = len(group.expanded)
        cut = span.cached - length
        if cut < 0 or (cut == 0 and group.first is None):
            return [span.rows[p] for p in range(length, length + len(span.head))]
        if cut == 0:
            before, at = [], group.first[span.head[0]]  # type: ignore[index]
        else:
            parent = spans[(id(group), span.head[:cut])]
            before, at = self._head_rows(group, parent, spans), parent.after[span.head[cut]]
        rest = range(span.cached + 1, length + len(span.head))
        return before + [at] + [span.rows[p] for p in rest]

    def _first_row(self, group: _Group) -> int:
        """The first prompt log-prob row a candidate must compute itself: P - 1 (the row that
        scores the first caption token), or P where the warm request gave that token's log-prob
        (P a multiple of the block size: the prefix's blocks are then all cached)."""
        length = len(group.expanded)
        return length if group.first is not None else length - 1

    def _warm(self, groups: list[_Group]) -> None:
        """Run each prefix once (one token generated), caching its whole blocks; where the
        prefix fills its blocks exactly, keep the full next-token distribution at its end."""
        from vllm import SamplingParams

        exact = [g for g in groups if len(g.expanded) % self.block_size == 0]
        rest = [g for g in groups if len(g.expanded) % self.block_size]
        for chosen, logprobs in ((exact, -1), (rest, None)):
            if not chosen:
                continue
            params = SamplingParams(max_tokens=1, temperature=0.0, detokenize=False,
                                    logprobs=logprobs)  # fmt: skip
            outputs = self._generate([self._prompt(g.sent, g.image) for g in chosen], params)
            self.calls["prefix_forwards"] += len(chosen)
            for g, out in zip(chosen, outputs):
                self._check_prompt(g, [], out)
                if logprobs is not None:
                    dist = out.outputs[0].logprobs[0]
                    g.first = {t: dist[t].logprob for t in {c[0] for c in g.captions}}

    def _check_prompt(self, group: _Group, caption: list[int], out: Any) -> None:
        """The ids vLLM scored must be the processor's expanded prefix and the caption."""
        if list(out.prompt_token_ids) != group.expanded + caption:
            raise RuntimeError(
                "vLLM expanded the prompt differently from the model's processor "
                f"({len(out.prompt_token_ids)} ids, the processor's {len(group.expanded)} + "
                f"{len(caption)}): the two engines would not score the same tokens"
            )

    def _summed(self, group: _Group, caption: list[int], out: Any, start: int) -> float:
        """The caption's summed log-prob from the output's prompt log-probs (the entry of
        position t holds log p(token t | tokens before t)); the first token from the warm
        request where `start` is P."""
        self._check_prompt(group, caption, out)
        length = len(group.expanded)
        total = 0.0
        for offset, token in enumerate(caption):
            position = length + offset
            if position - 1 < start:  # only the first token, when the warm request holds it
                assert group.first is not None
                total += group.first[token]
                continue
            total += self._row(out, position, token)
        return float(total)

    def _row(self, out: Any, position: int, token: int) -> float:
        """log p(token at `position` | the tokens before) from the output's prompt log-probs.
        vLLM's V1 model runner returns an entry for every position (those of cached positions
        unwritten); the V2 runner (vLLM's default on a GPU from 0.33) returns the computed ones
        only, after the cached span: the list's length says which."""
        rows = out.prompt_logprobs
        shift = len(out.prompt_token_ids) - len(rows)
        if shift not in (0, out.num_cached_tokens or 0):
            raise RuntimeError(f"vLLM returned {len(rows)} prompt log-prob entries for "
                               f"{len(out.prompt_token_ids)} prompt tokens")  # fmt: skip
        row = rows[position - shift]
        if not row or token not in row:
            raise RuntimeError(f"vLLM returned no prompt log-prob for token {token} at "
                               f"position {position}")  # fmt: skip
        return float(row[token].logprob)
