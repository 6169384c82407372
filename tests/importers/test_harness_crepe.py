"""CREPE: fixtures in the release's exact format (RAIVNLab/CREPE data/prod_hard_negatives.zip and
syst_hard_negatives.zip extracted: the CSVs crepe_eval_utils.py BaseCsvDataset reads, negatives
as Python list literals) with Visual Genome images split over VG_100K/ and VG_100K_2/ (the two
folders get_image_by_id hard-codes), scored by the transcription of get_one2many_rank /
get_one2many_metrics (tests/importers/official.py) and by autocomp: equal recall@k per file."""

from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.analysis.harness import harness_of, metrics, outcomes
from autocomp.config import ImportConfig
from autocomp.errors import UsageError
from autocomp.importers import import_benchmark
from tests.importers import official
from tests.importers.harness_support import run_scores
from tests.importers.test_harness_aro import jpeg

SYST = ("atom", "comp", "combined")


def fine_scorer(seed: int):
    """score(image, text) from 2^64 levels: no ties (the script's sort leaves ties unordered)."""

    def score(image: str, text: str) -> float:
        digest = hashlib.sha256(f"{seed}|{image}|{text}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    return score


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.fixture
def crepe_data(tmp_path):
    vg = tmp_path / "visual_genome"
    for image_id in range(1, 7):
        folder = vg / ("VG_100K" if image_id % 2 else "VG_100K_2")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{image_id}.jpg").write_bytes(jpeg(image_id))
    prod = tmp_path / "crepe" / "prod_hard_negatives"
    for kind, complexity in (("swap", 4), ("negate", 5)):
        rows = [
            {"image_id": 1 + k % 6, "caption": f"a {kind} caption {k}", "x": k % 7, "y": 3,
             "width": 25, "height": 20 + k % 4,
             "hard_negs": str([f"{kind} negative {k}.{j}" for j in range(2 + k % 11)])}
            for k in range(9)
        ]  # fmt: skip
        write_csv(prod / kind / f"prod_vg_hard_negs_{kind}_complexity_{complexity}.csv", rows)
    syst = tmp_path / "crepe" / "syst_hard_negatives"
    rows = [
        {"region_id": k, "caption": f"a red brick sidewalk {k}", "x": 2, "y": k, "width": 30,
         "height": 18, "image_id": 1 + k % 6, "image_path": f"VG_100K/{1 + k % 6}.jpg",
         **{f"valid_hard_negs_{s}": str([f"{s} {k}.{j}" for j in range(3 + j % 2)])
            for j, s in enumerate(SYST)}}
        for k in range(7)
    ]  # fmt: skip
    write_csv(syst / "syst_vg_hard_negs_seen_compounds_in_laion.csv", rows)
    return tmp_path / "crepe", vg


def script(csv_file: Path, negatives_key: str, score) -> dict[str, float]:
    """The open_clip eval's loop (one image per batch) with the transcribed rank and metrics."""
    import ast

    with csv_file.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    ranks = []
    for row in rows:
        texts = [str(row["caption"]), *ast.literal_eval(row[negatives_key])]
        ranks.append(official.crepe_rank(np.array([score(row["image_id"], t) for t in texts])))
    return official.crepe_metrics(ranks)


@pytest.mark.parametrize("seed", range(4))
def test_autocomp_equals_the_script_per_file(crepe_data, tmp_path, seed):
    source, vg = crepe_data
    out = tmp_path / "bench"
    report = import_benchmark("crepe", source, out, vg)
    assert report["groups_by_subset"] == {
        "prod-negate-complexity-5": 9, "prod-swap-complexity-4": 9,
        "syst-seen-laion-atom": 7, "syst-seen-laion-comp": 7, "syst-seen-laion-combined": 7,
    }  # fmt: skip
    score = fine_scorer(seed)
    harness = harness_of(out)
    image_id = lambda ref: Path(ref).stem  # noqa: E731 (the script looks images up by id)
    table = metrics(outcomes(harness, {"m": run_scores(out, score, image_id)}), "micro")
    got = {
        (r["subset"], r["metric"]): r["accuracy"]
        for r in table.to_pylist()
        if r["tie"] == "official" and r["score_type"] == "score"
    }
    files = {
        "prod-swap-complexity-4": ("prod_hard_negatives/swap/prod_vg_hard_negs_swap_complexity_4.csv", "hard_negs"),
        "prod-negate-complexity-5": ("prod_hard_negatives/negate/prod_vg_hard_negs_negate_complexity_5.csv", "hard_negs"),
        **{f"syst-seen-laion-{s}": ("syst_hard_negatives/syst_vg_hard_negs_seen_compounds_in_laion.csv",
                                    f"valid_hard_negs_{s}") for s in SYST},
    }  # fmt: skip
    for subset, (file, key) in files.items():
        expected = script(source / file, key, score)
        for k in (1, 3, 5, 10):
            assert got[(subset, f"R@{k}")] == pytest.approx(expected[f"R@{k}"], rel=1e-12)


def test_images_are_found_in_either_vg_folder_and_cropped_as_tf_crop(crepe_data, tmp_path):
    source, vg = crepe_data
    out = tmp_path / "bench"
    file = source / "prod_hard_negatives/swap/prod_vg_hard_negs_swap_complexity_4.csv"
    import_benchmark("crepe", file, out, vg)
    stored = pq.read_table(next((out / "data").glob("*.parquet"))).to_pylist()
    with file.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row, got in zip(rows, stored):
        folder = "VG_100K" if int(row["image_id"]) % 2 else "VG_100K_2"
        image = Image.open(vg / folder / f"{row['image_id']}.jpg").convert("RGB")
        x, y, w, h = (int(row[k]) for k in ("x", "y", "width", "height"))
        expected = image.crop((x, y, x + w, y + h))  # torchvision's TF.crop(image, y, x, h, w)
        crop = Image.open(io.BytesIO(got["image"]["bytes"]))
        assert np.array_equal(np.asarray(crop), np.asarray(expected))


def test_ties_rank_the_negative_first(crepe_data, tmp_path):
    source, vg = crepe_data
    out = tmp_path / "bench"
    import_benchmark("crepe", source / "syst_hard_negatives", out, vg)
    harness = harness_of(out)
    table = metrics(outcomes(harness, {"m": run_scores(out, lambda i, t: 0.5)}), "micro")
    r1 = {r["tie"]: r["accuracy"] for r in table.to_pylist()
          if r["subset"] == "all" and r["metric"] == "R@1"}  # fmt: skip
    assert r1 == {"official": 0.0, "strict": 0.0, "lenient": 1.0}


def test_a_file_of_another_benchmark_names_the_columns(tmp_path, crepe_data):
    _, vg = crepe_data
    bad = tmp_path / "prod_vg_hard_negs_swap_complexity_4.csv"
    write_csv(bad, [{"image_id": 1, "caption": "a", "negative_caption": "b"}])
    with pytest.raises(UsageError, match="not a CREPE retrieval file.*hard_negs"):
        import_benchmark("crepe", bad, tmp_path / "out", vg)
    code = tmp_path / "x" / "prod_vg_hard_negs_swap_complexity_4.csv"
    write_csv(code, [{"image_id": 1, "caption": "a", "x": 0, "y": 0, "width": 2, "height": 2,
                      "hard_negs": "__import__('os').getcwd()"}])  # fmt: skip
    with pytest.raises(UsageError, match="not a list literal"):
        import_benchmark("crepe", code, tmp_path / "out", vg)
    assert not (tmp_path / "out").exists()


def test_a_missing_image_stops_or_is_dropped_with_skip_missing(crepe_data, tmp_path):
    source, vg = crepe_data
    (vg / "VG_100K_2" / "2.jpg").unlink()
    file = source / "prod_hard_negatives/swap/prod_vg_hard_negs_swap_complexity_4.csv"
    with pytest.raises(UsageError, match="2.jpg.*is missing"):
        import_benchmark("crepe", file, tmp_path / "out", vg)
    report = import_benchmark("crepe", file, tmp_path / "out", vg, ImportConfig(skip_missing=True))
    assert report["groups"] == 9 - sum(1 for k in range(9) if 1 + k % 6 == 2)
