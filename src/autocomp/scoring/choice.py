"""The blind multiple-choice test of paper A.8: no image; one prompt lists the positive and the
negatives of a set (Swap, Confusion; at N=1 the sanity sets), a seeded subsample of 49 where
there are more (Confusion at N=3), shuffled, each with an ID; the model's answer is the option
whose ID it finds most likely as its reply.

The paper gives neither its prompt nor how it read Gemma-3-12b-it's answer. Here the answer is
read without generating: every option's ID "(k)" is scored as the assistant's whole reply
(summed log-likelihood of its tokens, the closing parenthesis included, so no ID is a prefix of
another); the option with the highest score is the model's choice. Nothing is left unparsed, and
the scores are recorded, so the choice can be audited. Chance is 1 / K.

The rule is position-neutral (docs/protocol.md, "Blind choice"):
- the IDs are the numbers 1..K written with one width ("(01)".."(50)"), so every reply has the
  same characters and, under a tokenizer that splits digits (Qwen2.5, Gemma 3, Llama/LLaVA, the
  tiny byte-level one), the same token count: a two-digit ID no longer pays for an extra token,
  which made "(1)".."(9)" win whenever the model is unsure;
- the IDs are given to the shown positions in a seeded random order, so a model's preference for
  one ID (every language model has some; the random-weight tiny ones always answer the same ID)
  lands on a random position, not always on the same one. With the IDs in display order, the
  tiny models answered one position on every question, and a model could never be right when
  the positive sat elsewhere; shuffled, the answer rate per position is flat within binomial
  noise (tests/scoring/test_choice_neutral.py).

Options and IDs are drawn per item and set from a generator seeded by (seed, sample id, set):
the same draw whatever the chunking, resume, device or Python version, a different one under
another seed. Pure Python: the score stage turns them into scorer requests and rows.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

RULE = "ids-equal-width-shuffled"  # recorded in run.json: runs of another rule never mix
PROMPT = (
    "Below are {count} captions, each after an ID in parentheses (the IDs are in no particular "
    "order). Exactly one of them describes a picture that you cannot see; the others describe "
    "other pictures.\n\n{options}\n\n"
    "Which caption describes the picture? Reply with its ID in parentheses and nothing else."
)


def ids(count: int) -> list[str]:
    """The IDs of `count` options, "(01)".."(50)": the numbers 1..count in one width."""
    width = len(str(count))
    return [f"({k:0{width}d})" for k in range(1, count + 1)]


def item_seed(seed: int, sample_id: str, set_name: str) -> int:
    """A generator seed for one item and set, stable across processes and Python versions."""
    digest = hashlib.sha256(f"{seed}\0{sample_id}\0{set_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def draw(
    negatives: Sequence[int], count: int, seed: int, sample_id: str, set_name: str
) -> tuple[list[int], list[str]]:
    """(candidate indices in the order shown, the ID shown with each): the positive (0) once
    and min(count, all) negatives drawn without replacement, shuffled; then the IDs in a
    shuffled order."""
    rng = random.Random(item_seed(seed, sample_id, set_name))
    drawn = _shuffled(negatives, rng)[:count]
    shown = _shuffled([0, *drawn], rng)
    return shown, _shuffled(ids(len(shown)), rng)


def draw_options(
    negatives: Sequence[int], count: int, seed: int, sample_id: str, set_name: str
) -> list[int]:
    """The candidate indices of `draw`, in the order shown."""
    return draw(negatives, count, seed, sample_id, set_name)[0]


def _shuffled(values: Sequence, rng: random.Random) -> list:
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


def prompt(captions: Sequence[str], shown_ids: Sequence[str]) -> str:
    """The question: every caption on its own line after its ID, in the order given."""
    if len(captions) != len(shown_ids):
        raise ValueError(f"{len(captions)} captions but {len(shown_ids)} IDs")
    lines = "\n".join(f"{i} {caption}" for i, caption in zip(shown_ids, captions))
    return PROMPT.format(count=len(captions), options=lines)
