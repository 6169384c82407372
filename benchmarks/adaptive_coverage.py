"""Coverage of adaptive evaluation's stopping rule, by simulation (issue 37).

Each simulated run is one cell: a finite population of `size` items (log-uniform in
[100, 100,000]) whose true accuracy is drawn uniformly in [0.02, 0.98] (exactly round(p * size)
correct items), scored in a random order without replacement and checked after every part of
`--part` items. Two stopping rules are compared on the same draws:

- autocomp's: stop when the anytime-valid confidence sequence (`scoring/sequential.py`) is
  narrower than the target width; report that sequence's interval;
- the naive one a peer would write: stop when the report's fixed-sample interval
  (`analysis/statistics.binomial_interval`, exact percentile bootstrap) is narrower than the
  target, and report that interval.

A final interval covers when it holds the cell's true accuracy. Prints, per target width and
rule: coverage (must be >= the nominal 95 % for the sequence), the fraction of items scored,
and how many runs stopped early.

    .venv/bin/python benchmarks/adaptive_coverage.py            # 10,000 runs, widths 2/5/10 pp
    .venv/bin/python benchmarks/adaptive_coverage.py --runs 500 --max-size 5000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import binom

from autocomp.scoring.sequential import CONFIDENCE, confidence_sequence


def draw_cell(rng: np.random.Generator, min_size: int, max_size: int) -> tuple[np.ndarray, float]:
    size = int(round(np.exp(rng.uniform(np.log(min_size), np.log(max_size)))))
    correct = int(round(rng.uniform(0.02, 0.98) * size))
    outcomes = np.zeros(size)
    outcomes[:correct] = 1.0
    rng.shuffle(outcomes)
    return outcomes, correct / size


def checks(size: int, part: int) -> np.ndarray:
    return np.arange(part, size + part, part).clip(max=size)


def fixed_intervals(outcomes: np.ndarray, at: np.ndarray, finite: bool):
    """The fixed-sample 95 % intervals a peer would check at each of `at`: the report's exact
    binomial percentile bootstrap, or the textbook Wald interval with the finite-population
    correction (the right fixed-sample interval when drawing without replacement)."""
    p = np.cumsum(outcomes)[at - 1] / at
    tail = (1 - CONFIDENCE) / 2
    if not finite:
        return binom.ppf(tail, at, p) / at, binom.ppf(1 - tail, at, p) / at
    size = outcomes.size
    fpc = np.sqrt((size - at) / max(size - 1, 1))
    half = 1.959964 * np.sqrt(p * (1 - p) / at) * fpc
    return p - half, p + half


def first_narrow(lower: np.ndarray, upper: np.ndarray, width: float) -> int:
    narrow = np.nonzero(upper - lower < width)[0]
    return int(narrow[0]) if narrow.size else lower.size - 1


RULES = ("sequence", "naive", "naive-fpc")
EXTREME = 0.1  # cells with accuracy below 0.1 or above 0.9, where the naive stop fails most


def cell_results(outcomes: np.ndarray, truth: float, widths: list[float], part: int):
    """For each width and rule: (items scored, covered)."""
    at = checks(outcomes.size, part)
    seq = confidence_sequence(outcomes, outcomes.size)
    bounds = {
        "sequence": (seq.lower[at - 1], seq.upper[at - 1]),
        "naive": fixed_intervals(outcomes, at, finite=False),
        "naive-fpc": fixed_intervals(outcomes, at, finite=True),
    }
    out = {}
    for width in widths:
        for rule, (lower, upper) in bounds.items():
            k = first_narrow(lower, upper, width)
            covered = lower[k] - 1e-12 <= truth <= upper[k] + 1e-12
            out[(width, rule)] = (int(at[k]), bool(covered))
    return out


def simulate(runs: int, widths: list[float], part: int, min_size: int, max_size: int, seed: int):
    """Per width and rule: (coverage, fraction of items scored, fraction stopped early)."""
    rng = np.random.default_rng(seed)
    sums = {(w, r): [0, 0, 0, 0] for w in widths for r in RULES}
    total = extreme = 0
    for _ in range(runs):
        outcomes, truth = draw_cell(rng, min_size, max_size)
        total += outcomes.size
        tail = not EXTREME < truth < 1 - EXTREME
        extreme += tail
        for key, (t, covered) in cell_results(outcomes, truth, widths, part).items():
            sums[key][0] += covered
            sums[key][1] += t
            sums[key][2] += t < outcomes.size
            sums[key][3] += covered and tail
    return {
        k: (c / runs, s / total, e / runs, x / max(extreme, 1)) for k, (c, s, e, x) in sums.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--widths", default="2,5,10", help="target widths in percentage points")
    parser.add_argument("--part", type=int, default=100, help="items between two checks")
    parser.add_argument("--min-size", type=int, default=100)
    parser.add_argument("--max-size", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    widths = [float(w) / 100 for w in args.widths.split(",")]
    start = time.perf_counter()
    result = simulate(args.runs, widths, args.part, args.min_size, args.max_size, args.seed)
    print(
        f"{args.runs} cells, sizes {args.min_size}-{args.max_size} (log-uniform), accuracy "
        f"0.02-0.98, a check every {args.part} items, nominal coverage {CONFIDENCE:.0%}, "
        f"seed {args.seed}"
    )
    print(
        f"{'width':>6} {'rule':<9} {'coverage':>9} {'<0.1|>0.9':>10} {'items scored':>13} "
        f"{'stopped early':>14}"
    )
    for (width, name), (coverage, scored, early, tails) in result.items():
        print(
            f"{width * 100:5.0f}pp {name:<9} {coverage:9.4f} {tails:10.4f} {scored:13.1%} "
            f"{early:14.1%}"
        )
    for width in widths:
        seq = result[(width, "sequence")]
        naive = {r: result[(width, r)] for r in RULES[1:]}
        gaps = ", ".join(
            f"{r} {v[0]:.2%} ({(v[0] - CONFIDENCE) * 100:+.2f} points)" for r, v in naive.items()
        )
        print(
            f"width {width * 100:.0f}pp: the sequence covers {seq[0]:.2%} "
            f"({(seq[0] - CONFIDENCE) * 100:+.2f} points against the nominal {CONFIDENCE:.0%}) "
            f"and scores {seq[1]:.1%} of the items; naive stops: {gaps}"
        )
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
