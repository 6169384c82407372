"""SugarCrepe++: a fixture in the release's exact format (Sri-Harsha/scpp data/<subset>.json,
lists of id, filename, caption, caption2, negative_caption, with COCO images, as
VLMs/test_Variants_CLIP.py reads them), scored by the transcription of that script's ITT,
P1-Neg and P2-Neg (tests/importers/official.py) and by autocomp: equal per subset, ties
included (the script's `>`)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.analysis.harness import harness_of, metrics, outcomes
from autocomp.config import ImportConfig
from autocomp.errors import UsageError
from autocomp.importers import import_benchmark
from tests.importers import official
from tests.importers.harness_support import png, run_scores, tied_scorer

SUBSETS = {"swap_att": 7, "replace_rel": 5}


@pytest.fixture
def scpp_data(tmp_path):
    data, images = tmp_path / "scpp" / "data", tmp_path / "val2017"
    data.mkdir(parents=True)
    images.mkdir()
    for s, (subset, count) in enumerate(SUBSETS.items()):
        items = []
        for i in range(count):
            filename = f"{s * 100 + i:012d}.jpg"
            (images / filename).write_bytes(png(s * 100 + i))
            items.append({
                "id": i, "filename": filename,
                "caption": f"Blue bathroom with {i} white towels.",
                "caption2": f"The bathroom is blue and has {i} white towels.",
                "negative_caption": f"White bathroom with {i} blue towels.",
            })  # fmt: skip
        (data / f"{subset}.json").write_text(json.dumps(items, indent=1))
    return data, images


def script(data, score) -> dict[str, dict[str, float]]:
    """test_Variants_CLIP.py's loop over the subset files, its cosines given by `score`."""
    out = {}
    for file in sorted(data.glob("*.json")):
        cells = []
        for line in json.loads(file.read_text()):
            image = line["filename"]
            cells.append({
                "cos_p1": score(image, line["caption"]), "cos_p2": score(image, line["caption2"]),
                "cos_neg": score(image, line["negative_caption"]),
                "cos_p1p2": 0, "cos_p1_neg": 0, "cos_p2_neg": 0,
            })  # fmt: skip
        out[file.stem] = official.scpp(cells)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_autocomp_equals_the_script_per_subset(scpp_data, tmp_path, seed):
    data, images = scpp_data
    out = tmp_path / "bench"
    report = import_benchmark("sugarcrepe-pp", data, out, images)
    assert report["groups_by_subset"] == SUBSETS and report["tie"] == "strict"
    score = tied_scorer(seed)
    harness = harness_of(out)
    rows = metrics(outcomes(harness, {"m": run_scores(out, score)}), harness.aggregate)
    expected = script(data, score)
    got = {
        (r["subset"], r["metric"]): r["accuracy"]
        for r in rows.to_pylist()
        if r["tie"] == "official" and r["score_type"] == "score"
    }
    for subset, numbers in expected.items():
        for metric in ("itt", "p1_neg", "p2_neg"):
            assert got[(subset, metric)] == pytest.approx(numbers[metric], rel=1e-12)


def test_sugarcrepes_own_file_is_refused_naming_caption2(tmp_path, scpp_data):
    _, images = scpp_data
    sugarcrepe = tmp_path / "swap_att.json"  # SugarCrepe: an object id -> item, no caption2
    sugarcrepe.write_text(json.dumps({"0": {"filename": "a.jpg", "caption": "x",
                                            "negative_caption": "y"}}))  # fmt: skip
    with pytest.raises(UsageError, match="caption2"):
        import_benchmark("sugarcrepe-pp", sugarcrepe, tmp_path / "out", images)
    listed = tmp_path / "listed.json"
    listed.write_text(json.dumps([{"id": 0, "filename": "a.jpg", "caption": "x",
                                   "negative_caption": "y"}]))  # fmt: skip
    with pytest.raises(UsageError, match="lacks caption2.*SugarCrepe's file"):
        import_benchmark("sugarcrepe-pp", listed, tmp_path / "out", images)
    assert not (tmp_path / "out").exists()


def test_a_missing_image_stops_or_is_dropped_with_skip_missing(scpp_data, tmp_path):
    data, images = scpp_data
    (images / "000000000003.jpg").unlink()
    with pytest.raises(UsageError, match="000000000003.jpg.*is missing"):
        import_benchmark("sugarcrepe-pp", data, tmp_path / "out", images)
    report = import_benchmark(
        "sugarcrepe-pp", data, tmp_path / "out", images, ImportConfig(skip_missing=True)
    )
    assert report["groups"] == sum(SUBSETS.values()) - 1


