"""How the contrastive scorer cuts captions (sorted by token length) into text batches: at
most `most` captions, and on a CPU at most `positions` positions (captions x the longest)."""

from __future__ import annotations

import random

from autocomp.scoring.contrastive import text_batches


def spans(lengths, most, positions):
    return [(r.start, r.stop) for r in text_batches(lengths, most, positions)]


def test_hand_checked_batches():
    assert spans([64] * 300, 256, None) == [(0, 256), (256, 300)]
    assert spans([64] * 300, 256, 8192) == [(0, 128), (128, 256), (256, 300)]
    # CLIP: short captions fill the count first, longer ones the position budget
    assert spans([10] * 5 + [40] * 5, 4, 100) == [(0, 4), (4, 6), (6, 8), (8, 10)]
    assert spans([5, 5, 200], 8, 100) == [(0, 2), (2, 3)]  # one caption alone may exceed it
    assert spans([], 8, 100) == []


def test_every_caption_once_in_order_within_both_bounds():
    rng = random.Random(0)
    for _ in range(500):
        lengths = sorted(rng.randint(1, 80) for _ in range(rng.randint(0, 400)))
        most, positions = rng.randint(1, 300), rng.choice([None, rng.randint(1, 9000)])
        cut = spans(lengths, most, positions)
        assert [i for a, b in cut for i in range(a, b)] == list(range(len(lengths)))
        for a, b in cut:
            assert 0 < b - a <= most
            if positions is not None and b - a > 1:
                assert (b - a) * lengths[b - 1] <= positions
                # and greedy: one more caption would break a bound
                if b < len(lengths) and b - a < most:
                    assert (b - a + 1) * lengths[b] > positions
