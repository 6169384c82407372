"""Every analysis metric on small hand-computed tables."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from autocomp.analysis import statistics as analysis
from autocomp.analysis.agreement import human_results
from autocomp.protocol.negatives import arrangements
from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA


def _pred(model, sample_id, correct, family="color", n=2, condition=None, set_name="swap",
          candidates=2, predicted=0, protocol="paper"):  # fmt: skip
    condition = condition or sample_id.rsplit("/", 1)[1]
    return {"model": model, "sample_id": sample_id, "family": family, "n": n,
            "condition": condition, "set": set_name, "protocol": protocol,
            "candidates": candidates, "correct": correct, "tie": False,
            "predicted": 0 if correct else predicted, "positive_score": 0.0,
            "best_negative_score": 0.0, "failed": False, "reason": ""}  # fmt: skip


def _table(rows):
    return pa.Table.from_pylist(rows, PREDICTIONS_SCHEMA)


def test_binomial_interval_by_hand():
    assert analysis.binomial_interval(50, 100) == (0.40, 0.60)
    assert analysis.binomial_interval(0, 10) == (0.0, 0.0)
    assert analysis.binomial_interval(10, 10) == (1.0, 1.0)


def test_interval_covers_a_known_accuracy_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    truth, n, trials = 0.3, 200, 2000
    covered = 0
    for _ in range(trials):
        low, high = analysis.binomial_interval(int(rng.binomial(n, truth)), n)
        covered += low <= truth <= high
    assert 0.93 <= covered / trials <= 0.97


def test_accuracy_cells_and_chance():
    rows = [_pred("m", f"c{i}/minimal", ok, candidates=c)
            for i, (ok, c) in enumerate([(True, 2), (True, 2), (False, 4), (True, 4)])]  # fmt: skip
    (row,) = analysis.accuracy(_table(rows)).to_pylist()
    assert row["items"] == 4 and row["accuracy"] == 0.75
    assert row["chance"] == pytest.approx((0.5 + 0.5 + 0.25 + 0.25) / 4)
    assert row["ci_low"] <= 0.75 <= row["ci_high"]


def test_mcnemar_by_hand():
    assert analysis.mcnemar(0, 10) == pytest.approx(2 * 0.5**10)
    assert analysis.mcnemar(5, 5) == 1.0
    assert analysis.mcnemar(0, 0) == 1.0


def test_paired_interval_is_seeded_and_degenerate_when_constant():
    diffs = [1, 0, -1, 1, 1, 0]
    assert analysis.paired_interval(diffs, seed=3) == analysis.paired_interval(diffs, seed=3)
    assert analysis.paired_interval([1] * 5) == (1.0, 1.0)


def test_context_deltas_on_paired_concepts():
    minimal = [True, True, False, False, True]
    contextual = [True, False, True, True, False]
    rows = [_pred("m", f"c{i}/minimal", ok) for i, ok in enumerate(minimal)]
    rows += [_pred("m", f"c{i}/contextual", ok) for i, ok in enumerate(contextual)]
    (row,) = analysis.context_deltas(_table(rows), paired={"c0", "c1", "c2", "c3"}).to_pylist()
    assert row["concepts"] == 4  # c4 is not in the paired set
    assert (row["accuracy_a"], row["accuracy_b"], row["delta"]) == (0.5, 0.75, 0.25)
    assert (row["only_a"], row["only_b"]) == (1, 2)
    assert row["p_value"] == pytest.approx(1.0)


def test_model_deltas_against_the_base():
    rows = [_pred("negclip", f"c{i}/minimal", True) for i in range(10)]
    rows += [_pred("clip", f"c{i}/minimal", False) for i in range(10)]
    (row,) = analysis.model_deltas(_table(rows), {"negclip": "clip"}).to_pylist()
    assert (row["model"], row["base"], row["delta"], row["only_b"]) == ("negclip", "clip", 1.0, 10)
    assert row["p_value"] == pytest.approx(2 * 0.5**10)


def _arrangement(n, objects, labels):
    arr = arrangements(False, n)
    return next(i for i in range(len(arr.objects))
                if arr.objects[i] == objects and arr.labels[i] == labels)  # fmt: skip


@pytest.mark.parametrize(
    "objects, labels, kind",
    [
        ((0, 1), (1, 0), "swapped attributes"),  # a blue cup and a red lamp
        ((1, 0), (0, 1), "swapped attributes"),  # a red lamp and a blue cup
        ((0, 0), (0, 0), "repeated pair"),  # a red cup and a red cup
        ((0, 0), (0, 1), "shared object"),  # a red cup and a blue cup
        ((0, 1), (0, 0), "shared attribute"),  # a red cup and a red lamp
        ((1, 1), (1, 1), "repeated pair"),
    ],
)
def test_error_types_by_hand(objects, labels, kind):
    assert analysis.error_type(2, _arrangement(2, objects, labels), False) == kind


def test_same_scene_choices_are_their_own_type():
    assert analysis.error_type(2, _arrangement(2, (1, 0), (1, 0)), True) == "same scene"


def test_confusion_taxonomy_shares(color):
    from autocomp.protocol.negatives import build_candidates

    sets = build_candidates(color, ["cup", "lamp"], ["red", "blue"], "A red cup and a blue lamp.")
    bench = pa.table({"sample_id": ["c0/minimal", "c1/minimal", "c2/minimal"],
                      "confusion_arrangements": [sets.confusion_arrangements] * 3,
                      "confusion_same_scene": [sets.confusion_same_scene] * 3})  # fmt: skip
    pick = {kind: 1 + next(i for i, (a, s) in enumerate(zip(sets.confusion_arrangements,
                                                           sets.confusion_same_scene))
                           if analysis.error_type(2, a, s) == kind)
            for kind in ("swapped attributes", "shared object")}  # fmt: skip
    rows = [_pred("m", "c0/minimal", False, set_name="confusion", predicted=pick["swapped attributes"]),
            _pred("m", "c1/minimal", False, set_name="confusion", predicted=pick["shared object"]),
            _pred("m", "c2/minimal", True, set_name="confusion")]  # fmt: skip
    shares = {
        r["error_type"]: r["share"]
        for r in analysis.confusion_taxonomy(_table(rows), bench, ["color"]).to_pylist()
    }
    assert shares == {"swapped attributes": 0.5, "shared object": 0.5, "repeated pair": 0.0,
                      "shared attribute": 0.0, "same scene": 0.0}  # fmt: skip


def test_filter_shift_by_hand():
    concepts = pa.table({"family": ["color"] * 2, "n": [1, 1], "objects": [["cup"], ["lamp"]],
                         "attributes": [["red"], ["blue"]]})  # fmt: skip
    kept = pa.table({"family": ["color"] * 4, "n": [1] * 4, "condition": ["minimal"] * 4,
                     "objects": [["cup"]] * 4, "attributes": [["red"], ["red"], ["red"], ["blue"]]})  # fmt: skip
    (row,) = analysis.filter_shift(concepts, kept).to_pylist()
    assert row["label_tv"] == pytest.approx(0.25)
    assert row["label_within_0_5_1_5"] == 1.0 and row["label_below_0_25"] == 0.0
    assert row["object_tv"] == pytest.approx(0.5)  # lamp vanished: ratio 0
    assert row["object_below_0_25"] == 0.5


def test_distinct_n_by_hand():
    assert analysis.distinct_n(["a b a b"], 2) == pytest.approx(2 / 3)
    assert analysis.distinct_n(["A red cup.", "a red cup"], 3) == 0.5


def test_kappa_on_a_known_confusion_matrix():
    a = {"s1": True, "s2": True, "s3": False, "s4": False}
    b = {"s1": True, "s2": False, "s3": False, "s4": False}
    keys = {s: ("color", 2, "minimal") for s in a}
    rows = {r["family"]: r for r in analysis.judge_agreement(a, b, keys).to_pylist()}
    # po = 0.75, pe = 0.5 * 0.25 + 0.5 * 0.75 = 0.5 -> kappa = 0.5
    assert rows["color"]["agreement"] == 0.75 and rows["color"]["kappa"] == pytest.approx(0.5)
    assert (rows["color"]["a_pass_b_fail"], rows["color"]["a_fail_b_pass"]) == (0.25, 0.0)
    assert rows["all"]["samples"] == 4


def test_human_results_and_bad_annotations():
    bench = pa.table({"sample_id": ["c0/minimal", "c1/minimal"], "family": ["color"] * 2,
                      "n": [2, 2], "condition": ["minimal"] * 2,
                      "caption": ["A red cup and a blue lamp.", "A red hat and a blue cup."],
                      "accepted": [True, True]})  # fmt: skip
    rows = [
        {"annotator": "a1", "sample_id": "c0/minimal", "task": "valid", "answer": "yes"},
        {"annotator": "a2", "sample_id": "c1/minimal", "task": "valid", "answer": "no"},
        {
            "annotator": "a1",
            "sample_id": "c0/minimal",
            "task": "swap",
            "answer": "A red cup and a blue lamp.",
        },
        {
            "annotator": "a2",
            "sample_id": "c1/minimal",
            "task": "confusion",
            "answer": "A red hat and a red cup.",
        },
    ]
    (row,) = human_results(rows, bench).to_pylist()
    assert (
        row["annotators"],
        row["concordance"],
        row["swap_accuracy"],
        row["confusion_accuracy"],
    ) == (2, 0.5, 1.0, 0.0)
    from autocomp.errors import UsageError

    with pytest.raises(UsageError, match="task must be one of"):
        human_results([{**rows[0], "task": "rate"}], bench)
    with pytest.raises(UsageError, match="not a sample of this benchmark"):
        human_results([{**rows[0], "sample_id": "zz/minimal"}], bench)


def test_cross_generator_uses_matched_concepts_and_ranks_models():
    def run(concepts, good_ok, bad_ok):
        rows = [_pred("good", f"c{i}/minimal", good_ok) for i in concepts]
        rows += [_pred("bad", f"c{i}/minimal", bad_ok) for i in concepts]
        return _table(rows)

    same, flipped = analysis.cross_generator(
        {"sd35": run(range(0, 4), True, False), "flux": run(range(1, 5), True, False)}
    )
    assert set(same.column("items").to_pylist()) == {3}  # c1..c3 only
    assert flipped.column("kendall_tau").to_pylist() == [1.0]
    _, order = analysis.cross_generator(
        {"sd35": run(range(4), True, False), "turbo": run(range(4), False, True)}
    )
    assert order.column("kendall_tau").to_pylist() == [-1.0]


def test_per_relation_by_hand():
    bench = pa.table({"sample_id": ["c0/minimal", "c1/minimal", "c2/minimal"],
                      "attributes": [["above"], ["above"], ["under"]]})  # fmt: skip
    rows = [_pred("m", "c0/minimal", True, family="position"),
            _pred("m", "c1/minimal", False, family="position"),
            _pred("m", "c2/minimal", True, family="position"),
            _pred("m", "c2/minimal", False, family="position", set_name="confusion")]  # fmt: skip
    got = {
        (r["family"], r["n"], r["relation"]): (r["items"], r["accuracy"])
        for r in analysis.per_relation(_table(rows), bench, ["position"]).to_pylist()
    }
    assert got == {("position", 2, "above"): (2, 0.5), ("position", 2, "under"): (1, 1.0)}
    assert analysis.per_relation(_table(rows), bench, ["relative_size"]).num_rows == 0


def test_family_dependent_analyses_select_families_by_kind(fixture_path):
    """A user-added attribute family (the documented `material` example) joins the error
    taxonomy; the kind comes from the benchmark's own record, else from the family file."""
    from autocomp.analysis.load import family_kinds

    kinds = family_kinds({}, ["material", "position", "color", "relative_size", "nowhere"])
    assert kinds == {"attribute": ["color", "material"], "relation": ["position", "relative_size"]}
    recorded = {"families": {"glass": {"sha256": "x", "config": {"kind": "attribute"}}}}
    assert family_kinds(recorded, ["glass"])["attribute"] == ["glass"]


