import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.config import NegativesConfig, ScoreConfig
from autocomp.errors import UsageError
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.scoring import load_scorer
from autocomp.scoring.items import judge
from autocomp.scoring.registry import get_model
from autocomp.scoring.stage import score_stage
from autocomp.store.catalog.runs import read_predictions


def test_tie_rule_never_favours_the_positive():
    assert judge([0.9, 0.1, 0.5], [1, 2]) == (True, False, 0, 0.5)
    assert judge([0.5, 0.1, 0.5, 0.5], [1, 2, 3]) == (False, True, 2, 0.5)
    assert judge([0.2, 0.7, 0.1], [1, 2]) == (False, False, 1, 0.7)


@pytest.fixture
def benchmark(tmp_path):
    """A small benchmark with images: Color N=2 and N=1, one missing and one corrupt image,
    one grayscale and one RGBA image (normalised to RGB)."""
    sample_stage("color", 2, 5, 0, tmp_path / "c2.parquet")
    sample_stage("color", 1, 3, 0, tmp_path / "c1.parquet")
    negatives_stage(tmp_path / "c2.parquet", tmp_path / "b2.parquet", NegativesConfig(workers=1))
    negatives_stage(tmp_path / "c1.parquet", tmp_path / "b1.parquet", NegativesConfig(workers=1))
    table = pa.concat_tables(
        pq.read_table(tmp_path / f"b{n}.parquet").replace_schema_metadata(None) for n in (2, 1)
    )
    names = [f"img{i}.png" for i in range(table.num_rows)]
    root = tmp_path / "images"
    root.mkdir()
    for i, name in enumerate(names):
        mode = "L" if i == 1 else "RGBA" if i == 2 else "RGB"
        Image.new(mode, (48, 48), 30 * i).save(root / name)
    (root / names[3]).write_bytes(b"truncated")
    (root / names[4]).unlink()
    table = table.append_column("image", pa.array(names))
    pq.write_table(table, tmp_path / "bench.parquet")
    return tmp_path / "bench.parquet", root


@pytest.mark.slow
def test_score_stage_end_to_end(tmp_path, benchmark):
    path, root = benchmark
    entry = get_model("tiny-clip")
    summary = score_stage(entry, path, tmp_path / "run", ScoreConfig(root, device="cpu"))
    rows = {(r["n"], r["set"], r["protocol"]): r for r in summary.to_pylist()}
    assert rows[(2, "swap", "paper")]["items"] == 5 and rows[(2, "swap", "paper")]["failed"] == 2
    assert rows[(2, "confusion", "paper")]["chance"] == pytest.approx(1 / 16)
    assert rows[(2, "confusion", "strict")]["chance"] == pytest.approx(1 / 15)
    assert rows[(1, "vary_attribute", "paper")]["items"] == 3
    preds = read_predictions(tmp_path / "run").to_pylist()
    failed = [p for p in preds if p["failed"]]
    assert {p["reason"].split(":")[0] for p in failed} == {"image unreadable", "image not found"}
    # predictions agree with the stored scores
    scores = pq.read_table(tmp_path / "run" / "scores").to_pylist()
    by_item = {}
    for s in scores:
        by_item.setdefault(s["sample_id"], {})[s["candidate_index"]] = s["score"]
    bench = pq.read_table(path).to_pylist()
    for p in preds:
        if p["failed"] or p["set"] != "swap":
            continue
        row = next(r for r in bench if r["concept_id"] == p["sample_id"])
        item = by_item[p["sample_id"]]
        negatives = [item[i + 1] for i in row["swap_in_confusion"]]
        assert p["correct"] == (item[0] > max(negatives))
        assert p["positive_score"] == item[0]


@pytest.mark.slow
def test_resume_scores_only_missing_items(tmp_path, benchmark):
    path, root = benchmark
    entry = get_model("tiny-clip")
    made = []

    def factory():
        made.append(load_scorer("tiny-clip", "cpu"))
        return made[-1]

    out = tmp_path / "run"
    score_stage(entry, path, out, ScoreConfig(root, max_candidates=40), loader=factory)
    parts = sorted((out / "predictions").glob("part-*.parquet"))
    assert len(parts) > 2
    first = read_predictions(out).sort_by("sample_id")
    (out / "predictions" / parts[-1].name).unlink()
    (out / "scores" / parts[-1].name).unlink()
    score_stage(entry, path, out, ScoreConfig(root, max_candidates=40), loader=factory)
    assert len(made) == 2
    assert made[1].calls["image_encodes"] < made[0].calls["image_encodes"]
    assert read_predictions(out).sort_by("sample_id").equals(first)
    score_stage(entry, path, out, ScoreConfig(root, max_candidates=40), loader=factory)
    assert len(made) == 2  # nothing left: the model is not even loaded


@pytest.mark.slow
def test_run_folder_of_another_model_is_refused(tmp_path, benchmark):
    path, root = benchmark
    score_stage(get_model("tiny-clip"), path, tmp_path / "run", ScoreConfig(root, device="cpu"))
    with pytest.raises(UsageError, match="another model"):
        score_stage(get_model("tiny-siglip"), path, tmp_path / "run", ScoreConfig(root))


