"""Curation on hand-made render and verdict tables: the sets and the survival table."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.config import CurateConfig
from autocomp.errors import UsageError
from autocomp.generation.curate import curate_stage
from autocomp.generation.validate import CHECKS
from autocomp.store.catalog.schemas import RENDER_SCHEMA, VERDICTS_SCHEMA
from autocomp.store.shards import read_stage, shard_of, shard_path
from autocomp.store.tables import write_table

# concept -> (minimal outcomes, contextual outcomes) over image, objects, background, attributes
PLAN = {
    "c1": ("pppp", "pp-p"),  # both pass: paired
    "c2": ("pppf", "pp-p"),  # minimal fails attributes: contextual only
    "c3": ("ppfs", "pf-s"),  # minimal fails background, contextual fails objects
    "c4": ("fsss", "pp-f"),  # minimal image rejected, contextual fails attributes
}
CODES = {"p": "pass", "f": "fail", "s": "skipped", "-": "n/a"}


def _write(tmp_path):
    render, verdicts = [], []
    for concept, outcomes in PLAN.items():
        for condition, plan in zip(("minimal", "contextual"), outcomes):
            sid = f"{concept}/{condition}"
            render.append({
                "sample_id": sid, "concept_id": concept, "family": "color", "n": 2,
                "objects": ["cup", "lamp"], "attributes": ["red", "blue"],
                "condition": condition, "caption": "A red cup and a blue lamp.",
                "caption_status": "accepted", "image": f"images/{sid}.png", "seed": 1,
                "renderer": "x", "width": 8, "height": 8, "sha256": "0", "reused": False,
            })  # fmt: skip
            for step, (check, code) in enumerate(zip(CHECKS, plan), 1):
                verdicts.append({
                    "sample_id": sid, "concept_id": concept, "family": "color", "n": 2,
                    "condition": condition, "check": check, "step": step,
                    "outcome": CODES[code], "reason": "", "detail": "",
                })  # fmt: skip
    (tmp_path / "render").mkdir()
    (tmp_path / "verdicts").mkdir()
    write_table(pa.Table.from_pylist(render, RENDER_SCHEMA),
                shard_path(tmp_path / "render", "render", 0, 1), {"config": {}})  # fmt: skip
    write_table(pa.Table.from_pylist(verdicts, VERDICTS_SCHEMA),
                shard_path(tmp_path / "verdicts", "verdicts", 0, 1), {"config": {}})  # fmt: skip
    return tmp_path / "render", tmp_path / "verdicts"


def test_sets_by_hand(tmp_path):
    render, verdicts = _write(tmp_path)
    counts = curate_stage(render, verdicts, tmp_path / "out")
    assert counts == {"samples": 8, "b_min": 1, "b_ctx": 2, "b_paired": 1, "kept": 3}
    rows = {
        r["sample_id"]: r for r in pq.read_table(tmp_path / "out" / "curated.parquet").to_pylist()
    }
    assert set(rows) == {"c1/minimal", "c1/contextual", "c2/contextual"}
    assert rows["c1/minimal"]["paired"] and rows["c1/contextual"]["paired"]
    assert not rows["c2/contextual"]["paired"] and rows["c2/contextual"]["in_ctx"]


def test_rejected_samples_are_kept_marked_with_their_first_failure(tmp_path):
    render, verdicts = _write(tmp_path)
    curate_stage(render, verdicts, tmp_path / "out", config=CurateConfig(keep_rejected=True))
    rows = {
        r["sample_id"]: r for r in pq.read_table(tmp_path / "out" / "curated.parquet").to_pylist()
    }
    assert len(rows) == 8
    assert {sid: r["failed_check"] for sid, r in rows.items() if not r["accepted"]} == {
        "c2/minimal": "attributes", "c3/minimal": "background", "c3/contextual": "objects",
        "c4/minimal": "image", "c4/contextual": "attributes",
    }  # fmt: skip


def test_survival_table_by_hand(tmp_path):
    render, verdicts = _write(tmp_path)
    curate_stage(render, verdicts, tmp_path / "out")
    table = pq.read_table(tmp_path / "out" / "survival.parquet").to_pylist()
    got = {(r["condition"], r["check"]): (r["entered"], r["passed"]) for r in table}
    assert got == {
        ("minimal", "image"): (4, 3), ("minimal", "objects"): (3, 3),
        ("minimal", "background"): (3, 2), ("minimal", "attributes"): (2, 1),
        ("contextual", "image"): (4, 4), ("contextual", "objects"): (4, 3),
        ("contextual", "attributes"): (3, 2),
    }  # fmt: skip
    cumulative = {(r["condition"], r["check"]): r["cumulative"] for r in table}
    assert cumulative[("minimal", "attributes")] == 0.25
    assert cumulative[("contextual", "attributes")] == 0.5


def test_unvalidated_samples_stop_curation(tmp_path):
    render, verdicts = _write(tmp_path)
    table = pq.read_table(shard_path(verdicts, "verdicts", 0, 1))
    keep = [sid != "c4/contextual" for sid in table.column("sample_id").to_pylist()]
    write_table(
        table.filter(pa.array(keep)), shard_path(verdicts, "verdicts", 0, 1), {"config": {}}
    )
    with pytest.raises(UsageError, match="no verdicts for 1 rendered sample"):
        curate_stage(render, verdicts, tmp_path / "out")


def test_shards_are_stable_and_readers_want_them_all(tmp_path):
    assert shard_of("color-n2-abc", 4) == shard_of("color-n2-abc", 4)
    spread = {shard_of(f"c{i}", 4) for i in range(100)}
    assert spread == {0, 1, 2, 3}
    with pytest.raises(UsageError, match="no such folder"):
        read_stage(tmp_path / "none", "render")
