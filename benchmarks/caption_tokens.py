"""Caption tokenization once per pod (generative scorers): the candidates of a family:N recur in
every item, so a scorer that keeps each caption's token ids (VlmScorer._caption_ids) tokenizes
them once, where it tokenized them for every item before. Times the tokenization of `--items`
Color N=`--n` concepts (the positive and its Confusion negatives), each twice as a benchmark
lists it (its Minimal and Contextual rows score the same candidates; concepts of a small
family:N share some too), medians of `--repeats`, interleaved: every item tokenized afresh (before: the cache emptied per item) against the
scorer's cache, the same ids checked first. Prints the load it ran under.

    python benchmarks/caption_tokens.py [--items 50] [--n 3] [--models tiny-qwen2.5-vl tiny-llava]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from autocomp import __version__  # noqa: E402
from autocomp.scoring import load_scorer  # noqa: E402
from scoring_throughput import color_items  # noqa: E402


def tokenize(scorer, items: list[list[str]], fresh: bool) -> float:  # noqa: ANN001
    """Seconds to tokenize every item's candidates (`fresh`: nothing kept between items)."""
    scorer.caption_tokens.clear()
    started = time.perf_counter()
    for texts in items:
        if fresh:
            scorer.caption_tokens.clear()
        scorer._caption_ids(texts)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny-qwen2.5-vl", "tiny-llava"])
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    items = [texts for texts in color_items(args.items, args.n) for _ in range(2)]
    captions = sum(len(t) for t in items)
    print(f"autocomp {__version__}; {args.items} Color N={args.n} concepts, two rows each, "
          f"{captions:,} candidate "
          f"captions ({len({c for t in items for c in t}):,} distinct); load average "
          f"{os.getloadavg()[0]:.1f} at the start")  # fmt: skip
    for model in args.models:
        scorer = load_scorer(model, device="cpu")
        tokenizer = scorer.processor.tokenizer
        scorer._caption_ids(items[0])  # the same ids as the tokenizer's own, caption by caption
        for text in items[0][:50]:
            assert (
                scorer.caption_tokens[text] == tokenizer(text, add_special_tokens=False).input_ids
            )
        times: dict[str, list[float]] = {"per item (before)": [], "once per pod": []}
        for _ in range(args.repeats):
            times["per item (before)"].append(tokenize(scorer, items, fresh=True))
            times["once per pod"].append(tokenize(scorer, items, fresh=False))
        before, after = (statistics.median(v) for v in times.values())
        print(f"{model}: tokenizing per item {before * 1e3:,.1f} ms, once per pod "
              f"{after * 1e3:,.1f} ms ({before / after:.1f}x); load average "
              f"{os.getloadavg()[0]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
