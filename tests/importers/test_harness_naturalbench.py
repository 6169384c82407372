"""NaturalBench: a fixture in the release's exact format (BaiqiL/NaturalBench data/train-*.parquet:
Index, Image_0, Image_1, Question_0, Image_0_Question_0, Image_1_Question_0, Question_1,
Image_0_Question_1, Image_1_Question_1, Question_Type, Source; as load_dataset gives it to
Baiqi-Li/NaturalBench naturalbench_vqa.py), scored by the transcription of that script
(extract_answer, get_scores: tests/importers/official.py) and by autocomp: equal Acc, Q-Acc,
I-Acc and G-Acc. A model's answer is the option it scores higher (ties: no answer); the script
is fed that option as the model's reply."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.analysis.harness import harness_of, metrics, outcomes
from autocomp.errors import UsageError
from autocomp.importers import import_benchmark
from tests.importers import official
from tests.importers.harness_support import png

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
SUFFIX = {
    "yes_no": "Please answer Yes or No.",
    "multiple_choice": "Please output the letter corresponding to the correct option.",
}  # naturalbench_vqa.py:4-7
OPTIONS = {"yes_no": ("Yes", "No"), "multiple_choice": ("A", "B")}


def release(folder, groups: int = 10, type_column: str = "Question_Type"):
    rows = []
    for g in range(groups):
        kind = "multiple_choice" if g % 4 == 3 else "yes_no"
        yes, no = OPTIONS[kind]
        rows.append({
            "Index": g,
            "Image_0": {"bytes": png(2 * g), "path": f"{g}_0.jpg"},
            "Image_1": {"bytes": png(2 * g + 1), "path": f"{g}_1.jpg"},
            "Question_0": f"Is the squirrel climbing up the fence {g}?",
            "Image_0_Question_0": yes, "Image_1_Question_0": no,
            "Question_1": f"Is the squirrel climbing down the fence {g}?",
            "Image_0_Question_1": no, "Image_1_Question_1": yes,
            type_column: kind, "Source": "flickr" if g % 2 else "docci",
        })  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([(k, IMAGE if k.startswith("Image_") and len(k) == 7 else
                         (pa.int64() if k == "Index" else pa.string())) for k in rows[0]])  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows, schema), folder / "train-00000-of-00001.parquet")
    return rows


def prompt_scorer(seed: int, levels: int = 3):
    """score(image, prompt, option): one of `levels` values by a hash (ties are common)."""

    def score(image: str, prompt: str, option: str) -> float:
        digest = hashlib.sha256(f"{seed}|{image}|{prompt}|{option}".encode()).digest()
        return digest[0] % levels / levels

    return score


def run_scores(folder, score) -> pa.Table:
    """The scores a run writes: each row's image, asked its prompt, against each option."""
    columns = ["sample_id", "image_ref", "texts", "prompt"]
    rows = pa.concat_tables(
        [pq.read_table(p, columns=columns) for p in sorted((folder / "data").glob("*.parquet"))]
    ).to_pylist()
    out = [
        {"sample_id": r["sample_id"], "candidate_index": t, "tokens": None,
         "score": score(r["image_ref"], r["prompt"], text)}
        for r in rows for t, text in enumerate(r["texts"])
    ]  # fmt: skip
    schema = pa.schema([("sample_id", pa.string()), ("candidate_index", pa.int32()),
                        ("score", pa.float64()), ("tokens", pa.int32())])  # fmt: skip
    return pa.Table.from_pylist(out, schema)


def script(rows, score) -> dict[str, float]:
    """naturalbench_vqa.py's main: the 4 (question, image) samples of each row, the model's
    reply (the option it scores higher; none on a tie), extract_answer, get_scores."""
    answers = []
    for item in rows:
        kind = item["Question_Type"]
        cells = {}
        for key, q, i in (("q0_i0", 0, 0), ("q0_i1", 0, 1), ("q1_i0", 1, 0), ("q1_i1", 1, 1)):
            prompt = item[f"Question_{q}"] + SUFFIX[kind]
            image = item[f"Image_{i}"]["path"]
            first, second = (score(image, prompt, option) for option in OPTIONS[kind])
            reply = "" if first == second else OPTIONS[kind][0 if first > second else 1]
            cells[key] = official.extract_answer(reply, kind)
        answers.append(cells)
    return official.naturalbench_scores(answers)