def text_scores(folder, score) -> pa.Table:
    """The scores a run writes for text-only rows: each row's query text against its texts."""
    columns = ["sample_id", "texts", "query_text"]
    rows = pa.concat_tables(
        [pq.read_table(p, columns=columns) for p in sorted((folder / "data").glob("*.parquet"))]
    ).to_pylist()
    out = [
        {"sample_id": r["sample_id"], "candidate_index": t, "tokens": None,
         "score": score(r["query_text"], text)}
        for r in rows for t, text in enumerate(r["texts"])
    ]  # fmt: skip
    schema = pa.schema([("sample_id", pa.string()), ("candidate_index", pa.int32()),
                        ("score", pa.float64()), ("tokens", pa.int32())])  # fmt: skip
    return pa.Table.from_pylist(out, schema)


def symmetric(seed: int):
    """A tied, symmetric text-text score (as a cosine is)."""
    score = tied_scorer(seed)
    return lambda a, b: score(*sorted((a, b)))


@pytest.mark.parametrize("seed", range(6))
def test_the_text_only_task_equals_the_script(scpp_data, tmp_path, seed):
    data, images = scpp_data
    out = tmp_path / "tot"
    report = import_benchmark("sugarcrepe-pp-tot", data, out, images)
    assert report["groups"] == sum(SUBSETS.values()) and report["samples"] == 2 * report["groups"]
    score = symmetric(seed)
    harness = harness_of(out)
    rows = metrics(outcomes(harness, {"m": text_scores(out, score)}), harness.aggregate)
    got = {r["subset"]: r["accuracy"] for r in rows.to_pylist()
           if r["tie"] == "official" and r["metric"] == "tot"}  # fmt: skip
    for file in sorted(data.glob("*.json")):
        cells = [
            {"cos_p1": 0, "cos_p2": 0, "cos_neg": 0,
             "cos_p1p2": score(i["caption"], i["caption2"]),
             "cos_p1_neg": score(i["caption"], i["negative_caption"]),
             "cos_p2_neg": score(i["caption2"], i["negative_caption"])}
            for i in json.loads(file.read_text())
        ]  # fmt: skip
        assert got[file.stem] == pytest.approx(official.scpp(cells)["tot"], rel=1e-12)


def test_a_model_without_a_text_embedding_is_refused_on_tot(scpp_data, tmp_path):
    from autocomp.scoring.stage import score

    data, images = scpp_data
    import_benchmark("sugarcrepe-pp-tot", data, tmp_path / "tot", images)
    with pytest.raises(UsageError, match="tiny-llava.*text-only rows.*no text embedding"):
        score(["tiny-llava"], tmp_path / "tot", tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_tiny_clip_scores_tot_with_its_text_cosines(scpp_data, tmp_path):
    """Through the score stage: the text-only rows' scores are the text tower's cosines (as
    the script computes them with encode_text(normalize=True)), and TOT follows from them."""
    import torch

    from autocomp.analysis.harness import run_tables
    from autocomp.config import ScoreConfig
    from autocomp.scoring import load_scorer
    from autocomp.scoring.stage import score

    data, images = scpp_data
    run = tmp_path / "run"
    import_benchmark("sugarcrepe-pp-tot", data, run / "benchmark", images)
    score(["tiny-clip"], run / "benchmark", run / "results", ScoreConfig(device="cpu"))
    model = load_scorer("tiny-clip", device="cpu").model  # type: ignore[attr-defined]
    import open_clip

    tokenizer = open_clip.get_tokenizer("autocomp-tiny-clip")

    def cosine(a: str, b: str) -> float:
        with torch.no_grad():
            feats = model.encode_text(tokenizer([a, b]), normalize=True)
        return float((feats[0] * feats[1]).sum())

    stored = pq.read_table(run / "results" / "tiny-clip" / "scores").to_pylist()
    rows = {r["sample_id"]: r for r in pq.read_table(run / "benchmark" / "data").to_pylist()}
    for cell in stored[:12]:
        row = rows[cell["sample_id"]]
        expected = cosine(row["query_text"], row["texts"][cell["candidate_index"]])
        assert cell["score"] == pytest.approx(expected, abs=1e-5)
    tables = run_tables(run)
    assert tables is not None
    assert {r["metric"] for r in tables["harness_metrics"].to_pylist()} == {"tot"}
