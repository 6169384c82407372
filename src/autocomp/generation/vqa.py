"""VQA judge: answers a concept's questions by option likelihood, never by free text.

Each question becomes the instruction of the VLM's chat prompt with the image; every answer
option is scored as the assistant's reply (summed token log-likelihood, the same shared-prefix
scorer that evaluates generative models: the image and question run once, the options reuse its
KV cache). The best option is the answer (checks.answer_verdict). On the cluster, vLLM's
guided decoding with a choice list gives the same constrained answer; here the likelihood route
is exact and needs no extra engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autocomp.generation.checks import Question
from autocomp.scoring import Scorer, ScoreRequest


class VqaJudge:
    """Constrained answers from a registered transformers VLM (`autocomp models`)."""

    def __init__(self, name: str, device: str | None = None, scorer: Scorer | None = None) -> None:
        from autocomp.scoring import load_scorer
        from autocomp.scoring.registry import get_model

        self.entry = get_model(name)
        if not self.entry.kind.prompts:  # each question is its requests' prompt
            from autocomp.errors import UsageError

            raise UsageError("vqa", name, "must be a generative VLM (backend transformers_vlm)")
        self.scorer = scorer or load_scorer(name, device=device)

    def option_scores(self, asked: Sequence[tuple[str, Any, Question]]) -> list[list[float]]:
        """Per (image key, image, question): one score per option, in option order."""
        requests: list[ScoreRequest] = []
        images: dict[str, Any] = {}
        spans: list[tuple[int, int]] = []
        for key, image, question in asked:
            images[key] = image
            start = len(requests)
            requests += [ScoreRequest(key, option, question.text) for option in question.options]
            spans.append((start, len(requests)))
        flat = self.scorer.score(requests, images) if requests else []
        return [flat[a:b] for a, b in spans]
