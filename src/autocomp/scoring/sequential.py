"""Anytime-valid confidence sequences for a cell's accuracy: the stopping rule of adaptive
evaluation (`score --target-width`).

A cell (family, N, condition, protocol) holds a finite population of `N` items; adaptive
scoring draws them in a seeded random order, without replacement, and after each committed part
asks whether the accuracy is known to within the target width. A fixed-sample interval checked
again and again under-covers (optional stopping); a confidence sequence holds at every time at
once, so it stays valid at whatever time the rule stops.

The sequence is the predictable-plug-in empirical-Bernstein confidence sequence for sampling
without replacement (Waudby-Smith & Ramdas, "Confidence sequences for sampling without
replacement", NeurIPS 2020, Theorem 4; the with-replacement form is Theorem 2 of
"Estimating means of bounded random variables by betting", JRSS-B 2023). For outcomes
X_i in [0, 1], the population mean mu, S_{i-1} = X_1 + ... + X_{i-1}, and the conditional mean
of the i-th draw m_i(mu) = (N mu - S_{i-1}) / (N - i + 1), the process

    M_t(mu) = prod_{i<=t} exp(lambda_i (X_i - m_i(mu)) - psi(lambda_i) (X_i - mu_hat_{i-1})^2)

is a non-negative supermartingale for any predictable lambda_i in [0, 1) and predictable
mu_hat_{i-1} (Fan, Grama & Liu 2015: exp(l x - psi(l) x^2) <= 1 + l x for x >= -1, with
psi(l) = -log(1 - l) - l), so by Ville's inequality M_t(mu) < 2 / alpha for all t with
probability at least 1 - alpha / 2. Solved for mu that is the lower bound

    L_t = (sum lambda_i (X_i + S_{i-1} / (N - i + 1)) - sum psi_i (X_i - mu_hat_{i-1})^2
           - log(2 / alpha)) / sum lambda_i N / (N - i + 1)

and the same on 1 - X gives the upper one. The plug-ins are the paper's:
mu_hat_t = (1/2 + S_t) / (t + 1), sigma2_t = (1/4 + sum_{j<=t} (X_j - mu_hat_j)^2) / (t + 1),
lambda_i = min(sqrt(2 log(2 / alpha) / (sigma2_{i-1} i log(1 + i))), 1/2). The sequence is
intersected over time (it holds at all times at once) and with what the draws prove outright
(mu in [S_t / N, (S_t + N - t) / N]), so after the last item it is the exact accuracy.

Pure numpy, no model: `benchmarks/adaptive_coverage.py` measures its coverage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
LAMBDA_CAP = 0.5  # the betting paper's c = 1/2


@dataclass(frozen=True)
class Sequence:
    """The running interval after each drawn item: `lower[t-1]`, `upper[t-1]` after t items."""

    lower: np.ndarray
    upper: np.ndarray
    population: int

    def width(self) -> np.ndarray:
        return self.upper - self.lower


def _check(outcomes: np.ndarray, population: int, confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if population < 1 or outcomes.size > population:
        raise ValueError(f"{outcomes.size} draws from a population of {population}")
    if outcomes.size and (outcomes.min() < 0 or outcomes.max() > 1):
        raise ValueError("outcomes must lie in [0, 1]")


def _plug_ins(x: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """lambda_i, psi(lambda_i) and mu_hat_{i-1} for i = 1..t (all predictable)."""
    i = np.arange(1, x.size + 1, dtype=np.float64)
    total = np.cumsum(x)
    before = total - x  # S_{i-1}
    mean_before = (0.5 + before) / i  # mu_hat_{i-1}
    mean_now = (0.5 + total) / (i + 1)  # mu_hat_i
    squares = np.cumsum((x - mean_now) ** 2)
    variance_before = (0.25 + squares - (x - mean_now) ** 2) / i  # sigma2_{i-1}
    lam = np.sqrt(2 * math.log(2 / alpha) / (variance_before * i * np.log1p(i)))
    lam = np.minimum(lam, LAMBDA_CAP)
    psi = -np.log1p(-lam) - lam
    return lam, psi, mean_before


def _lower(
    x: np.ndarray, population: int, lam: np.ndarray, penalty: np.ndarray, alpha: float
) -> np.ndarray:
    i = np.arange(1, x.size + 1, dtype=np.float64)
    remaining = population - i + 1  # N - i + 1
    before = np.cumsum(x) - x
    numerator = np.cumsum(lam * (x + before / remaining)) - np.cumsum(penalty) - math.log(2 / alpha)
    return numerator / np.cumsum(lam * population / remaining)


def confidence_sequence(
    outcomes: np.ndarray | list[float], population: int, confidence: float = CONFIDENCE
) -> Sequence:
    """The (confidence)-level confidence sequence for the mean of a population of `population`
    values in [0, 1], from `outcomes` drawn from it in uniformly random order without
    replacement. Valid simultaneously at every t, hence at any stopping time."""
    x = np.asarray(outcomes, dtype=np.float64)
    _check(x, population, confidence)
    alpha = 1 - confidence
    if x.size == 0:
        return Sequence(np.zeros(0), np.zeros(0), population)
    lam, psi, mean_before = _plug_ins(x, alpha)
    penalty = psi * (x - mean_before) ** 2  # the same for X and 1 - X
    lower = _lower(x, population, lam, penalty, alpha)
    upper = 1 - _lower(1 - x, population, lam, penalty, alpha)
    t = np.arange(1, x.size + 1)
    total = np.cumsum(x)
    lower = np.maximum(np.maximum.accumulate(np.maximum(lower, 0.0)), total / population)
    upper = np.minimum(
        np.minimum.accumulate(np.minimum(upper, 1.0)), (total + population - t) / population
    )
    return Sequence(lower, upper, population)


def stop_time(
    outcomes: np.ndarray | list[float],
    population: int,
    width: float,
    part: int,
    confidence: float = CONFIDENCE,
) -> int:
    """How many items adaptive scoring scores: the first whole number of parts (of `part`
    items; the last part may be shorter) after which the sequence is narrower than `width`
    (a fraction), else all of `outcomes`."""
    if not 0 < width <= 1:
        raise ValueError(f"width must lie in (0, 1], got {width}")
    if part < 1:
        raise ValueError(f"part must be at least 1, got {part}")
    seq = confidence_sequence(outcomes, population, confidence)
    size = seq.lower.size
    checks = np.arange(part, size + part, part).clip(max=size)
    narrow = np.nonzero(seq.width()[checks - 1] < width)[0]
    return int(checks[narrow[0]]) if narrow.size else size
