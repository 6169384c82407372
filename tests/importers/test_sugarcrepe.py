"""The SugarCrepe importer: one 1-negative row per item, images embedded, bad items refused."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from autocomp.config import ImportConfig
from autocomp.errors import UsageError
from autocomp.importers import import_benchmark
from autocomp.store.tables import read_metadata

from .conftest import SUGARCREPE


def test_items_become_one_negative_rows(sugarcrepe, tmp_path):
    source, images = sugarcrepe
    report = import_benchmark("sugarcrepe", source, tmp_path / "out", images)
    assert report["files"] == ["replace_att.json", "swap_obj.json"]
    assert report["items"] == 4 and report["samples"] == 3
    assert report["samples_by_category"] == {"replace_att": 2, "swap_obj": 1}
    assert report["samples_dropped"] == {"replace_att: negative equals the positive": 1}
    part = tmp_path / "out" / "data" / "test-00000-of-00001.parquet"
    rows = pq.read_table(part).to_pylist()
    assert [r["sample_id"] for r in rows] == [
        "sugarcrepe-replace_att-0/contextual",
        "sugarcrepe-replace_att-1/contextual",
        "sugarcrepe-swap_obj-7/contextual",
    ]  # fmt: skip  (each item is its own concept: the unit the report's intervals resample)
    assert [r["concept_id"] for r in rows] == [r["sample_id"][: -len("/contextual")] for r in rows]
    swap = rows[2]
    item = SUGARCREPE["swap_obj"]["7"]
    assert swap["family"] == "sugarcrepe-swap_obj" and swap["n"] == 0
    assert swap["condition"] == "contextual" and swap["paired"] is False
    assert swap["caption"] == item["caption"]
    assert swap["swap_negatives"] == swap["confusion_negatives"] == [item["negative_caption"]]
    assert swap["swap_in_confusion"] == [0]
    assert swap["swap_same_scene"] == swap["confusion_same_scene"] == [False]
    assert swap["vary_attribute_negatives"] == swap["vary_object_negatives"] == []
    assert swap["swap_chance"] == swap["confusion_chance"] == 0.5
    assert swap["image"] == {
        "bytes": (images / item["filename"]).read_bytes(), "path": item["filename"]
    }  # fmt: skip
    meta = read_metadata(part)
    assert meta["imported"] == "sugarcrepe" and meta["report"]["samples"] == 3
    assert (
        "| sugarcrepe-replace_att | 0 | contextual | 2 |"
        in (tmp_path / "out" / "README.md").read_text()
    )
    assert json.loads((tmp_path / "out" / "import_report.json").read_text()) == report


def test_one_category_file_is_a_source(sugarcrepe, tmp_path):
    source, images = sugarcrepe
    report = import_benchmark("sugarcrepe", source / "swap_obj.json", tmp_path / "out", images)
    assert report["samples_by_category"] == {"swap_obj": 1}


def test_a_missing_image_is_named_or_skipped_and_counted(sugarcrepe, tmp_path):
    source, images = sugarcrepe
    (images / "000000000285.jpg").unlink()
    with pytest.raises(UsageError, match="000000000285.jpg.*--skip-missing"):
        import_benchmark("sugarcrepe", source, tmp_path / "out", images)
    assert not (tmp_path / "out").exists()
    config = ImportConfig(skip_missing=True)
    report = import_benchmark("sugarcrepe", source, tmp_path / "out", images, config)
    assert report["samples"] == 2
    assert report["samples_dropped"]["replace_att: image missing"] == 1


@pytest.mark.parametrize(
    "body, words",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"0": {"filename": "a.jpg", "caption": "x"}}', "negative_caption"),
        (
            '{"0": {"filename": "../../etc/passwd", "caption": "x", "negative_caption": "y"}}',
            "refused",
        ),
    ],
)
def test_bad_files_are_refused(sugarcrepe, tmp_path, body, words):
    source, images = sugarcrepe
    (source / "bad.json").write_text(body)
    with pytest.raises(UsageError, match=words):
        import_benchmark("sugarcrepe", source / "bad.json", tmp_path / "out", images)
    assert not (tmp_path / "out").exists()


def test_repeated_ids_empty_captions_and_undecodable_images_are_counted(sugarcrepe, tmp_path):
    source, images = sugarcrepe

    def item(caption: str, negative: str, filename: str = "000000000139.jpg") -> str:
        return json.dumps({"filename": filename, "caption": caption, "negative_caption": negative})

    body = (
        f'{{"0": {item("A red bus.", "A blue bus.")}, "0": {item("Another bus.", "No bus.")}, '
        f'"1": {item("", "A bus.")}, "2": {item("A bus.", " ")}, "3": {item("A", "B", "cut.jpg")}}}'
    )
    (source / "replace_att.json").write_text(body)
    whole = (images / "000000000139.jpg").read_bytes()
    (images / "cut.jpg").write_bytes(whole[: len(whole) // 2])  # header fine, data cut
    with pytest.raises(UsageError, match="cut.jpg.*does not decode.*--skip-missing"):
        import_benchmark("sugarcrepe", source / "replace_att.json", tmp_path / "out", images)
    config = ImportConfig(skip_missing=True)
    report = import_benchmark("sugarcrepe", source / "replace_att.json", tmp_path / "out",
                              images, config)  # fmt: skip
    assert report["samples"] == 1 and report["items"] == 5
    assert report["samples_dropped"] == {
        "replace_att: duplicate id (an earlier item has it)": 1,
        "replace_att: empty caption": 1,
        "replace_att: empty negative caption": 1,
        "replace_att: image does not decode": 1,
    }
    rows = pq.read_table(tmp_path / "out" / "data").to_pylist()
    assert [r["caption"] for r in rows] == ["A red bus."]  # the first of the repeated id
    assert json.loads((tmp_path / "out" / "import_report.json").read_text()) == report


def test_json_nested_too_deeply_is_refused(sugarcrepe, tmp_path):
    source, images = sugarcrepe
    (source / "deep.json").write_text('{"0": ' + "[" * 100000 + "]" * 100000 + "}")
    with pytest.raises(UsageError, match="nested too deeply"):
        import_benchmark("sugarcrepe", source / "deep.json", tmp_path / "out", images)
