"""Score types: the per-token score of generative models, the paper's A.8 blind multiple-choice
test (`--blind choice`), readers of tables without `score_type`, and resuming a run folder
written before score types."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.config import NegativesConfig, ScoreConfig
from autocomp.errors import UsageError
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.scoring import ScoreRequest, choice, load_scorer
from autocomp.scoring.items import item_from_row
from autocomp.scoring.registry import get_model
from autocomp.scoring.stage import score_stage
from autocomp.store.catalog.runs import ScoreRun, collect_runs, read_predictions
from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA
from autocomp.store.tables import read_metadata

VLM = "tiny-qwen2.5-vl"  # byte-level tokenizer without merges: one token per UTF-8 byte


def _benchmark(tmp_path, family: str, n: int, count: int, images: bool = True):
    sample_stage(family, n, count, 0, tmp_path / f"c-{family}{n}.parquet")
    path = tmp_path / f"b-{family}{n}.parquet"
    negatives_stage(tmp_path / f"c-{family}{n}.parquet", path, NegativesConfig(workers=1))
    if not images:
        return path
    table = pq.read_table(path)
    for i in range(table.num_rows):
        Image.new("RGB", (40, 40), (50 * i, 80, 20)).save(tmp_path / f"{family}{n}-{i}.png")
    names = [f"{family}{n}-{i}.png" for i in range(table.num_rows)]
    pq.write_table(table.append_column("image", pa.array(names)), path)
    return path


# ------------------------------------------------------------------ the options (no model)


def test_options_hold_the_positive_once_and_distinct_negatives_in_a_seeded_order(tmp_path):
    path = _benchmark(tmp_path, "color", 3, 2, images=False)
    item = item_from_row(pq.read_table(path).to_pylist()[0], 0)
    confusion = item.sets["confusion"]
    assert len(confusion) == 3**6 - 1  # N^(2N) - 1 at N=3: the paper subsamples 49
    shown = choice.draw_options(confusion, 49, 0, item.sample_id, "confusion")
    assert len(shown) == 50 and shown.count(0) == 1
    negatives = [c for c in shown if c != 0]
    assert len(set(negatives)) == 49 and set(negatives) <= set(confusion)
    assert shown == choice.draw_options(confusion, 49, 0, item.sample_id, "confusion")
    other = choice.draw_options(confusion, 49, 1, item.sample_id, "confusion")
    assert other != shown and other.count(0) == 1
    assert shown != sorted(shown)  # shuffled, not listed positive-first
    # the prompt lists every option once, after its ID, in the order shown
    again, ids = choice.draw(confusion, 49, 0, item.sample_id, "confusion")
    assert again == shown and sorted(ids) == choice.ids(50) and ids != choice.ids(50)
    text = choice.prompt([item.candidates[c] for c in shown], ids)
    lines = [line for line in text.splitlines() if line.startswith("(")]
    assert lines == [f"{i} {item.candidates[c]}" for i, c in zip(ids, shown)]
    assert sum(line.endswith(f") {item.candidates[0]}") for line in lines) == 1
    assert "50 captions" in text
    # a set smaller than the count is shown whole: Swap at N=3 is N! - 1 = 5 negatives
    swap = choice.draw_options(item.sets["swap"], 49, 0, item.sample_id, "swap")
    assert sorted(swap) == sorted([0, *item.sets["swap"]])


def test_ids_are_complete_answers_of_one_width():
    ids = choice.ids(50)
    assert ids[0] == "(01)" and ids[11] == "(12)" and len(set(ids)) == 50
    assert {len(i) for i in ids} == {4} and choice.ids(9)[0] == "(1)"
    assert choice.ids(100)[0] == "(001)"
    assert not any(a != b and b.startswith(a) for a in ids for b in ids)  # prefix-free


def test_a_recorded_seed_redraws_the_same_options():
    # pinned: a change of the draw would silently change every recorded choice run
    assert choice.draw_options(list(range(1, 11)), 3, 0, "color-n2-x", "confusion") == [0, 1, 4, 9]
    assert choice.draw_options(list(range(1, 11)), 3, 1, "color-n2-x", "confusion") == [0, 2, 9, 1]


def test_options_do_not_depend_on_the_process():
    # sha256-derived, not hash(): the same draw in every interpreter (PYTHONHASHSEED)
    digest = hashlib.sha256(b"0\x00color-n2-x\x00confusion").digest()
    assert choice.item_seed(0, "color-n2-x", "confusion") == int.from_bytes(digest[:8], "big")


# ------------------------------------------------------------------ readers


def test_tables_without_score_type_read_as_score(tmp_path):
    rows = {
        "model": ["m"], "sample_id": ["a"], "family": ["color"], "n": [2],
        "condition": ["minimal"], "set": ["swap"], "protocol": ["paper"], "candidates": [2],
        "correct": [True], "tie": [False], "predicted": [0], "positive_score": [1.0],
        "best_negative_score": [0.0], "failed": [False], "reason": [""], "truncated": [False],
    }  # fmt: skip
    old = pa.table(rows).cast(PREDICTIONS_SCHEMA.remove(PREDICTIONS_SCHEMA.names.index("options"))
                              .remove(PREDICTIONS_SCHEMA.names.index("score_type")))  # fmt: skip
    (tmp_path / "run" / "predictions").mkdir(parents=True)
    pq.write_table(old, tmp_path / "run" / "predictions" / "part-00000.parquet")
    assert read_predictions(tmp_path / "run")["score_type"].to_pylist() == ["score"]
    summary = ScoreRun(tmp_path / "run").summarize()
    assert summary["score_type"].to_pylist() == ["score"] and summary["accuracy"][0].as_py() == 1
    pq.write_table(summary.drop_columns(["score_type"]), tmp_path / "run" / "summary.parquet")
    both = collect_runs([tmp_path / "run", tmp_path / "run"], tmp_path / "all")
    assert both["score_type"].to_pylist() == ["score", "score"]


# ------------------------------------------------------------------ with a tiny VLM


@pytest.mark.slow
def test_token_counts_are_what_the_score_sums_over():
    scorer = load_scorer(VLM, device="cpu")
    captions = ["An orange SUV.", "A red cup.", "Un café."]
    assert scorer.token_counts(captions) == [14, 10, 9]  # bytes: "é" is two
    before = dict(scorer.calls)
    scorer.token_counts(captions * 10)
    assert scorer.calls == before  # no forward pass
    # each token adds a log-probability <= 0: a caption and its extension by one token
    one, two = scorer.score([ScoreRequest(None, "A red cup"), ScoreRequest(None, "A red cup.")], {})
    assert two <= one


@pytest.mark.slow
def test_per_token_score_is_the_score_over_its_tokens(tmp_path):
    path = _benchmark(tmp_path, "position", 2, 3)
    entry = get_model(VLM)
    made = []

    def factory():
        made.append(load_scorer(VLM, device="cpu"))
        return made[-1]

    summary = score_stage(entry, path, tmp_path / "run", ScoreConfig(str(tmp_path)), loader=factory)
    scores = pq.read_table(tmp_path / "run" / "scores").to_pylist()
    bench = {item_from_row(r, i).sample_id: item_from_row(r, i)
             for i, r in enumerate(pq.read_table(path).to_pylist())}  # fmt: skip
    lengths = set()
    for s in scores:
        caption = bench[s["sample_id"]].candidates[s["candidate_index"]]
        assert s["tokens"] == len(caption.encode()) and s["score_type"] == "score"
        lengths.add(s["tokens"])
    assert len(lengths) > 1  # the candidates differ in length: the case per-token is for
    by_item: dict[str, dict[int, dict]] = {}
    for s in scores:
        by_item.setdefault(s["sample_id"], {})[s["candidate_index"]] = s
    predictions = read_predictions(tmp_path / "run").to_pylist()
    assert {p["score_type"] for p in predictions} == {"score", "per_token"}
    checked = 0
    for p in predictions:
        item, found = bench[p["sample_id"]], by_item[p["sample_id"]]
        value = {
            c: s["score"] / s["tokens"] if p["score_type"] == "per_token" else s["score"]
            for c, s in found.items()
        }
        negatives = item.sets[p["set"]]
        if p["protocol"] == "strict":
            negatives = [c for c in negatives if c not in item.same_scene]
        assert p["positive_score"] == value[0]  # exactly score / tokens
        assert p["best_negative_score"] == max(value[c] for c in negatives)
        assert p["correct"] == (value[0] > max(value[c] for c in negatives))
        checked += 1
    assert checked == len(predictions) > 0
    assert made[0].calls["prefix_forwards"] == 3  # one pass per image: per_token reuses it
    rows = {(r["set"], r["protocol"], r["score_type"]): r for r in summary.to_pylist()}
    assert rows[("confusion", "paper", "per_token")]["items"] == 3
    assert rows[("confusion", "paper", "per_token")]["chance"] == pytest.approx(
        rows[("confusion", "paper", "score")]["chance"]
    )


@pytest.mark.slow
def test_contrastive_models_have_only_the_native_score(tmp_path):
    path = _benchmark(tmp_path, "color", 2, 2)
    config = ScoreConfig(str(tmp_path), device="cpu")
    summary = score_stage(get_model("tiny-clip"), path, tmp_path / "run", config)
    assert set(summary["score_type"].to_pylist()) == {"score"}
    assert pq.read_table(tmp_path / "run" / "scores")["tokens"].null_count > 0


@pytest.mark.slow
def test_blind_choice_records_its_options_and_reads_the_best_label(tmp_path):
    path = _benchmark(tmp_path, "color", 2, 2, images=False)
    entry = get_model(VLM)
    factory = lambda: load_scorer(VLM, device="cpu")  # noqa: E731
    config = ScoreConfig(blind="choice", device="cpu", choice_negatives=5, choice_seed=3)
    summary = score_stage(entry, path, tmp_path / "run", config)
    predictions = read_predictions(tmp_path / "run").to_pylist()
    scores = pq.read_table(tmp_path / "run" / "scores").to_pylist()
    bench = [item_from_row(r, i) for i, r in enumerate(pq.read_table(path).to_pylist())]
    assert {p["score_type"] for p in predictions} == {"choice"}
    assert {s["score_type"] for s in scores} == {"choice"}
    for p in predictions:
        item = next(it for it in bench if it.sample_id == p["sample_id"])
        negatives = item.sets[p["set"]]
        if p["protocol"] == "strict":
            negatives = [c for c in negatives if c not in item.same_scene]
        shown = choice.draw_options(negatives, 5, 3, item.sample_id, p["set"])
        assert choice.read_options(p["options"]) == shown and p["candidates"] == len(shown)
        assert p["candidates"] == (6 if p["set"] == "confusion" else 2)  # 15 -> 5; swap: 1
        mine = [s for s in scores if (s["sample_id"], s["set"], s["protocol"]) ==
                (p["sample_id"], p["set"], p["protocol"])]  # fmt: skip
        assert [s["candidate_index"] for s in sorted(mine, key=lambda s: s["option"])] == shown
        label = {s["candidate_index"]: s["score"] for s in mine}
        best = max(label[c] for c in shown if c != 0)
        assert p["positive_score"] == label[0] and p["best_negative_score"] == best
        assert p["correct"] == (label[0] > best)
        assert p["predicted"] == (0 if p["correct"] else
                                  next(c for c in shown if c != 0 and label[c] == best))  # fmt: skip
    rows = {(r["set"], r["protocol"]): r for r in summary.to_pylist()}
    assert rows[("confusion", "paper")]["chance"] == pytest.approx(1 / 6)
    assert rows[("swap", "paper")]["chance"] == pytest.approx(1 / 2)
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    asked = {"negatives": 5, "seed": 3, "rule": choice.RULE}
    assert record["blind"] == "choice" and record["choice"] == asked
    for folder in ("scores", "predictions"):
        meta = read_metadata(tmp_path / "run" / folder / "part-00000.parquet")
        assert meta["blind"] == "choice" and meta["choice"] == asked
    # the label scores are what the scorer gives the prompt the options make
    first = next(p for p in predictions if p["set"] == "confusion" and p["protocol"] == "paper")
    item = next(it for it in bench if it.sample_id == first["sample_id"])
    shown, ids = choice.draw(item.sets["confusion"], 5, 3, item.sample_id, "confusion")
    assert shown == choice.read_options(first["options"])
    text = choice.prompt([item.candidates[c] for c in shown], ids)
    again = factory().score([ScoreRequest(None, i, text) for i in ids], {})
    mine = sorted((s for s in scores if s["sample_id"] == first["sample_id"]
                   and s["set"] == "confusion" and s["protocol"] == "paper"),
                  key=lambda s: s["option"])  # fmt: skip
    assert max(abs(a - s["score"]) for a, s in zip(again, mine)) <= 1e-5
    # another seed is another run: refused in this folder, other options in a new one
    other = ScoreConfig(blind="choice", device="cpu", choice_negatives=5, choice_seed=4)
    with pytest.raises(UsageError, match="another model, benchmark or mode"):
        score_stage(entry, path, tmp_path / "run", other)
    score_stage(entry, path, tmp_path / "run4", other)
    changed = [p["options"] for p in read_predictions(tmp_path / "run4").to_pylist()]
    assert changed != [p["options"] for p in predictions]


# ------------------------------------------------------------------ run folders of before


def _make_old(out) -> None:
    """Turn a run folder into what autocomp wrote before score types."""
    record = json.loads((out / "run.json").read_text())
    record.pop("format"), record.pop("choice")
    record["blind"] = bool(record["blind"])
    (out / "run.json").write_text(json.dumps(record))
    for folder, drop in (("scores", ["tokens", "score_type", "set", "protocol", "option"]),
                         ("predictions", ["score_type", "options"])):  # fmt: skip
        for part in (out / folder).glob("part-*.parquet"):
            table = pq.read_table(part)
            keep = table.filter(pc.equal(table["score_type"], "score"))
            pq.write_table(keep.drop_columns(drop), part)


@pytest.mark.slow
def test_an_old_contrastive_run_is_upgraded_in_place(tmp_path):
    path = _benchmark(tmp_path, "color", 2, 4)
    entry, out = get_model("tiny-clip"), tmp_path / "run"
    config = ScoreConfig(str(tmp_path), device="cpu", max_candidates=40)
    first = score_stage(entry, path, out, config)
    _make_old(out)
    last = sorted((out / "predictions").glob("part-*.parquet"))[-1].name
    (out / "predictions" / last).unlink()
    (out / "scores" / last).unlink()
    again = score_stage(entry, path, out, config)  # resumes the missing part
    assert again.equals(first)
    for folder in ("scores", "predictions"):  # every part in today's schema
        schemas = {pq.read_schema(p).remove_metadata() for p in (out / folder).glob("*.parquet")}
        assert len(schemas) == 1 and "score_type" in next(iter(schemas)).names
    assert json.loads((out / "run.json").read_text())["format"] == 2


@pytest.mark.slow
def test_an_old_generative_run_is_refused(tmp_path):
    path = _benchmark(tmp_path, "color", 2, 1, images=False)
    entry, out = get_model(VLM), tmp_path / "run"
    config = ScoreConfig(blind=True, device="cpu")
    score_stage(entry, path, out, config)
    _make_old(out)
    with pytest.raises(UsageError, match="before per-token scores.*new folder"):
        score_stage(entry, path, out, config)
