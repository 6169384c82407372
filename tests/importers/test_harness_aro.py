"""ARO VG-Relation and VG-Attribution: fixtures in the release's exact format (ARO's root with
visual_genome_relation.json / visual_genome_attribution.json and images/, as
mertyg/vision-language-models-are-bows dataset_zoo/aro_datasets.py reads them), scored by the
transcription of evaluate_scores and the notebook's macro (tests/importers/official.py) and by
autocomp: equal, ties included (np.argmax over [false, true]: a tie is wrong)."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.analysis.harness import harness_of, metrics, outcomes
from autocomp.config import ImportConfig
from autocomp.errors import UsageError
from autocomp.importers import import_benchmark
from tests.importers import official
from tests.importers.harness_support import run_scores, tied_scorer

RELATIONS = ["on"] * 6 + ["above"] * 5 + ["near"] * 3 + ["wearing"] * 4  # near: symmetric
PAIRS = [("red", "wooden")] * 30 + [("white", "small")] * 26 + [("big", "old")] * 5


def jpeg(seed: int) -> bytes:
    """A 40 x 30 image whose every pixel differs (a crop's offset shows)."""
    pixels = np.arange(40 * 30 * 3, dtype=np.uint32).reshape(30, 40, 3) * (seed + 3) % 256
    buffer = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8), "RGB").save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def item(k: int, **fields) -> dict:
    return {
        "image_id": str(k % 4), "image_path": f"{k % 4}.jpg", "bbox_x": k % 5, "bbox_y": 2,
        "bbox_w": 20 + k % 3, "bbox_h": 15, **fields,
    }  # fmt: skip


@pytest.fixture
def aro_root(tmp_path):
    root = tmp_path / "aro"
    (root / "images").mkdir(parents=True)
    for i in range(4):
        (root / "images" / f"{i}.jpg").write_bytes(jpeg(i))
    relation = [
        item(k, relation_name=r, obj1_name="cup", obj2_name="table",
             true_caption=f"the cup is {r} the table", false_caption=f"the table is {r} the cup")
        for k, r in enumerate(RELATIONS)
    ]  # fmt: skip
    relation[-1]["bbox_x"] = 35  # a box past the image's edge: PIL pads it
    attribution = [
        item(k, attributes=[a, b], obj1_name="chair", obj2_name="table",
             true_caption=f"the {a} chair and the {b} table",
             false_caption=f"the {b} chair and the {a} table")
        for k, (a, b) in enumerate(PAIRS)
    ]  # fmt: skip
    (root / "visual_genome_relation.json").write_text(json.dumps(relation))
    (root / "visual_genome_attribution.json").write_text(json.dumps(attribution))
    return root


def script_scores(items: list[dict], score) -> np.ndarray:
    """N x 1 x 2 in the script's option order [false, true] (aro_datasets.py:63)."""
    return np.array(
        [[[score(i["image_path"], i["false_caption"]), score(i["image_path"], i["true_caption"])]]
         for i in items]
    )  # fmt: skip


def headline(out, score, tie="official"):
    harness = harness_of(out)
    table = metrics(outcomes(harness, {"m": run_scores(out, score)}), harness.aggregate)
    return {
        r["subset"]: r["accuracy"]
        for r in table.to_pylist()
        if r["tie"] == tie and r["score_type"] == "score" and r["metric"] == "accuracy"
    }


@pytest.mark.parametrize("seed", range(6))
def test_vg_relation_equals_the_authors_macro(aro_root, tmp_path, seed):
    out = tmp_path / "vgr"
    report = import_benchmark("aro-vg-relation", aro_root, out, aro_root / "images")
    assert report["groups"] == len(RELATIONS) - 3 and report["tie"] == "strict"
    assert report["groups_dropped"] == {
        "near: a symmetric relation (the authors' notebook leaves it out)": 3
    }
    score = tied_scorer(seed)
    items = json.loads((aro_root / "visual_genome_relation.json").read_text())
    expected = official.aro_vg_relation(script_scores(items, score), RELATIONS)
    assert headline(out, score)["all"] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_vg_attribution_equals_the_authors_macro(aro_root, tmp_path, seed):
    out = tmp_path / "vga"
    report = import_benchmark("aro-vg-attribution", aro_root, out, aro_root / "images")
    assert report["groups_by_subset"] == {"red_wooden": 30, "white_small": 26}
    score = tied_scorer(seed)
    items = json.loads((aro_root / "visual_genome_attribution.json").read_text())
    expected = official.aro_vg_attribution(script_scores(items, score), [list(p) for p in PAIRS])
    got = headline(out, score)
    assert got["all"] == pytest.approx(expected, rel=1e-12)
    assert "all (micro)" in got  # what a harness pooling the items would report


