"""Scorers: one batched interface over model backends (see autocomp.scoring.registry.BACKENDS).

A scorer takes a list of requests (an image key, or None for a blind request, and a caption) and
the images they name, and returns one score per request, in order. Higher means the model finds
the caption more likely for the image. Backends import their heavy libraries themselves.
Generative scorers also have `token_counts(texts)`: the tokens each score sums over (the score
stage's per-token score).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from autocomp.scoring.registry import ModelEntry


@dataclass(frozen=True)
class ScoreRequest:
    """Score `text` for the image stored under `image_key` (None: without an image).

    `prompt` replaces the model's instruction for this request (generative backends: VQA asks a
    question and scores each answer option as the continuation); contrastive backends ignore it.
    """

    image_key: str | None
    text: str
    prompt: str | None = None


class Scorer(Protocol):
    """What every backend implements."""

    calls: dict[str, int]

    def score(self, requests: Sequence[ScoreRequest], images: Mapping[str, Any]) -> list[float]:
        """One score per request, in order."""
        ...


def load_scorer(
    model: str | ModelEntry,
    device: str | None = None,
    batch_size: int | None = None,
    **options: Any,
) -> Scorer:
    """The scorer of a model (a registered name, or an entry such as an ad-hoc one from
    autocomp.scoring.specs), weights loaded through the backend's own loader; `batch_size`:
    candidate texts per forward pass (None: the backend's default)."""
    from autocomp.scoring.registry import BATCH_OPTION, ModelEntry, backend_class, get_model

    entry = model if isinstance(model, ModelEntry) else get_model(model)
    if batch_size is not None:
        options[BATCH_OPTION[entry.backend]] = batch_size
    return backend_class(entry)(entry, device=device, **options)
