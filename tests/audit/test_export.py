"""Export: balance over family x N, the same concepts in both conditions, the same items for
every annotator in their own order, blinding, and bad input."""

from __future__ import annotations

import io
import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.audit.config import AuditConfig
from autocomp.audit.export import export_study
from autocomp.cli.main import main
from autocomp.errors import UsageError
from autocomp.store.catalog.ids import concept_of


def _key(study):
    return pq.read_table(study / "key.parquet").to_pylist()


def test_balanced_over_family_and_n_with_both_conditions(bench_root, tmp_path):
    config = AuditConfig(concepts=2, annotators=2, rejected=2, seed=3)
    export_study(bench_root / "benchmark.parquet", tmp_path / "s", config, None)
    key = _key(tmp_path / "s")
    choice = [k for k in key if k["task"] != "valid"]
    concepts = {concept_of(k["sample_id"]) for k in choice}
    assert len(concepts) == 2
    assert Counter(k["family"] for k in choice if k["task"] == "swap") == {
        "color": 2,
        "position": 2,
    }
    for concept in concepts:  # both images of every chosen concept, each with both tasks
        got = {(k["condition"], k["task"]) for k in choice if concept_of(k["sample_id"]) == concept}
        assert got == {(c, t) for c in ("minimal", "contextual") for t in ("swap", "confusion")}
    assert all(k["accepted"] for k in choice)  # choice items come from accepted pairs
    rejected = {k["sample_id"] for k in key if k["task"] == "valid" and not k["accepted"]}
    assert len(rejected) == 2 and not {concept_of(s) for s in rejected} & concepts


def test_options_follow_the_protocol(study, bench_root):
    bench = {r["sample_id"]: r for r in pq.read_table(bench_root / "benchmark.parquet").to_pylist()}
    for k in _key(study):
        b = bench[k["sample_id"]]
        assert len(set(k["options"])) == len(k["options"])
        if k["task"] == "swap":
            assert len(k["options"]) == 2 and k["options"][0] == k["correct"] == b["caption"]
            assert k["options"][1] in b["swap_negatives"]
        elif k["task"] == "confusion":
            assert k["correct"] == b["caption"] and k["options"][0] == b["caption"]
            same = {c for c, f in zip(b["confusion_negatives"], b["confusion_same_scene"]) if f}
            assert len(k["options"]) == min(50, len(b["confusion_negatives"]) - len(same) + 1)
            assert set(k["options"][1:]) <= set(b["confusion_negatives"]) - same
            assert not same & set(k["options"])  # a person would rightly pick those
        else:
            assert k["options"] == ["yes", "no"]
            assert k["correct"] == ("yes" if b["accepted"] else "no")
    by_sample = {}
    for k in _key(study):
        by_sample.setdefault(k["sample_id"], {})[k["task"]] = k["options"]
    for tasks in by_sample.values():  # the Confusion item holds the Swap item's negative
        if "swap" in tasks:
            assert tasks["swap"][1] in tasks["confusion"]
    questions = Counter(
        (k["condition"], k["question"]) for k in _key(study) if k["task"] == "valid"
    )
    assert questions[("contextual", "background")] == 0
    assert questions[("minimal", "background")] == questions[("minimal", "objects")] > 0


def test_confusion_limited_to_the_configured_options(bench_root, tmp_path):
    config = AuditConfig(concepts=4, annotators=1, confusion_options=5, seed=1)
    export_study(bench_root / "benchmark.parquet", tmp_path / "s", config, None)
    sizes = {len(k["options"]) for k in _key(tmp_path / "s") if k["task"] == "confusion"}
    assert sizes == {4, 5}  # Position N=2 has 3 negatives, Color N=2 has 15


def test_every_annotator_gets_the_same_items_in_their_own_order(study):
    items = {p.stem: json.loads(p.read_text()) for p in (study / "items").glob("*.json")}
    assert sorted(items) == ["V1", "V2", "V3"]
    keys = {name: [i["key"] for i in got] for name, got in items.items()}
    assert all(sorted(k) == list(range(len(_key(study)))) for k in keys.values())
    assert len({tuple(k) for k in keys.values()}) == 3  # shuffled per annotator
    for got in items.values():  # blocks: Confusion, Swap, then validity (shows the caption)
        tasks = [i["task"] for i in got]
        assert tasks == sorted(tasks, key=["confusion", "swap", "valid"].index)
    key = {k["key"]: k for k in _key(study)}
    orders = {
        tuple(i["options"]) for got in items.values() for i in got if i["task"] == "confusion"
    }
    assert len(orders) > len([k for k in key.values() if k["task"] == "confusion"])