def test_bad_benchmarks(tmp_path):
    pq.write_table(pa.table({"family": ["color"]}), tmp_path / "t.parquet")
    with pytest.raises(UsageError, match="missing column"):
        score_stage(get_model("tiny-clip"), tmp_path / "t.parquet", tmp_path / "o")
    sample_stage("color", 2, 2, 0, tmp_path / "c.parquet")
    negatives_stage(tmp_path / "c.parquet", tmp_path / "b.parquet", NegativesConfig(workers=1))
    with pytest.raises(UsageError, match="no image column.*--blind"):
        score_stage(get_model("tiny-clip"), tmp_path / "b.parquet", tmp_path / "o")


@pytest.mark.slow
def test_cli_models_and_score(tmp_path, benchmark, capsys):
    from autocomp.cli.main import main

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "siglip2-giant-16-256" in out and "qwen3.5-122b-a10b" in out and "tiny-clip" in out
    path, root = benchmark
    assert (
        main(
            [
                "score",
                "--model",
                "tiny-siglip",
                "--benchmark",
                str(path),
                "--out",
                str(tmp_path / "r"),
                "--images",
                str(root),
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    assert "confusion" in capsys.readouterr().out
    assert (
        main(
            ["score", "--model", "clip-b16", "--benchmark", str(path), "--out", str(tmp_path / "r")]
        )
        == 2
    )


@pytest.mark.slow
def test_failed_items_are_retried_by_the_next_run(tmp_path, benchmark):
    """A wrong images folder fails every item; the re-run with the right one scores them all
    (failures never stick), and the summary counts each item once."""
    path, root = benchmark
    entry = get_model("tiny-clip")
    wrong = tmp_path / "elsewhere"
    wrong.mkdir()
    out = tmp_path / "run"
    first = score_stage(entry, path, out, ScoreConfig(str(wrong), device="cpu"))
    assert set(first.column("failed").to_pylist()) == set(first.column("items").to_pylist())
    again = score_stage(entry, path, out, ScoreConfig(root, device="cpu"))
    swap = {(r["n"], r["protocol"]): r for r in again.to_pylist() if r["set"] == "swap"}
    assert swap[(2, "paper")]["items"] == 5 and swap[(2, "paper")]["failed"] == 2  # 2 bad files
    predictions = read_predictions(out)
    keys = list(zip(*(predictions[c].to_pylist() for c in ("sample_id", "set", "protocol"))))
    assert len(keys) == len(set(keys))  # no item counted twice


@pytest.mark.slow
def test_paths_leaving_the_images_root_and_bombs_fail_their_item(tmp_path, benchmark):
    from PIL import Image

    path, root = benchmark
    table = pq.read_table(path)
    outside = tmp_path / "secret.png"
    Image.new("RGB", (8, 8)).save(outside)
    (root / "link.png").symlink_to(outside)
    bomb = root / "bomb.png"
    Image.new("1", (20000, 20000)).save(bomb)  # 400 Mpx: above PIL's decompression-bomb limit
    refs = ["../secret.png", str(outside), "link.png", "bomb.png"]
    refs += table.column("image").to_pylist()[len(refs) :]
    pq.write_table(table.set_column(table.schema.get_field_index("image"), "image",
                                    pa.array(refs)), tmp_path / "hostile.parquet")  # fmt: skip
    score_stage(get_model("tiny-clip"), tmp_path / "hostile.parquet", tmp_path / "run",
                ScoreConfig(root, device="cpu"))  # fmt: skip
    reasons = {p["sample_id"]: p["reason"] for p in read_predictions(tmp_path / "run").to_pylist()}
    ids = table.column("concept_id").to_pylist()
    for i in range(3):
        assert "leaves the images root" in reasons[ids[i]], reasons[ids[i]]
    assert "image unreadable" in reasons[ids[3]] and "decompression bomb" in reasons[ids[3]]


@pytest.mark.slow
def test_captions_past_the_context_are_counted_not_hidden(tmp_path, benchmark):
    path, root = benchmark
    table = pq.read_table(path)
    captions = table.column("caption").to_pylist()
    captions[0] = "A photo of " + " and ".join(f"a red cup number {i}" for i in range(40)) + "."
    table = table.set_column(table.schema.get_field_index("caption"), "caption", [captions])
    pq.write_table(table, tmp_path / "long.parquet")
    summary = score_stage(get_model("tiny-clip"), tmp_path / "long.parquet", tmp_path / "run",
                          ScoreConfig(root, device="cpu"))  # fmt: skip
    preds = read_predictions(tmp_path / "run").to_pylist()
    first = table.column("sample_id")[0].as_py() if "sample_id" in table.column_names else None
    cut = {p["sample_id"] for p in preds if p["truncated"]}
    assert len(cut) == 1 and (first is None or cut == {first})
    assert sum(r["truncated"] for r in summary.to_pylist()) == sum(p["truncated"] for p in preds)
