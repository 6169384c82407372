"""The A.8 blind choice answer is position-neutral: on the random-weight tiny models (which know
nothing, so every position should be answered equally often) the answer rate per shown position
is flat within binomial noise; the old rule (IDs "(1)".."(10)" in display order) is not, so the
check can fail. The IDs are of equal token length under each tiny model's tokenizer."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from autocomp.scoring import ScoreRequest, choice, load_scorer

pytestmark = pytest.mark.slow

MODELS = ("tiny-qwen2.5-vl", "tiny-llava")
OPTIONS = 10  # "(1)".."(10)": the smallest set where the old rule's IDs differ in length
QUESTIONS = 120
ALPHA = 1e-3  # the chance that a neutral rule fails this test, over all its positions


def _flat_bounds(questions: int, positions: int, alpha: float = ALPHA) -> tuple[int, int]:
    """The counts a position may get when every position is equally likely: the central
    1 - alpha / positions range of Binomial(questions, 1 / positions) (Bonferroni over the
    positions: all of them stay inside with probability at least 1 - alpha)."""
    from scipy.stats import binom

    p, tail = 1 / positions, alpha / positions / 2
    return int(binom.ppf(tail, questions, p)), int(binom.isf(tail, questions, p))


def _captions(rng: random.Random, count: int) -> list[str]:
    colors = [
        "red",
        "blue",
        "green",
        "yellow",
        "orange",
        "purple",
        "pink",
        "brown",
        "black",
        "gray",
    ]
    objects = ["cup", "chair", "lamp", "vase", "bowl", "pen", "book", "hat", "bottle", "desk"]
    out = []
    for _ in range(count):
        (a, b), (c, d) = rng.sample(objects, 2), rng.sample(colors, 2)
        out.append(f"A {c} {a} and a {d} {b} on a white background.")
    return out


def _answered_positions(scorer, rule: str) -> Counter:
    """Per shown position (0-based), how often it holds the answer: the option whose ID scores
    highest as the reply, under the current rule or the old one."""
    rng = random.Random(0)
    counts: Counter = Counter()
    for q in range(QUESTIONS):
        shown, ids = choice.draw(list(range(1, OPTIONS)), OPTIONS - 1, 0, f"q{q}", "confusion")
        if rule == "old":
            ids = [f"({k + 1})" for k in range(len(shown))]
        captions = _captions(rng, len(shown))
        text = choice.prompt(captions, ids)
        scores = scorer.score([ScoreRequest(None, i, text) for i in ids], {})
        counts[max(range(len(ids)), key=scores.__getitem__)] += 1
    return counts


@pytest.mark.parametrize("model", MODELS)
def test_answer_rates_per_position_are_flat_within_binomial_noise(model):
    scorer = load_scorer(model, device="cpu")
    assert len(set(scorer.token_counts(choice.ids(OPTIONS)))) == 1  # equal token length
    assert len(set(scorer.token_counts(choice.ids(50)))) == 1
    low, high = _flat_bounds(QUESTIONS, OPTIONS)
    assert (low, high) == (2, 26)  # the tolerance: 12 expected per position
    counts = _answered_positions(scorer, "current")
    per_position = [counts[k] for k in range(OPTIONS)]
    assert all(low <= c <= high for c in per_position), per_position
    old = _answered_positions(scorer, "old")  # IDs in display order, one and two digits
    assert max(old.values()) > high, sorted(old.items())  # the check can fail


def test_a_run_of_the_old_rule_is_not_resumed_with_the_new_one(tmp_path):
    from autocomp.config import NegativesConfig, ScoreConfig
    from autocomp.errors import UsageError
    from autocomp.protocol.stages import negatives_stage, sample_stage
    from autocomp.scoring.registry import get_model
    from autocomp.scoring.stage import score_stage

    sample_stage("color", 2, 2, 0, tmp_path / "c.parquet")
    negatives_stage(tmp_path / "c.parquet", tmp_path / "b.parquet", NegativesConfig(workers=1))
    config = ScoreConfig(blind="choice", device="cpu", choice_negatives=3)
    entry = get_model(MODELS[0])
    score_stage(entry, tmp_path / "b.parquet", tmp_path / "run", config)
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    del record["choice"]["rule"]  # what a run before the position-neutral rule recorded
    (tmp_path / "run" / "run.json").write_text(json.dumps(record))
    with pytest.raises(UsageError, match="another model, benchmark or mode"):
        score_stage(entry, tmp_path / "b.parquet", tmp_path / "run", config)
