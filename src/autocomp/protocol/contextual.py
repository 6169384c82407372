"""Contextual captions, the protocol around the LLM call (the call itself is a backend's job).

- `build_prompt`: the system message and the few-shot user message of the paper's A.2, per
  family, with the concept written as its Minimal spec ("a red cup and a green lamp").
- `normalize_reply`: the reply as one caption line (quotes, markdown and "Caption:" stripped),
  or a rejection when it is empty, several lines of text, or too long.
- `generate_contextual`: up to `max_attempts` (paper: 3) calls of a text generator, each reply
  normalised and checked with `binding.bind`; every attempt and its verdict is recorded. A concept
  that fails every attempt is dropped from both conditions (`pair_drop`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from autocomp.protocol.binding import BindingError, bind
from autocomp.protocol.family import Family
from autocomp.protocol.minimal import spec_text

MAX_ATTEMPTS = 3
MAX_CAPTION_CHARS = 400
Messages = list[dict[str, str]]
Generator = Callable[[Messages, int], str]  # (messages, attempt number) -> reply text

_WRAPPERS = re.compile(r'^(?:\*\*|__|["“”\'`])+|(?:\*\*|__|["“”\'`])+$')
_LABEL = re.compile(r"^\s*(?:contextual\s+)?caption\s*:\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Attempt:
    """One LLM reply and what the check said of it."""

    reply: str
    caption: str | None
    verdict: str  # "accepted" or a rejection reason code
    detail: str = ""


@dataclass
class ContextualResult:
    """The outcome for one concept: the accepted caption (or None: dropped) and all attempts."""

    caption: str | None
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return self.caption is not None


def build_prompt(family: Family, objects: Sequence[str], labels: Sequence[str]) -> Messages:
    """System and user messages for one concept (chat format, as the backends take them)."""
    spec = family.contextual
    examples = "\n\n".join(
        spec["example"].format(
            spec=spec_text(family, ex["objects"], ex["attributes"]), caption=ex["caption"]
        )
        for ex in spec["examples"]
    )
    user = spec["user"].format(examples=examples, spec=spec_text(family, objects, labels))
    return [
        {"role": "system", "content": " ".join(spec["system"].split())},
        {"role": "user", "content": user},
    ]


def normalize_reply(reply: str) -> tuple[str | None, str, str]:
    """(caption or None, verdict, detail) for a raw LLM reply."""
    lines = [line.strip() for line in reply.strip().splitlines() if line.strip()]
    if not lines:
        return None, "empty", "the reply is empty"
    if len(lines) > 1:
        return None, "multiline", f"the reply has {len(lines)} lines; one caption sentence expected"
    text = _LABEL.sub("", lines[0])
    text = _WRAPPERS.sub("", text).strip()
    if not text:
        return None, "empty", "the reply holds no caption text"
    if len(text) > MAX_CAPTION_CHARS:
        return None, "too_long", f"{len(text)} characters (limit {MAX_CAPTION_CHARS})"
    return text, "ok", ""


def check_caption(
    family: Family, objects: Sequence[str], labels: Sequence[str], reply: str
) -> Attempt:
    """Normalise a reply and run the semantic preservation check on it."""
    caption, verdict, detail = normalize_reply(reply)
    if caption is None:
        return Attempt(reply, None, verdict, detail)
    try:
        bind(family, objects, labels, caption)
    except BindingError as exc:
        return Attempt(reply, caption, exc.reason, str(exc))
    return Attempt(reply, caption, "accepted")


def generate_contextual(
    family: Family,
    objects: Sequence[str],
    labels: Sequence[str],
    generate: Generator,
    max_attempts: int = MAX_ATTEMPTS,
) -> ContextualResult:
    """Ask `generate` for a caption until one passes the check, at most `max_attempts` times."""
    messages = build_prompt(family, objects, labels)
    result = ContextualResult(caption=None)
    for attempt_number in range(1, max_attempts + 1):
        attempt = check_caption(family, objects, labels, generate(messages, attempt_number))
        result.attempts.append(attempt)
        if attempt.verdict == "accepted":
            result.caption = attempt.caption
            break
    return result


def pair_drop(concept_ids: Sequence[str], results: Sequence[ContextualResult]) -> list[str]:
    """The concept ids that stay in *both* conditions: those with an accepted Contextual caption.

    The paper's strict pairing: a concept whose Contextual caption failed every attempt loses its
    Minimal caption too, so every concept that reaches image generation has both.
    """
    if len(concept_ids) != len(results):
        raise ValueError(f"{len(concept_ids)} concept ids but {len(results)} results")
    return [cid for cid, res in zip(concept_ids, results) if res.accepted]