def test_blinded(study, bench_root):
    """Nothing an annotator can see names a sample, family, condition or verdict, and the
    images lost the generator's text chunk."""
    bench = pq.read_table(bench_root / "benchmark.parquet").to_pylist()
    hidden = {r["sample_id"] for r in bench} | {r["concept_id"] for r in bench}
    hidden |= {"minimal", "contextual", "color", "position", "accepted"}
    for path in (study / "items").glob("*.json"):
        for item in json.loads(path.read_text()):
            shown = json.dumps({k: item[k] for k in ("prompt", "options", "image")})
            assert not any(s in shown for s in hidden), shown
            assert set(item) == {"key", "task", "prompt", "options", "image"}
    for png in (study / "images").iterdir():
        assert not any(s.split("/")[0] in png.name for s in hidden)
        with Image.open(io.BytesIO(png.read_bytes())) as image:
            assert image.format == "PNG" and "parameters" not in image.info


def test_export_is_reproducible_from_the_seed(bench_root, tmp_path):
    config = AuditConfig(concepts=3, annotators=2, rejected=1, seed=11)
    for name in ("a", "b"):
        export_study(bench_root / "benchmark.parquet", tmp_path / name, config, None)
    assert (tmp_path / "a/key.parquet").read_bytes() == (tmp_path / "b/key.parquet").read_bytes()
    assert (tmp_path / "a/items/V2.json").read_text() == (tmp_path / "b/items/V2.json").read_text()
    meta = pq.read_schema(tmp_path / "a/key.parquet").metadata[b"autocomp"]
    record = json.loads(meta)
    assert record["config"]["seed"] == 11 and record["autocomp_version"]
    assert record["benchmark"]["sha256"]
    study = json.loads((tmp_path / "a/study.json").read_text())
    assert study["annotators"]["V1"]["token"] != study["annotators"]["V2"]["token"]
    assert (tmp_path / "a/study.json").stat().st_mode & 0o077 == 0


def test_cli_export_and_bad_input(bench_root, tmp_path, capsys):
    args = ["audit", "export", "--benchmark", str(bench_root / "benchmark.parquet")]
    assert main([*args, "--out", str(tmp_path / "s"), "--concepts", "4", "--seed", "1"]) == 0
    assert "study in" in capsys.readouterr().out
    assert main([*args, "--out", str(tmp_path / "s"), "--concepts", "4"]) == 2  # exists
    assert "already exists" in capsys.readouterr().err
    assert main([*args, "--out", str(tmp_path / "t"), "--concepts", "5"]) == 2
    err = capsys.readouterr().err
    assert "4 usable concept(s)" in err and "both accepted" in err and "--include-rejected" in err
    assert main([*args, "--out", str(tmp_path / "t"), "--concepts", "6", "--include-rejected"]) == 0
    out = capsys.readouterr().out
    assert "images of 6 concepts, accepted or not" in out and "accepted images" not in out
    assert main([*args, "--out", str(tmp_path / "v"), "--concepts", "7", "--include-rejected"]) == 2
    err = capsys.readouterr().err  # the wording of --include-rejected: no "accepted" claim
    assert "both present, accepted or not" in err and "(or --include-rejected" not in err
    assert main([*args, "--out", str(tmp_path / "u"), "--annotators", "0"]) == 2
    assert not (tmp_path / "u").exists()


def test_image_paths_must_stay_inside_the_root(bench_root, tmp_path):
    table = pq.read_table(bench_root / "benchmark.parquet")
    paths = table.column("image").to_pylist()
    paths[0] = "../../../etc/hostname"
    bad = table.set_column(table.schema.get_field_index("image"), "image", pa.array(paths))
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(UsageError, match="must be a path inside"):
        export_study(
            tmp_path / "bad.parquet", tmp_path / "s", AuditConfig(concepts=4),
            bench_root,
        )  # fmt: skip
    assert not (tmp_path / "s").exists() and not list(tmp_path.glob(".s.tmp-*"))


def test_export_from_a_published_benchmark(published, tmp_path):
    """The demo's format: images embedded in data/*.parquet; its rejected samples can be drawn
    for the choice items only when asked."""
    with pytest.raises(UsageError, match="4 usable concept"):
        export_study(published, tmp_path / "a", AuditConfig(concepts=6), None)
    config = AuditConfig(concepts=6, annotators=2, include_rejected=True)
    export_study(published, tmp_path / "s", config, None)
    key = _key(tmp_path / "s")
    assert len({k["sample_id"] for k in key if k["task"] == "swap"}) == 12
    assert {k["correct"] for k in key if k["task"] == "valid"} == {"yes", "no"}
    assert len(list((tmp_path / "s" / "images").iterdir())) == 12
