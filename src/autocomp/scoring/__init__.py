"""Scoring: one batched interface over model backends (autocomp.scoring.backends: what each is
and can do), and `score`, the one entry that scores models on a benchmark (scoring/stage.py).

A scorer takes a list of requests (an image key, or None for a blind request, and a caption) and
the images they name, and returns one score per request, in order. Higher means the model finds
the caption more likely for the image. Backends import their heavy libraries themselves. What a
backend must implement is `Scorer`; tests/scoring/test_scorer_contract.py holds every backend (its
tiny variants) to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from autocomp.errors import UsageError

if TYPE_CHECKING:
    from autocomp.scoring.registry import ModelEntry
    from autocomp.scoring.stage import score

__all__ = ["ScoreRequest", "Scorer", "load_scorer", "score"]


@dataclass(frozen=True)
class ScoreRequest:
    """Score `text` for the image stored under `image_key` (None: without an image).

    `prompt` replaces the model's instruction for this request (generative backends: VQA asks a
    question and scores each answer option as the continuation); contrastive backends ignore it.
    """

    image_key: str | None
    text: str
    prompt: str | None = None


@runtime_checkable
class Scorer(Protocol):
    """What every backend implements (and all the score stage asks of one)."""

    calls: dict[str, int]  # work done so far, by kind (encodes, forwards...): tests and benchmarks

    def score(self, requests: Sequence[ScoreRequest], images: Mapping[str, Any]) -> list[float]:
        """One score per request, in order. A backend that cannot score without an image
        raises ValueError on a blind request (the stage refuses blind mode for it first)."""
        ...

    def truncated(self, texts: Sequence[str]) -> list[bool]:
        """Per caption: whether the model's text context cut it before scoring (the stage
        counts these in `truncated`); all False for a backend that scores captions whole."""
        ...

    def token_counts(self, texts: Sequence[str]) -> list[int] | None:
        """Per caption: how many tokens its score sums over (the per-token score divides by
        it), without a forward pass; None when the score is not a sum over tokens."""
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
    from autocomp.scoring.hub import check_reachable
    from autocomp.scoring.registry import ModelEntry, get_model

    entry = model if isinstance(model, ModelEntry) else get_model(model)
    check_reachable(entry)  # an unreachable hub: one line in seconds, not minutes of retries
    backend = entry.kind
    if batch_size is not None:
        options[backend.batch_option] = batch_size
    engine = options.pop("engine", None) or entry.engine  # an override, else the entry's own
    return backend.scorer_class(engine)(entry, device=device, **options)


class LoadFailed(UsageError):
    """A model that could not be loaded: `score` scores the others, then reports this."""


def load_or_fail(
    load: Callable[..., Scorer],
    entry: ModelEntry,
    device: str | None = None,
    batch_size: int | None = None,
) -> Scorer:
    """`load(entry, device, batch_size)` (load_scorer), any failure to load (missing, cut or
    foreign weights: a SafetensorError, an UnpicklingError, a KeyError in its config) turned
    into a LoadFailed naming the model."""
    from autocomp.errors import WITHOUT_PROFILE, weights_error

    try:
        return load(entry, device, batch_size)
    except Exception as exc:
        error = (
            exc
            if isinstance(exc, UsageError)
            else weights_error("models", entry.name, exc, WITHOUT_PROFILE)
        )
        raise LoadFailed(error.what, error.value, error.fix) from exc


def __getattr__(name: str) -> Any:
    """`score` is imported on first use (the stage reads tables: pyarrow, the catalog)."""
    if name == "score":
        from autocomp.scoring.stage import score

        globals()["score"] = score
        return score
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
