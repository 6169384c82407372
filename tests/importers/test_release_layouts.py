"""Every layout the Auto-Comp release's own scripts read or write imports (the 12 hub repos of
its evaluation script, the generation scripts' JSON with its two image folders); captions are
kept as written in the positive and every negative; bad sources are refused or dropped with
their reason (issue 24 class 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.config import ImportConfig
from autocomp.errors import UsageError
from autocomp.importers import import_benchmark
from autocomp.importers.layouts import condition_in_name

from .conftest import HUB_REPOS, HUB_ROWS, JSON_ITEMS, hub_repo, json_release, webp


def _rows(out: Path) -> list[dict]:
    parts = sorted((out / "data").glob("test-*.parquet"))
    return pa.concat_tables(pq.read_table(p) for p in parts).to_pylist()


@pytest.mark.parametrize("repo, task_type, n, sources", HUB_REPOS, ids=[r[0] for r in HUB_REPOS])
def test_every_hub_repo_of_the_evaluation_script_imports(tmp_path, repo, task_type, n, sources):
    source = hub_repo(tmp_path, repo, task_type, n, sources)
    report = import_benchmark("autocomp-release", source, tmp_path / "out")
    rows = _rows(tmp_path / "out")
    expected = len(HUB_ROWS[(task_type, n)])
    assert report["family"] == task_type and report["conditions"] == sources
    assert report["layout"] == ("paired" if len(sources) == 2 else "single")
    assert report["samples"] == expected * len(sources) == len(rows)
    assert report["rows_dropped"] == {} and report["samples_dropped"] == {}
    assert report["images_decoded"] == len(rows)
    assert {r["condition"] for r in rows} == set(sources)
    assert all(r["paired"] == (len(sources) == 2) for r in rows)
    for r in rows:  # the caption as the release wrote it; images embedded as they were
        objects, labels, handmade, llm = HUB_ROWS[(task_type, n)][int(r["release_id"])]
        assert (
            r["caption"]
            == r["release_caption"]
            == (handmade if r["condition"] == "minimal" else llm)
        )
        assert r["image"]["bytes"] == webp(2 * int(r["release_id"]) + (r["condition"] != "minimal"))
        assert r["caption"] not in r["swap_negatives"] and len(r["swap_negatives"]) >= 1


def test_the_condition_of_a_caption_image_source_comes_from_its_name_or_the_option(tmp_path):
    source = hub_repo(tmp_path, "AutoComp/AutoComp-Minimal-N2-C", "color", 2, ["minimal"])
    plain = tmp_path / "download"
    source.rename(plain)  # a name that says no condition
    with pytest.raises(UsageError, match="--condition minimal or --condition contextual"):
        import_benchmark("autocomp-release", plain, tmp_path / "out")
    config = ImportConfig(condition="contextual")
    report = import_benchmark("autocomp-release", plain, tmp_path / "out", config=config)
    assert report["conditions"] == ["contextual"]
    again = hub_repo(tmp_path, "AutoComp/AutoComp-Minimal-N2-C", "color", 2, ["minimal"])
    with pytest.raises(UsageError, match="says minimal"):
        import_benchmark("autocomp-release", again, tmp_path / "x", config=config)
    assert condition_in_name(Path("/d/minimal-runs/AutoComp-Contextual-N3-P")) == "contextual"
    assert condition_in_name(Path("/d/AutoComp-Paired-N2-C")) is None


def test_one_condition_of_a_paired_repo(tmp_path):
    source = hub_repo(tmp_path, "AutoComp/AutoComp-Paired-N2-C", "color", 2,
                      ["minimal", "contextual"])  # fmt: skip
    report = import_benchmark("autocomp-release", source, tmp_path / "out",
                              config=ImportConfig(condition="contextual"))  # fmt: skip
    assert report["conditions"] == ["contextual"] and report["samples"] == 2
    assert not any(r["paired"] for r in _rows(tmp_path / "out"))


def test_minimal_and_contextual_column_names_hf_benchmarks_reads(tmp_path):
    source = hub_repo(tmp_path, "AutoComp/AutoComp-Paired-N2-C", "color", 2,
                      ["minimal", "contextual"])  # fmt: skip
    part = source / "data" / "train-00000-of-00001.parquet"
    table = pq.read_table(part)
    renamed = [c.replace("handmade_", "minimal_").replace("llm_", "contextual_")
               for c in table.column_names]  # fmt: skip
    pq.write_table(table.rename_columns(renamed), part)
    report = import_benchmark("autocomp-release", source, tmp_path / "out")
    assert report["samples"] == 4 and report["paired_concepts"] == 2


def test_the_json_the_scripts_write_with_both_image_folders(tmp_path):
    source, images = json_release(tmp_path)
    report = import_benchmark("autocomp-release", source, tmp_path / "out", images)
    assert report["layout"] == "json" and report["family"] == "color"
    assert report["samples"] == 6 and report["paired_concepts"] == 3
    rows = {(r["release_id"], r["condition"]): r for r in _rows(tmp_path / "out")}
    for item in JSON_ITEMS:
        for condition, kind in (("minimal", "handmade"), ("contextual", "llm")):
            r = rows[(str(item["id"]), condition)]
            assert r["image"]["path"] == f"{kind}/concept_{item['id']:05d}_{kind}.webp"
            assert r["image"]["bytes"] == (images / r["image"]["path"]).read_bytes()
            assert r["caption"] == item[f"{kind}_caption"]
    assert rows[("2", "minimal")]["objects"] == ["sneakers", "cup"]
    # the JSON in a folder of its own is the same source; --images is required
    with pytest.raises(UsageError, match="handmade/ and llm/"):
        import_benchmark("autocomp-release", source, tmp_path / "o2")


def test_one_image_folder_of_the_json_is_looked_in_too(tmp_path):
    source, images = json_release(tmp_path)
    with pytest.raises(UsageError, match="llm_image.*missing.*--skip-missing"):
        import_benchmark("autocomp-release", source, tmp_path / "out", images / "handmade")
    config = ImportConfig(skip_missing=True)
    report = import_benchmark("autocomp-release", source, tmp_path / "out", images / "handmade",
                              config)  # fmt: skip
    assert report["samples_by_condition"] == {"minimal": 3}
    assert report["samples_dropped"] == {"contextual: image missing": 3}


def test_plural_and_renamed_words_keep_their_grammar_in_every_negative(tmp_path):
    source, images = json_release(tmp_path)
    import_benchmark("autocomp-release", source, tmp_path / "out", images)
    rows = {(r["release_id"], r["condition"]): r for r in _rows(tmp_path / "out")}
    cookies = rows[("1", "contextual")]
    assert cookies["objects"] == ["cookie", "picture frame"]  # the concept: our names
    assert cookies["caption"] == "Some brown cookies are piled next to a gold frame."
    assert cookies["swap_negatives"] == ["Some gold cookies are piled next to a brown frame."]
    for negative in cookies["confusion_negatives"]:
        assert "cookie " not in negative and "picture frame" not in negative
        assert negative.startswith("Some ") and negative.endswith(".")
    assert len(set(cookies["confusion_negatives"])) == 15
    grey = rows[("4", "contextual")]
    assert grey["attributes"] == ["gray", "orange"]
    assert grey["swap_negatives"] == ["An orange bowl holds a grey pen on a desk."]
    sneakers = rows[("2", "minimal")]
    assert "a pair of blue sneakers, and a red cup" in sneakers["swap_negatives"][0]


def test_relations_keep_their_words(tmp_path):
    source = hub_repo(tmp_path, "AutoComp/AutoComp-Contextual-N2-P", "position", 2,
                      ["contextual"])  # fmt: skip
    import_benchmark("autocomp-release", source, tmp_path / "out")
    (row,) = _rows(tmp_path / "out")
    assert row["attributes"] == ["under"] and row["release_labels"] == ["below"]
    assert row["caption"] == "An old clock sits below a leather couch in the attic."
    assert row["swap_negatives"] == ["An old couch sits below a leather clock in the attic."]


def _json_with(tmp_path: Path, changes: dict[int, dict]) -> tuple[Path, Path]:
    items = [{**item, **changes.get(i, {})} for i, item in enumerate(JSON_ITEMS)]
    return json_release(tmp_path, items)


def test_captions_that_cannot_be_kept_as_written_are_dropped_with_their_reason(tmp_path):
    source, images = _json_with(tmp_path, {
        0: {"llm_caption": "Some brown cookies and one brown cookie by a gold frame."},
        1: {"llm_caption": "An red sneakers sits next to a blue cup."},
        2: {"llm_caption": "   "},
    })  # fmt: skip
    report = import_benchmark("autocomp-release", source, tmp_path / "out", images)
    assert report["samples_dropped"] == {
        "contextual: caption names cookie two ways": 1,
        "contextual: caption would change when rebuilt (an article or 'pair of')": 1,
        "contextual: no caption": 1,
    }
    assert report["samples"] == 3 and report["paired_concepts"] == 0


def test_a_json_id_twice_is_dropped_and_counted(tmp_path):
    items = [*JSON_ITEMS, {**JSON_ITEMS[0], "objects": ["Hat", "Vase"]}]
    source, images = json_release(tmp_path, items)
    report = import_benchmark("autocomp-release", source, tmp_path / "out", images)
    assert report["rows_dropped"] == {"duplicate id (its images are an earlier row's)": 1}


@pytest.mark.parametrize(
    "body, words",
    [
        ({"id": 1}, "non-empty JSON list"),
        ([{**JSON_ITEMS[0], "id": "1"}], "not a whole number"),
        ([JSON_ITEMS[0], {**JSON_ITEMS[1], "task_type": "position"}], "mixes task types"),
        ([{**JSON_ITEMS[0], "task_type": "size"}], "must be color or position"),
        ("[" * 100000 + "]" * 100000, "nested too deeply"),
    ],
)
def test_bad_json_is_refused(tmp_path, body, words):
    source, images = json_release(tmp_path)
    source.write_text(body if isinstance(body, str) else json.dumps(body))
    with pytest.raises(UsageError, match=words):
        import_benchmark("autocomp-release", source, tmp_path / "out", images)
    assert not (tmp_path / "out").exists()


def test_an_image_that_passes_its_header_check_but_does_not_decode(tmp_path):
    source, images = json_release(tmp_path)
    path = images / "llm" / "concept_00002_llm.webp"
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])  # the RIFF/WEBP header intact, the data cut
    with pytest.raises(UsageError, match="row 1 llm_image.*does not decode"):
        import_benchmark("autocomp-release", source, tmp_path / "out", images)
    config = ImportConfig(skip_missing=True)
    report = import_benchmark("autocomp-release", source, tmp_path / "out", images, config)
    assert report["samples_dropped"] == {"contextual: image does not decode": 1}
    assert report["samples"] == 5


def test_an_embedded_image_that_does_not_decode(tmp_path):
    source = hub_repo(tmp_path, "AutoComp/AutoComp-Minimal-N2-C", "color", 2, ["minimal"])
    part = source / "data" / "train-00000-of-00001.parquet"
    table = pq.read_table(part)
    images = table["image"].to_pylist()
    images[1] = {"bytes": images[1]["bytes"][:30], "path": images[1]["path"]}
    index = table.schema.get_field_index("image")
    pq.write_table(table.set_column(index, table.schema.field("image"),
                                    pa.array(images, table.schema.field("image").type)), part)  # fmt: skip
    with pytest.raises(UsageError, match="concept_00002_handmade.webp does not decode"):
        import_benchmark("autocomp-release", source, tmp_path / "out")


def test_a_datasets_folder_naming_files_outside_itself_is_refused(tmp_path):
    import datasets

    from .conftest import COLOR_ROWS, release_table

    saved = tmp_path / "saved"
    datasets.Dataset(release_table(COLOR_ROWS[:2], "colors")).save_to_disk(str(saved))
    state = json.loads((saved / "state.json").read_text())
    outside = tmp_path / "elsewhere.arrow"
    (saved / state["_data_files"][0]["filename"]).rename(outside)
    for name in ("../elsewhere.arrow", str(outside)):
        state["_data_files"][0]["filename"] = name
        (saved / "state.json").write_text(json.dumps(state))
        with pytest.raises(UsageError, match="outside its folder"):
            import_benchmark("autocomp-release", saved, tmp_path / "out")


def test_two_files_with_one_base_name_are_named_by_their_paths(tmp_path):
    from .conftest import COLOR_ROWS, release_table

    table = release_table(COLOR_ROWS[:2], "colors")
    for folder, part in (("a", table), ("b", table.drop_columns(["swap_negatives"]))):
        (tmp_path / "src" / folder).mkdir(parents=True)
        pq.write_table(part, tmp_path / "src" / folder / "train-00000-of-00001.parquet")
    with pytest.raises(UsageError) as caught:
        import_benchmark("autocomp-release", tmp_path / "src", tmp_path / "out")
    said = str(caught.value)
    assert "b/train-00000-of-00001.parquet" in said and "a/train-00000-of-00001.parquet" in said


def test_only_a_repo_name_says_the_condition_never_an_enclosing_folder(tmp_path):
    # a Minimal-only repo copied under a folder whose name says "contextual": not Contextual
    trials = tmp_path / "contextual-trials"
    trials.mkdir()
    source = hub_repo(trials, "AutoComp/AutoComp-Minimal-N2-C", "color", 2, ["minimal"])
    report = import_benchmark("autocomp-release", source, tmp_path / "out")
    assert report["conditions"] == ["minimal"]
    plain = hub_repo(trials, "me/my-copy", "color", 2, ["minimal"])  # the repo's name says none
    with pytest.raises(UsageError, match="--condition minimal or --condition contextual"):
        import_benchmark("autocomp-release", plain, tmp_path / "out2")
    assert not (tmp_path / "out2").exists()
    assert condition_in_name(Path("/d/contextual-runs/minimal/data")) is None
    cache = Path("/c/datasets--AutoComp--AutoComp-Contextual-N3-P/snapshots/0a1b/data")
    assert condition_in_name(cache) == "contextual"


def test_two_column_sets_of_one_condition_are_refused_not_one_dropped(tmp_path):
    source = hub_repo(tmp_path, "AutoComp/AutoComp-Paired-N2-C", "color", 2,
                      ["minimal", "contextual"])  # fmt: skip
    part = source / "data" / "train-00000-of-00001.parquet"
    table = pq.read_table(part)
    table = table.append_column("minimal_caption", table["handmade_caption"])
    table = table.append_column("minimal_image", table["handmade_image"])
    pq.write_table(table, part)
    with pytest.raises(UsageError, match="both handmade_caption and minimal_caption"):
        import_benchmark("autocomp-release", source, tmp_path / "out")
    assert not (tmp_path / "out").exists()