def test_a_hand_made_run_lends_its_stage_tables_only_when_they_belong_to_the_benchmark(tmp_path):
    """report --run over the README's hand-made layout reads run/concepts.parquet and
    run/curated/survival.parquet, but only when they are this benchmark's: concepts covering
    every concept, a curated table holding exactly its samples; another run's are left out."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from autocomp.analysis.load import _stage_tables

    bench = pa.table({"sample_id": ["c1/minimal", "c2/minimal"], "concept_id": ["c1", "c2"]})
    (tmp_path / "curated").mkdir()
    survival = pa.table({"stage": ["image"], "kept": [2]})
    pq.write_table(survival, tmp_path / "curated" / "survival.parquet")
    pq.write_table(bench.select(["sample_id"]), tmp_path / "curated" / "curated.parquet")
    pq.write_table(pa.table({"concept_id": ["c1", "c2", "c3"]}), tmp_path / "concepts.parquet")
    found = _stage_tables(tmp_path, tmp_path / "benchmark", bench)
    assert found["survival"].equals(survival) and found["concepts"].num_rows == 3

    other = pa.table({"sample_id": ["c1/minimal"]})  # another curation: not this benchmark's
    pq.write_table(other, tmp_path / "curated" / "curated.parquet")
    pq.write_table(pa.table({"concept_id": ["c1"]}), tmp_path / "concepts.parquet")
    found = _stage_tables(tmp_path, tmp_path / "benchmark", bench)
    assert found == {"concepts": None, "survival": None}
