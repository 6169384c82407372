"""The blind multiple-choice test of paper A.8: no image; one prompt lists the positive and the
negatives of a set (Swap, Confusion; at N=1 the sanity sets), a seeded subsample of 49 where
there are more (Confusion at N=3), shuffled, numbered (1)..(K); the model's answer is the
option whose label it finds most likely as its reply.

The paper gives neither its prompt nor how it read Gemma-3-12b-it's answer. Here the answer is
read without generating: every label "(k)" is scored as the assistant's whole reply (summed
log-likelihood of its tokens, the closing parenthesis included, so "(1)" and "(12)" are complete,
comparable answers and no label is a prefix of another); the option with the highest score is
the model's choice. Nothing is left unparsed, and the scores are recorded, so the choice can be
audited. Chance is 1 / K.

Options are drawn per item and set from a generator seeded by (seed, sample id, set): the same
draw whatever the chunking, resume, device or Python version, a different one under another
seed. Pure Python: the score stage turns them into scorer requests and rows.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

PROMPT = (
    "Below are {count} captions. Exactly one of them describes a picture that you cannot see; "
    "the others describe other pictures.\n\n{options}\n\n"
    "Which caption describes the picture? Reply with its number in parentheses and nothing else."
)


def label(position: int) -> str:
    """The label of the option shown at `position` (0-based): "(1)", "(2)", ..."""
    return f"({position + 1})"


def item_seed(seed: int, sample_id: str, set_name: str) -> int:
    """A generator seed for one item and set, stable across processes and Python versions."""
    digest = hashlib.sha256(f"{seed}\0{sample_id}\0{set_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def draw_options(
    negatives: Sequence[int], count: int, seed: int, sample_id: str, set_name: str
) -> list[int]:
    """Candidate indices in the order shown: the positive (0) once and min(count, all)
    negatives drawn without replacement, shuffled."""
    rng = random.Random(item_seed(seed, sample_id, set_name))
    drawn = _shuffled(negatives, rng)[:count]
    return _shuffled([0, *drawn], rng)


def _shuffled(values: Sequence[int], rng: random.Random) -> list[int]:
    """Fisher-Yates on `rng.random()` alone: Python guarantees that sequence for a seed across
    versions (not `sample` or `shuffle`), so a recorded seed redraws the same options."""
    out = list(values)
    for i in range(len(out) - 1, 0, -1):
        j = int(rng.random() * (i + 1))
        out[i], out[j] = out[j], out[i]
    return out


def options_text(shown: Sequence[int]) -> str:
    """The predictions' record of the options shown: candidate indices in order, "4,0,9"."""
    return ",".join(str(c) for c in shown)


def read_options(text: str) -> list[int]:
    """The candidate indices a predictions row's `options` records, in the order shown."""
    return [int(c) for c in text.split(",")]


def prompt(captions: Sequence[str]) -> str:
    """The question: every caption on its own line after its label, in the order given."""
    lines = "\n".join(f"{label(i)} {caption}" for i, caption in enumerate(captions))
    return PROMPT.format(count=len(captions), options=lines)