@pytest.mark.parametrize("seed", range(6))
def test_autocomp_equals_the_script(tmp_path, seed):
    rows = release(tmp_path / "nb" / "data")
    out = tmp_path / "bench"
    report = import_benchmark("naturalbench", tmp_path / "nb" / "data", out)
    assert report["groups"] == 10 and report["samples"] == 40 and report["tie"] == "strict"
    score = prompt_scorer(seed)
    harness = harness_of(out)
    table = metrics(outcomes(harness, {"m": run_scores(out, score)}), harness.aggregate)
    got = {
        r["metric"]: r["accuracy"]
        for r in table.to_pylist()
        if r["subset"] == "all" and r["tie"] == "official" and r["score_type"] == "score"
    }
    assert got == pytest.approx(script(rows, score), rel=1e-12)


def test_each_row_asks_its_question(tmp_path):
    release(tmp_path / "nb", groups=1, type_column="Question Type")  # the card's spelling
    out = tmp_path / "bench"
    import_benchmark("naturalbench", tmp_path / "nb", out)
    rows = pq.read_table(next((out / "data").glob("*.parquet"))).to_pylist()
    assert [(r["image_ref"], r["prompt"], r["texts"], r["true_texts"]) for r in rows] == [
        ("0_0.jpg", "Is the squirrel climbing up the fence 0?Please answer Yes or No.", ["Yes", "No"], [0]),
        ("0_1.jpg", "Is the squirrel climbing up the fence 0?Please answer Yes or No.", ["Yes", "No"], [1]),
        ("0_0.jpg", "Is the squirrel climbing down the fence 0?Please answer Yes or No.", ["Yes", "No"], [1]),
        ("0_1.jpg", "Is the squirrel climbing down the fence 0?Please answer Yes or No.", ["Yes", "No"], [0]),
    ]  # fmt: skip
    assert json.loads(rows[0]["meta"])["official_layout"] is True


def test_a_contrastive_model_is_refused_in_one_line(tmp_path):
    from autocomp.scoring.stage import score

    release(tmp_path / "nb", groups=2)
    import_benchmark("naturalbench", tmp_path / "nb", tmp_path / "bench")
    with pytest.raises(UsageError, match="tiny-clip.*cannot answer.*VQA.*transformers_vlm"):
        score(["tiny-clip"], tmp_path / "bench", tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_another_release_names_the_columns(tmp_path):
    table = pa.table({"id": [0], "image_0": ["a"], "caption_0": ["x"]})
    pq.write_table(table, tmp_path / "winoground.parquet")
    with pytest.raises(UsageError, match="lacks column.*Question_0.*BaiqiL/NaturalBench"):
        import_benchmark("naturalbench", tmp_path / "winoground.parquet", tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_generative_model_answers_each_question(tmp_path):
    """The tiny random-weight Qwen2.5-VL through the score stage: each row's prompt reaches the
    model (the same image and options score differently under its two questions), and the
    run's scores give the metrics."""
    from autocomp.analysis.harness import run_tables
    from autocomp.config import ScoreConfig
    from autocomp.scoring.stage import score

    release(tmp_path / "nb", groups=2)
    run = tmp_path / "run"
    import_benchmark("naturalbench", tmp_path / "nb", run / "benchmark")
    score(["tiny-qwen2.5-vl"], run / "benchmark", run / "results", ScoreConfig(device="cpu"))
    scores = pq.read_table(run / "results" / "tiny-qwen2.5-vl" / "scores").to_pylist()
    by_row = {}
    for r in scores:
        if r["score_type"] == "score":
            by_row.setdefault(r["sample_id"], []).append(r["score"])
    first_group = sorted(s for s in by_row if s.startswith("naturalbench-docci-0/"))
    q0_i0, q1_i0 = by_row[first_group[0]], by_row[first_group[2]]  # image 0, two questions
    assert q0_i0 != q1_i0
    tables = run_tables(run)
    assert tables is not None
    headline = [r for r in tables["harness_metrics"].to_pylist()
                if r["subset"] == "all" and r["tie"] == "official" and r["score_type"] == "score"]  # fmt: skip
    assert {r["metric"] for r in headline} == {"Acc", "Q_Acc", "I_Acc", "G_Acc"}