def test_a_tie_is_wrong_as_argmax_over_false_true_makes_it(aro_root, tmp_path):
    out = tmp_path / "vgr"
    import_benchmark("aro-vg-relation", aro_root, out, aro_root / "images")
    tied = headline(out, lambda image, text: 0.5)
    assert tied["all"] == 0.0
    assert headline(out, lambda image, text: 0.5, "lenient")["all"] == 1.0


def test_each_image_is_the_crop_the_loader_makes(aro_root, tmp_path):
    out = tmp_path / "vgr"
    import_benchmark("aro-vg-relation", aro_root, out, aro_root / "images")
    rows = pq.read_table(next((out / "data").glob("*.parquet"))).to_pylist()
    items = json.loads((aro_root / "visual_genome_relation.json").read_text())
    kept = [i for i in items if i["relation_name"] != "near"]
    assert len(rows) == len(kept)
    for row, it in zip(rows, kept):
        # aro_datasets.py:54-56, the loader's own two lines
        image = Image.open(aro_root / "images" / it["image_path"]).convert("RGB")
        image = image.crop((it["bbox_x"], it["bbox_y"], it["bbox_x"] + it["bbox_w"],
                            it["bbox_y"] + it["bbox_h"]))  # fmt: skip
        stored = Image.open(io.BytesIO(row["image"]["bytes"]))
        assert stored.size == image.size
        assert np.array_equal(np.asarray(stored), np.asarray(image))
        assert row["texts"] == [it["true_caption"], it["false_caption"]]


def test_the_other_aro_file_names_the_keys(aro_root, tmp_path):
    with pytest.raises(UsageError, match="holds ARO vg-attribution items.*relation_name"):
        import_benchmark(
            "aro-vg-relation", aro_root / "visual_genome_attribution.json", tmp_path / "o",
            aro_root / "images",
        )  # fmt: skip
    other = tmp_path / "sugarcrepe.json"
    other.write_text(json.dumps([{"filename": "x.jpg", "caption": "a", "negative_caption": "b"}]))
    with pytest.raises(UsageError, match="not an ARO VG file.*bbox_x"):
        import_benchmark("aro-vg-relation", other, tmp_path / "o", aro_root / "images")
    assert not (tmp_path / "o").exists()


def test_a_missing_image_stops_or_is_dropped_with_skip_missing(aro_root, tmp_path):
    (aro_root / "images" / "1.jpg").unlink()
    with pytest.raises(UsageError, match="1.jpg.*is missing.*--skip-missing"):
        import_benchmark("aro-vg-relation", aro_root, tmp_path / "o", aro_root / "images")
    assert not (tmp_path / "o").exists()
    report = import_benchmark(
        "aro-vg-relation", aro_root, tmp_path / "o", aro_root / "images",
        ImportConfig(skip_missing=True),
    )  # fmt: skip
    kept = [k for k, r in enumerate(RELATIONS) if r != "near"]
    assert report["groups"] == sum(1 for k in kept if k % 4 != 1)


@pytest.mark.slow
def test_a_real_run_gives_the_authors_macro_from_its_own_scores(aro_root, tmp_path):
    """The tiny random-weight CLIP through the score stage on the cropped VG-Relation import:
    the report's headline equals the script's macro fed the run's own scores."""
    from autocomp.analysis.harness import run_tables
    from autocomp.config import ScoreConfig
    from autocomp.scoring.stage import score

    run = tmp_path / "run"
    import_benchmark("aro-vg-relation", aro_root, run / "benchmark", aro_root / "images")
    score(["tiny-clip"], run / "benchmark", run / "results", ScoreConfig(device="cpu"))
    stored = pq.read_table(run / "results" / "tiny-clip" / "scores").to_pylist()
    cells = {(r["sample_id"], r["candidate_index"]): r["score"] for r in stored}
    rows = pq.read_table(next((run / "benchmark" / "data").glob("*.parquet"))).to_pylist()
    scores = np.array([[[cells[(r["sample_id"], 1)], cells[(r["sample_id"], 0)]]] for r in rows])
    relations = [r["subset"] for r in rows]
    tables = run_tables(run)
    assert tables is not None
    headline = [
        r["accuracy"] for r in tables["harness_metrics"].to_pylist()
        if r["subset"] == "all" and r["tie"] == "official" and r["score_type"] == "score"
    ]  # fmt: skip
    assert headline == [pytest.approx(official.aro_vg_relation(scores, relations), rel=1e-12)]
