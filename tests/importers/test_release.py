"""The Auto-Comp release importer: mapping, the unmapped report, pairing, candidate sets built as
our own negatives stage builds them, embedded images, and the folder layout `datasets` and
`fetch` read. (tests/importers/test_release_layouts.py: every layout of the release's scripts.)"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.config import ImportConfig, NegativesConfig
from autocomp.errors import UsageError
from autocomp.importers import import_benchmark
from autocomp.protocol.negatives import expected_counts
from autocomp.protocol.stages import negatives_stage
from autocomp.store.publish import fetch_benchmark
from autocomp.store.stores import open_store
from autocomp.store.tables import read_metadata

from .conftest import COLOR_KEPT, COLOR_ROWS, png, release_table, write_image_files


def _rows(out: Path) -> pa.Table:
    parts = sorted((out / "data").glob("test-*.parquet"))
    return pa.concat_tables(pq.read_table(p) for p in parts)


@pytest.fixture
def color_out(color_release, tmp_path) -> tuple[Path, dict]:
    out = tmp_path / "bench"
    return out, import_benchmark("autocomp-release", color_release, out)


def test_report_counts_what_was_mapped_and_what_was_dropped(color_out):
    out, report = color_out
    assert report == json.loads((out / "import_report.json").read_text())
    assert report["family"] == "color" and report["rows"] == len(COLOR_ROWS)
    assert report["rows_dropped"] == {
        "unmapped object": 1,
        "unmapped color": 1,
        "duplicate concept (the same scene as an earlier row)": 1,
    }
    assert report["samples_dropped"] == {"contextual: caption does not bind (unbound_mention)": 1}
    assert report["samples"] == sum(COLOR_KEPT.values()) == 9
    assert report["concepts"] == 5 and report["paired_concepts"] == 4
    assert report["objects"]["unmapped"] == {"Chips": 1}
    assert report["attributes"]["unmapped"] == {"white": 1}
    assert report["objects"]["normalised"] == {
        "Cookies": {"to": "cookie", "rule": "renamed"},
        "Frame": {"to": "picture frame", "rule": "renamed"},
    }
    assert report["attributes"]["normalised"] == {"grey": {"to": "gray", "rule": "synonym"}}


def test_rows_carry_our_names_and_pair_like_curate(color_out):
    out, _ = color_out
    table = _rows(out)
    rows = table.to_pylist()
    kept = {}
    for r in rows:
        kept[r["release_row"]] = kept.get(r["release_row"], 0) + 1
        assert r["sample_id"] == f"{r['concept_id']}/{r['condition']}"
        assert r["release_id"] == str(r["release_row"] + 1)
    assert kept == COLOR_KEPT
    by_row = {(r["release_row"], r["condition"]): r for r in rows}
    cookies = by_row[(1, "contextual")]
    assert cookies["objects"] == ["cookie", "picture frame"]
    assert cookies["attributes"] == ["brown", "gold"]
    assert cookies["release_caption"] == COLOR_ROWS[1][3]
    assert cookies["caption"] == COLOR_ROWS[1][3]  # kept as written: "brown cookies"
    assert (
        by_row[(7, "minimal")]["caption"] == "a grey bowl, and an orange pen on a white background."
    )
    assert by_row[(7, "minimal")]["attributes"] == ["gray", "orange"]
    assert by_row[(1, "minimal")]["concept_id"] == cookies["concept_id"]
    assert all(r["paired"] == (r["release_row"] != 4) for r in rows)
    assert sorted(set(table["condition"].to_pylist())) == ["contextual", "minimal"]


def test_candidate_sets_are_what_our_negatives_stage_builds(color_out, tmp_path):
    out, _ = color_out
    table = _rows(out)
    # rows whose captions write our own names: exactly our negatives stage's sets
    ours = pa.array([r in (0, 4, 6) for r in table["release_row"].to_pylist()])
    same = table.filter(ours)
    concepts = same.select(["concept_id", "family", "n", "objects", "attributes"]).append_column(
        "caption", same["source_caption"]
    )
    pq.write_table(concepts, tmp_path / "concepts.parquet")
    negatives_stage(
        tmp_path / "concepts.parquet", tmp_path / "ours.parquet", NegativesConfig(workers=1)
    )
    built = pq.read_table(tmp_path / "ours.parquet")
    for column in ("caption", "swap_negatives", "swap_in_confusion", "swap_same_scene",
                   "confusion_negatives", "confusion_same_scene", "confusion_arrangements"):  # fmt: skip
        assert same[column].to_pylist() == built[column].to_pylist(), column
    # the others: the caption's own words in the same holes
    cookies = next(
        r for r in table.to_pylist() if (r["release_row"], r["condition"]) == (1, "minimal")
    )
    assert cookies["swap_negatives"] == ["a gold cookies, and a brown frame on a white background."]
    for r in table.to_pylist():
        n = r["n"]
        swap, confusion = expected_counts(False, n)
        assert len(r["swap_negatives"]) == math.factorial(n) - 1 == swap
        assert len(r["confusion_negatives"]) == n ** (2 * n) - 1 == confusion
        assert len(set(r["confusion_negatives"])) == confusion  # no duplicates
        assert r["caption"] not in r["confusion_negatives"]
        assert (
            r["swap_negatives"]
            != release_table(COLOR_ROWS, "colors")["swap_negatives"][r["release_row"]].as_py()
        )
    first = next(
        r for r in table.to_pylist() if r["release_row"] == 0 and r["condition"] == "minimal"
    )
    assert first["swap_negatives"] == ["a blue chair, and a red cup on a white background."]


def test_images_are_embedded_and_the_folder_is_datasets_readable(color_out, tmp_path):
    out, _ = color_out
    table = _rows(out)
    assert table.schema.field("image").type == pa.struct(
        [("bytes", pa.binary()), ("path", pa.string())]
    )
    for r in table.to_pylist():
        kind = "handmade" if r["condition"] == "minimal" else "llm"
        seed = 2 * r["release_row"] + (kind == "llm")
        assert r["image"]["bytes"] == png(seed)
        assert r["image"]["path"] == f"{kind}/concept_{r['release_row'] + 1:05d}_{kind}.png"
    part = sorted((out / "data").glob("*.parquet"))[0]
    meta = read_metadata(part)
    assert meta["table"] == "benchmark" and meta["imported"] == "autocomp-release"
    assert "color" in meta["families"] and meta["report"]["samples"] == 9
    card = (out / "README.md").read_text()
    assert "Auto-Comp public release" in card and "| color | 2 | minimal | 4 |" in card
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "data", "import_report.json"]

    import datasets

    loaded = datasets.load_dataset(
        "parquet", data_files=str(out / "data" / "test-*.parquet"), split="train",
        cache_dir=str(tmp_path / "hf"),
    )  # fmt: skip
    assert loaded.num_rows == 9
    assert loaded[0]["image"].size == (8, 8)  # a PIL image: the features metadata holds

    store = tmp_path / "store"
    open_store(str(store)).put("benchmarks/imported", out, {"stage": "import"})
    fetched = fetch_benchmark(str(store), "imported", tmp_path / "work", tmp_path / "one.parquet")
    assert pq.read_table(fetched).num_rows == 9


def test_position_release_from_a_parquet_folder(position_release, tmp_path):
    report = import_benchmark("autocomp-release", position_release, tmp_path / "pos")
    assert report["family"] == "position"
    assert report["rows_dropped"] == {"unmapped object": 1}
    assert report["relations"]["normalised"] == {"below": {"to": "under", "rule": "synonym"}}
    table = _rows(tmp_path / "pos")
    assert table.num_rows == 4
    for r in table.to_pylist():
        swap, confusion = expected_counts(True, r["n"])
        assert len(r["swap_negatives"]) == swap and len(r["confusion_negatives"]) == confusion
    clock = next(
        r for r in table.to_pylist() if r["release_row"] == 1 and r["condition"] == "minimal"
    )
    assert clock["attributes"] == ["under"]
    assert clock["caption"] == "A clock is below a couch on a white background."
    assert clock["swap_negatives"] == ["A couch is below a clock on a white background."]


def test_a_datasets_save_to_disk_folder_with_image_files(tmp_path):
    import datasets

    table = release_table(COLOR_ROWS[:2], "colors", images="path")
    datasets.Dataset(table).save_to_disk(str(tmp_path / "saved"))
    write_image_files(COLOR_ROWS[:2], tmp_path / "images")
    report = import_benchmark(
        "autocomp-release", tmp_path / "saved", tmp_path / "out", tmp_path / "images"
    )
    assert report["samples"] == 4
    assert [r["image"]["bytes"] for r in _rows(tmp_path / "out").to_pylist()] == [
        png(i) for i in range(4)
    ]


def test_missing_images_stop_the_import_or_are_counted(tmp_path):
    table = release_table(COLOR_ROWS[:2], "colors", images="path")
    pq.write_table(table, tmp_path / "r.parquet")
    write_image_files(COLOR_ROWS[:2], tmp_path / "images")
    (tmp_path / "images" / "llm" / "concept_00002_llm.png").unlink()
    with pytest.raises(UsageError, match="llm_image"):
        import_benchmark(
            "autocomp-release", tmp_path / "r.parquet", tmp_path / "out", tmp_path / "images"
        )
    assert not (tmp_path / "out").exists()
    report = import_benchmark("autocomp-release", tmp_path / "r.parquet", tmp_path / "out",
                              tmp_path / "images", ImportConfig(skip_missing=True))  # fmt: skip
    assert report["samples_dropped"] == {"contextual: image missing": 1}
    rows = _rows(tmp_path / "out").to_pylist()
    assert [(r["release_row"], r["paired"]) for r in rows] == [(0, True), (0, True), (1, False)]


def test_the_folder_is_replaced_only_with_force_and_never_half_written(color_release, tmp_path):
    out = tmp_path / "bench"
    import_benchmark("autocomp-release", color_release, out)
    before = sorted(p.name for p in (out / "data").iterdir())
    with pytest.raises(UsageError, match="--force"):
        import_benchmark("autocomp-release", color_release, out)
    broken = tmp_path / "broken.parquet"
    table = release_table(COLOR_ROWS[:1], "colors")
    bad = pa.array(
        [{"bytes": b"not an image", "path": "x.png"}], table.schema.field("llm_image").type
    )
    pq.write_table(
        table.set_column(table.schema.get_field_index("llm_image"), "llm_image", bad), broken
    )
    with pytest.raises(UsageError, match="x.png does not decode"):
        import_benchmark("autocomp-release", broken, out, config=ImportConfig(force=True))
    assert sorted(p.name for p in (out / "data").iterdir()) == before  # the old folder stays
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    import_benchmark("autocomp-release", color_release, out, config=ImportConfig(force=True))
