"""The confidence sequence of adaptive evaluation: its closed form against the supermartingale it
inverts, its exact end, its symmetry, and its time-uniform coverage on a small simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autocomp.scoring.sequential import LAMBDA_CAP, confidence_sequence, stop_time


def _wealth_lower_bounds(x: list[float], population: int, alpha: float, grid: np.ndarray):
    """After each item, the smallest mu on `grid` whose wealth process M_t(mu) (one side, at
    alpha / 2) stays below 2 / alpha: computed item by item from the definition, with the
    conditional mean of each draw without replacement, no closed form."""
    total, squares, log_wealth, bounds = 0.0, 0.0, np.zeros_like(grid), []
    for i, xi in enumerate(x, start=1):
        mean_before = (0.5 + total) / i
        variance_before = (0.25 + squares) / i
        lam = min(
            math.sqrt(2 * math.log(2 / alpha) / (variance_before * i * math.log(1 + i))), LAMBDA_CAP
        )
        psi = -math.log(1 - lam) - lam
        conditional = (population * grid - total) / (population - i + 1)
        log_wealth += lam * (xi - conditional) - psi * (xi - mean_before) ** 2
        total += xi
        squares += (xi - (0.5 + total) / (i + 1)) ** 2
        bounds.append(float(grid[log_wealth < math.log(2 / alpha)].min()))
    return np.array(bounds)


def test_closed_form_inverts_the_wealth_process():
    """The lower bound is the running maximum of the wealth process's boundary and of what the
    draws prove (S_t / N); the upper bound is the same on 1 - X."""
    rng = np.random.default_rng(3)
    population, step = 400, 1e-5
    x = (rng.random(150) < 0.7).astype(float)
    grid = np.arange(0, 1 + step / 2, step)
    seq = confidence_sequence(x, population)
    proven = np.cumsum(x) / population
    lower = np.maximum.accumulate(
        np.maximum(_wealth_lower_bounds(list(x), population, 0.05, grid), proven)
    )
    np.testing.assert_allclose(seq.lower, lower, atol=step)
    flipped = 1 - x
    proven_up = np.cumsum(flipped) / population
    upper = 1 - np.maximum.accumulate(
        np.maximum(_wealth_lower_bounds(list(flipped), population, 0.05, grid), proven_up)
    )
    np.testing.assert_allclose(seq.upper, upper, atol=step)
    assert seq.lower[-1] > 0.5 and seq.upper[-1] < 0.9  # it learnt something: 150 of 400 drawn


def test_exact_at_the_end_and_nested():
    x = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0, 1], dtype=float)
    seq = confidence_sequence(x, population=10)
    assert seq.lower[-1] == seq.upper[-1] == pytest.approx(0.7)
    assert np.all(np.diff(seq.lower) >= -1e-15) and np.all(np.diff(seq.upper) <= 1e-15)
    assert np.all(seq.lower <= seq.upper)


def test_symmetric_under_relabelling():
    rng = np.random.default_rng(5)
    x = (rng.random(300) < 0.2).astype(float)
    a = confidence_sequence(x, 1000)
    b = confidence_sequence(1 - x, 1000)
    np.testing.assert_allclose(a.lower, 1 - b.upper, atol=1e-12)
    np.testing.assert_allclose(a.upper, 1 - b.lower, atol=1e-12)


def test_time_uniform_coverage_on_a_small_simulation():
    """Each run draws a population, scores all of it in random order; the sequence must hold
    the truth at every time in at least 95 % of runs (the property a stopping rule relies on)."""
    rng = np.random.default_rng(0)
    runs, missed = 300, 0
    for _ in range(runs):
        size = int(rng.integers(100, 1500))
        truth = rng.uniform(0.02, 0.98)
        x = np.zeros(size)
        x[: round(truth * size)] = 1
        rng.shuffle(x)
        seq = confidence_sequence(x, size)
        mean = x.mean()
        missed += bool(np.any((seq.lower > mean + 1e-12) | (seq.upper < mean - 1e-12)))
    assert missed / runs <= 0.05


def test_stop_time_checks_whole_parts():
    x = np.ones(1000)
    t = stop_time(x, 1000, width=0.2, part=100)
    assert t % 100 == 0 and t < 1000
    seq = confidence_sequence(x, 1000)
    assert seq.width()[t - 1] < 0.2 and (t == 100 or seq.width()[t - 101] >= 0.2)
    assert stop_time(x[:50], 1000, width=0.0001, part=100) == 50  # never narrow: all drawn


@pytest.mark.parametrize(
    ("outcomes", "population", "kwargs", "message"),
    [
        ([1, 0], 1, {}, "2 draws from a population of 1"),
        ([2], 5, {}, "outcomes must lie in [0, 1]"),
        ([1], 5, {"confidence": 1.0}, "confidence must lie in (0, 1)"),
    ],
)
def test_bad_input(outcomes, population, kwargs, message):
    with pytest.raises(
        ValueError,
        match=message.replace("(", r"\(")
        .replace(")", r"\)")
        .replace("[", r"\[")
        .replace("]", r"\]"),
    ):
        confidence_sequence(outcomes, population, **kwargs)
