"""The column-wise row checks of the candidate-set stage: true only when every row passes
`check_concept_row`, and a batch with a bad row still fails with that row's own error."""

import pyarrow as pa
import pytest

from autocomp.errors import UsageError
from autocomp.protocol.concepts import check_concept_row
from autocomp.protocol.family import load_family
from autocomp.protocol.stages import benchmark_batch, rows_pass_checks

GOOD = {
    "family": ["color", "position", "color"],
    "n": [2, 2, 1],
    "objects": [["cup", "lamp"], ["cup", "lamp"], ["cup"]],
    "attributes": [["red", "green"], ["above"], ["red"]],
    "caption": ["A red cup and a green lamp.", "A cup above a lamp.", "A red cup."],
}


def batch(**changes):
    columns = {**GOOD, **changes}
    return pa.RecordBatch.from_pydict(columns)


def families(b):
    return {name: load_family(name) for name in set(b.column("family").to_pylist())}


def row_errors(b):
    """Which rows `check_concept_row` rejects."""
    rows = b.to_pylist()
    fams = families(b)
    bad = []
    for i, row in enumerate(rows):
        try:
            check_concept_row(fams[row["family"]], row, f"row {i}", "caption")
        except UsageError:
            bad.append(i)
    return bad


def test_a_good_batch_passes():
    b = batch()
    assert rows_pass_checks(b, families(b), "caption") and row_errors(b) == []


@pytest.mark.parametrize(
    "changes",
    [
        {"n": [2, 2, 4]},  # outside color's range
        {"n": [2, 1, 1]},  # outside position's range
        {"n": [2, 2, None]},
        {"n": [True, True, True]},  # a bool column is not a count
        {"n": [2.0, 2.0, 1.0]},
        {"objects": [["cup", "lamp"], ["cup", "lamp"], ["cup", "lamp"]]},  # too many
        {"objects": [["cup", "lamp"], ["cup", "lamp"], None]},
        {"objects": [["cup", "lamp"], ["cup", None], ["cup"]]},
        {"objects": [["cup", "lamp"], ["cup", "lamp"], ["unicorn"]]},
        {"attributes": [["red", "green"], ["above", "below"], ["red"]]},
        {"attributes": [["red", "green"], ["red"], ["red"]]},  # a colour is no relation
        {"attributes": [["red", "above"], ["above"], ["red"]]},  # nor a relation a colour
        {"caption": ["A red cup and a green lamp.", "  ", "A red cup."]},
        {"caption": ["A red cup and a green lamp.", None, "A red cup."]},
    ],
)
def test_a_bad_row_fails_the_batch(changes):
    b = batch(**changes)
    assert not rows_pass_checks(b, families(b), "caption")
    assert row_errors(b)


def test_missing_columns_fail_the_batch():
    b = batch().drop_columns(["attributes"])
    assert not rows_pass_checks(b, families(b), "caption")
    assert not rows_pass_checks(batch(), families(batch()), "minimal_caption")


def test_a_caption_without_ascii_letters_is_checked_row_by_row():
    """The column-wise test is conservative: such a caption is not blank, but it answers false
    and leaves the decision to `check_concept_row`."""
    b = batch(caption=["A red cup and a green lamp.", "A cup above a lamp.", "¡¿ é !"])
    assert not rows_pass_checks(b, families(b), "caption")
    assert row_errors(b) == []


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"objects": [["cup", "lamp"], ["cup", "lamp"], ["unicorn"]]}, "row 7: .*unicorn"),
        ({"n": [2, 2, 4]}, "row 7: .*outside color's range"),
        ({"caption": ["A red cup and a green lamp.", "", "A red cup."]}, "row 6: .*caption"),
    ],
)
def test_the_stage_names_the_bad_row(changes, message):
    with pytest.raises(UsageError, match=message):
        benchmark_batch(batch(**changes), "caption", "strict", first_row=5)
