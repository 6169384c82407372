"""The sample id (store/catalog/ids.py) and the one home of the table schemas."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from autocomp.store.catalog import ids

SRC = Path(__file__).resolve().parents[2] / "src" / "autocomp"


def test_hand_checked_sample_ids():
    assert ids.sample_id("color-n2-0123456789ab", "minimal") == "color-n2-0123456789ab/minimal"
    assert ids.parse_sample_id("color-n2-0123456789ab/contextual") == (
        "color-n2-0123456789ab",
        "contextual",
    )
    assert ids.parse_sample_id("color-n2-0123456789ab") == ("color-n2-0123456789ab", "")
    assert ids.parse_sample_id("row-7") == ("row-7", "")
    assert ids.concept_of("sugarcrepe-replace_att/12") == "sugarcrepe-replace_att"
    assert ids.concept_of("a/b/c") == "a/b"  # the condition is the last part


concepts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1)
conditions = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/"))


@given(concepts, conditions)
def test_parse_undoes_make(concept, condition):
    made = ids.sample_id(concept, condition)
    assert ids.parse_sample_id(made) == (concept, condition)
    assert ids.concept_of(made) == concept


def test_rows_without_a_sample_id_are_named_by_the_score_stages_rule():
    rows = [
        {"concept_id": "c1", "condition": "contextual"},
        {"concept_id": "c2"},
        {"condition": "minimal"},
        {},
        {"sample_id": "given/minimal", "concept_id": "c5", "condition": "contextual"},
    ]
    named = [ids.row_sample_id(r, i) for i, r in enumerate(rows)]
    assert named == ["c1/contextual", "c2", "row-2/minimal", "row-3", "given/minimal"]
    table = ids.with_sample_keys(pa.Table.from_pylist(rows[:4]))
    assert table["sample_id"].to_pylist() == named[:4]
    bare = ids.with_sample_keys(pa.table({"concept_id": ["c1", "c2"]}))
    assert bare["sample_id"].to_pylist() == ["c1", "c2"]
    assert bare["condition"].to_pylist() == ["minimal", "minimal"]
    kept = pa.table({"sample_id": ["x/minimal"], "condition": ["minimal"]})
    assert ids.with_sample_keys(kept).equals(kept)


def test_every_table_schema_is_defined_in_the_catalog():
    """A module-level pa.schema constant outside store/catalog/schemas.py is a second home for a
    layout (the score run's two schemas stay with the score run for now)."""
    constant = re.compile(r"^([A-Z][A-Z0-9_]*)\s*=\s*pa\.(schema|struct)\(", re.MULTILINE)
    allowed = {"SCORES_SCHEMA", "PREDICTIONS_SCHEMA"}
    found = {
        (path.relative_to(SRC).as_posix(), name)
        for path in SRC.rglob("*.py")
        if path != SRC / "store" / "catalog" / "schemas.py"
        for name, _ in constant.findall(path.read_text(encoding="utf-8"))
        if name not in allowed
    }
    assert not found, f"define these in store/catalog/schemas.py: {sorted(found)}"
