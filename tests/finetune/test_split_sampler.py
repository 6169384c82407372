"""Concept split and hard-negative sampler (pure, fast)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest

from autocomp.analysis.statistics import error_type
from autocomp.config import PROFILES
from autocomp.errors import UsageError
from autocomp.finetune.sampler import STRATA, hard_negatives, strata
from autocomp.finetune.split import concept_id, partition
from autocomp.finetune.stage import split
from autocomp.store.tables import read_metadata

PAPER = PROFILES["paper"].finetune


def test_partition_is_disjoint_complete_and_has_the_paper_fractions():
    concepts = [f"c{i:04d}" for i in range(1000)]
    mapping = partition(concepts, PAPER, seed=3)
    assert set(mapping) == set(concepts)  # every concept in exactly one split (a dict)
    counts = Counter(mapping.values())
    assert counts == {"heldout": 200, "validation": 80, "train": 720}


def test_partition_is_seeded_and_ignores_input_order():
    concepts = [f"c{i}" for i in range(50)]
    a = partition(concepts, PAPER, seed=1)
    assert a == partition(list(reversed(concepts)) + concepts[:5], PAPER, seed=1)
    assert a != partition(concepts, PAPER, seed=2)


def test_partition_refuses_too_few_concepts():
    with pytest.raises(UsageError, match="at least 3"):
        partition(["a", "b"], PAPER, 0)


def test_split_stage_records_and_evaluation_keeps_only_unseen_concepts(tmp_path):
    from tests.finetune.conftest import make_benchmark

    bench = make_benchmark(tmp_path / "b", 15, families=(("color", 2), ("color", 3)))
    paths = split(bench, tmp_path / "s", PAPER, seed=0)
    again = split(bench, tmp_path / "s2", PAPER, seed=0)
    table = pq.read_table(paths["split"])
    assert table.equals(pq.read_table(again["split"]))
    meta = read_metadata(paths["split"])
    assert meta["seed"] == 0 and meta["config"]["heldout_fraction"] == 0.2
    assert meta["counts"] == dict(Counter(table["split"].to_pylist())) and meta["autocomp_version"]
    mapping = dict(zip(table["concept_id"].to_pylist(), table["split"].to_pylist()))
    assert len(mapping) == 15  # only Color N=2 concepts are split
    evaluation = pq.read_table(paths["evaluation"]).to_pylist()
    seen = {c for c, s in mapping.items() if s != "heldout"}
    assert not seen & {concept_id(r) for r in evaluation}
    # held-out Color N=2 concepts plus every Color N=3 concept, in both conditions
    assert len(evaluation) == 2 * (Counter(mapping.values())["heldout"] + 15)
    assert {r["condition"] for r in evaluation} == {"minimal", "contextual"}


def test_split_opens_its_benchmark_once_and_names_it_as_given(tmp_path, monkeypatch):
    from autocomp.store.catalog import benchmarks
    from tests.finetune.conftest import make_benchmark

    bench = make_benchmark(tmp_path / "b", 6)
    opened = []
    real = benchmarks.open_benchmark
    monkeypatch.setattr(benchmarks, "open_benchmark", lambda p: opened.append(p) or real(p))
    given = f"{bench.parent}/./{bench.name}"  # as a user may type it
    paths = split(given, tmp_path / "s", PAPER, seed=0)
    assert opened == [given]  # checked, split and cut from one opened value
    assert read_metadata(paths["split"])["benchmark"] == given
    assert read_metadata(paths["evaluation"])["heldout_of"] == given


def _rows(tmp_path, n=2, count=40):
    from autocomp.config import NegativesConfig
    from autocomp.protocol.stages import negatives_stage, sample_stage

    sample_stage("color", n, count, 0, tmp_path / "c.parquet", force=True)
    negatives_stage(
        tmp_path / "c.parquet", tmp_path / "b.parquet", NegativesConfig(workers=1, force=True)
    )
    return pq.read_table(tmp_path / "b.parquet").to_pylist()


def test_confusion_negatives_are_stratified_over_the_error_families(tmp_path):
    rows = _rows(tmp_path)
    rng = np.random.default_rng(0)
    for row in rows:
        picks = hard_negatives(row, "confusion", 3, rng)
        assert sorted(f for _, f in picks) == sorted(STRATA)  # K=3: one per family
        index = {c: i for i, c in enumerate(row["confusion_negatives"])}
        for caption, family in picks:
            i = index[caption]
            assert (
                error_type(2, row["confusion_arrangements"][i], row["confusion_same_scene"][i])
                == family
            )
            assert caption != row["caption"]
    # K=2 over many positives: each family gets 2/3 of the positives
    counts = Counter(f for row in rows * 10 for _, f in hard_negatives(row, "confusion", 2, rng))
    total = sum(counts.values())
    for family in STRATA:
        assert abs(counts[family] / total - 1 / 3) < 0.05
    # K=6: two per family
    picks = Counter(f for _, f in hard_negatives(rows[0], "confusion", 6, rng))
    assert picks == {f: 2 for f in STRATA}


def test_strata_leave_out_same_scene_and_repeated_pairs(tmp_path):
    row = _rows(tmp_path, count=3)[0]
    groups = strata(row)
    drawn = {i for v in groups.values() for i in v}
    for i, same in enumerate(row["confusion_same_scene"]):
        kind = error_type(2, row["confusion_arrangements"][i], same)
        assert (i in drawn) == (kind in STRATA)
    assert set(groups) == set(STRATA)


def test_swap_only_draws_swap_negatives_and_is_seeded(tmp_path):
    rows = _rows(tmp_path, n=3, count=5)
    for row in rows:
        picks = hard_negatives(row, "swap", 3, np.random.default_rng(1))
        assert len({c for c, _ in picks}) == 3  # N=3 has 5 Swap negatives: no repeats
        assert {c for c, _ in picks} <= set(row["swap_negatives"])
        assert picks == hard_negatives(row, "swap", 3, np.random.default_rng(1))
    row2 = _rows(tmp_path, n=2, count=2)[0]
    picks = hard_negatives(row2, "swap", 3, np.random.default_rng(0))
    assert [c for c, _ in picks] == row2["swap_negatives"] * 3  # N=2: one Swap negative
    assert hard_negatives(row2, "confusion", 0, np.random.default_rng(0)) == []
