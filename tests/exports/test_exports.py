"""`autocomp export`: the questions, each harness's files read back the way the harness reads
them (YAML with !function tags and a datasets folder; a pandas TSV; JSON and a torch Dataset),
escaping, and never overwriting without --force."""

from __future__ import annotations

import base64
import importlib.util
import io
import json

import pyarrow.parquet as pq
import pytest
import yaml
from PIL import Image

from autocomp.cli.main import main
from autocomp.config import ExportConfig
from autocomp.errors import UsageError
from autocomp.exports import export
from autocomp.exports.questions import questions, slug
from autocomp.scoring.choice import draw_options
from autocomp.scoring.items import item_from_row
from autocomp.store.catalog.benchmarks import open_benchmark
from tests.exports.conftest import TRICKY, trick


class _Loader(yaml.SafeLoader):
    """lmms-eval's YAML: `!function utils.NAME` tags (read as their names here)."""


_Loader.add_constructor(
    "!function", lambda loader, node: ("function", loader.construct_scalar(node))
)


def _module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_questions_are_the_items_sets_in_the_seeded_order(bench):
    source = open_benchmark(bench)
    config = ExportConfig(images=str(bench.parent / "images"), seed=3)
    qs = list(questions(source, config, None))
    rows = pq.read_table(bench).to_pylist()
    assert len(qs) == 2 * len(rows)  # swap and confusion at N=2
    for q in qs:
        row = next(r for r in rows if r["concept_id"] == q.concept_id)
        item = item_from_row(row, 0)
        negatives = item.sets[q.set_name]
        assert q.candidates == draw_options(negatives, len(negatives), 3, q.sample_id, q.set_name)
        assert q.options[q.answer] == row["caption"] and q.candidates[q.answer] == 0
        assert sorted(q.options) == sorted(item.candidates[c] for c in [0, *negatives])
    again = list(questions(source, config, None))
    assert [q.options for q in again] == [q.options for q in qs]  # the same draw every time
    other = list(questions(source, ExportConfig(images=config.images, seed=4), None))
    assert [q.options for q in other] != [q.options for q in qs]


def test_a_harness_cap_and_bad_settings_are_one_line(bench):
    source = open_benchmark(bench)
    images = str(bench.parent / "images")
    capped = list(questions(source, ExportConfig(images=images), 4))
    assert max(len(q.options) for q in capped) == 4
    with pytest.raises(UsageError, match="more options than this harness shows"):
        list(questions(source, ExportConfig(images=images, negatives=30), 26))
    with pytest.raises(UsageError, match="is not a candidate set"):
        list(questions(source, ExportConfig(images=images, sets=("both",)), None))
    with pytest.raises(UsageError, match="no images folder"):
        list(questions(source, ExportConfig(), None))


def test_lmms_eval_pack_reads_back_as_lmms_eval_reads_it(bench, tmp_path):
    import datasets

    out = tmp_path / "pack"
    done = export("lmms-eval", bench, out, ExportConfig(images=str(bench.parent / "images")))
    assert done["wrote"]["tasks"] == ["autocomp_color_mc", "autocomp_color_gen"]
    mc = yaml.load((out / "autocomp_color_mc.yaml").read_text(), Loader=_Loader)
    gen = yaml.load((out / "autocomp_color_gen.yaml").read_text(), Loader=_Loader)
    assert mc["output_type"] == "multiple_choice" and gen["output_type"] == "generate_until"
    assert "autocomp" in mc["tag"] and mc["cluster_key"] == "concept_id"
    assert mc["target_delimiter"] == "" and mc["doc_to_choice"] == (
        "function",
        "utils.doc_to_choice",
    )
    assert json.loads(mc["metadata"]["autocomp"])["seed"] == 0
    data = datasets.load_dataset(mc["dataset_path"], cache_dir=str(tmp_path / "cache"))["test"]
    utils = _module(out / "utils.py", "autocomp_pack_utils")
    qs = list(
        questions(open_benchmark(bench), ExportConfig(images=str(bench.parent / "images")), None)
    )
    assert len(data) == len(qs)
    for doc, q in zip(data, qs):
        assert utils.doc_to_choice(doc) == q.options and doc["answer"] == q.answer
        assert utils.doc_to_visual(doc)[0].size == (16, 16)
        lls = [-5.0] * len(q.options)
        lls[q.answer] = -1.0
        assert (
            utils.process_results_mc(doc, [(x, False) for x in lls])["autocomp_acc"]["score"] == 1.0
        )
        assert (
            utils.process_results_gen(doc, [f"{doc['answer_id']}"])["autocomp_acc"]["score"] == 1.0
        )
        wrong = doc["ids"][(q.answer + 1) % len(q.options)]
        assert utils.process_results_gen(doc, [f"I think {wrong}."])["autocomp_acc"]["score"] == 0.0
        assert utils.parse_reply(doc, q.options[q.answer].upper()) == q.answer
        assert utils.parse_reply(doc, "no idea") == -1
        assert all(caption in doc["question"] for caption in q.options)


def test_names_and_captions_are_escaped_for_yaml_tsv_json_and_python(bench, tmp_path):
    import pandas as pd

    tricky = trick(bench)
    config = ExportConfig(images=str(bench.parent / "images"))
    family = 'color "odd": family'
    pack = tmp_path / "pack"
    export("lmms-eval", tricky, pack, config)
    task = f"autocomp_{slug(family)}_mc"
    parsed = yaml.load((pack / f"{task}.yaml").read_text(), Loader=_Loader)
    assert parsed["task"] == task and parsed["task_alias"] == f"Auto-Comp {family} (mc)"
    assert all(c.isalnum() or c == "_" for c in task)
    assert TRICKY[0] not in (pack / "utils.py").read_text()  # data never embedded as code
    vlm = tmp_path / "vlm"
    export("vlmevalkit", tricky, vlm, config)
    frame = pd.read_csv(vlm / "AutoComp.tsv", sep="\t")  # vlmeval/smp/file.py load_tsv
    qs = list(questions(open_benchmark(tricky), config, 26))
    assert len(frame) == len(qs)
    for row, q in zip(frame.to_dict("records"), qs):
        assert [row[c] for c in "ABCDEFGHIJKLMNOP"[: len(q.options)]] == q.options
        assert row["category"] == family and row["l2-category"] == q.set_name
    clip = tmp_path / "clip"
    export("clip-benchmark", tricky, clip, config)
    ann = json.loads(next((clip / slug(family)).glob("*confusion*.json")).read_text())
    assert {a["caption"] for a in ann.values()} <= set(TRICKY)


def test_vlmevalkit_tsv_layout_and_circular_copies(bench, tmp_path):
    import pandas as pd

    out = tmp_path / "vlm"
    export("vlmevalkit", bench, out, ExportConfig(images=str(bench.parent / "images")))
    plain = pd.read_csv(out / "AutoComp.tsv", sep="\t")
    circular = pd.read_csv(out / "AutoComp_circular.tsv", sep="\t")
    for column in ("index", "image", "question", "A", "B", "answer", "category", "l2-category"):
        assert column in plain.columns
    image = Image.open(io.BytesIO(base64.b64decode(plain["image"][0])))
    assert image.size == (16, 16)
    by_index = dict(zip(circular["index"], circular["image"]))
    for _, row in circular.iterrows():
        original = plain[plain["index"] == row["g_index"]].iloc[0]
        k = sum(1 for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if isinstance(original[c], str))
        assert row["index"] % 1_000_000 == row["g_index"]
        options = [original[c] for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:k]]
        r = row["index"] // 1_000_000
        assert [row[c] for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:k]] == options[r:] + options[:r]
        assert row[row["answer"]] == original[original["answer"]]
        if r:  # a copy names its original's image (image_base.py: 64 characters or fewer)
            assert str(by_index[row["index"]]) == str(row["g_index"])
    assert len(circular) == sum(
        sum(1 for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if isinstance(r[c], str))
        for _, r in plain.iterrows()
    )


def test_an_export_never_overwrites_without_force(bench, tmp_path, capsys):
    out = tmp_path / "pack"
    args = ["export", "clip-benchmark", "--benchmark", str(bench), "--images",
            str(bench.parent / "images"), "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    (out / "mine.txt").write_text("kept?")
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err and "--force" in err
    assert (out / "mine.txt").is_file()
    assert main([*args, "--force"]) == 0
    assert not (out / "mine.txt").exists() and (out / "autocomp_export.json").is_file()
    assert main([*args[:-1], str(tmp_path / "other"), "--sets", "both"]) == 2
    assert "--sets" in capsys.readouterr().err and not (tmp_path / "other").exists()


def test_a_published_benchmark_exports_from_its_store(bench, tmp_path):
    from autocomp.store import publish

    store = str(tmp_path / "store")
    publish.publish_stage(bench, bench.parent / "images", tmp_path / "work", store, "colors")
    direct = export(
        "vlmevalkit", bench, tmp_path / "a", ExportConfig(images=str(bench.parent / "images"))
    )
    published = export("vlmevalkit", "colors", tmp_path / "b", ExportConfig(), store=store)
    assert published["benchmark"]["source"]["kind"] != direct["benchmark"]["source"]["kind"]
    import pandas as pd

    a = pd.read_csv(tmp_path / "a" / "AutoComp.tsv", sep="\t")
    b = pd.read_csv(tmp_path / "b" / "AutoComp.tsv", sep="\t")
    columns = [c for c in a.columns if c != "image"]
    assert a[columns].equals(b[columns])  # the same questions, whichever way it was read


def test_clip_benchmark_files_read_through_their_dataset(bench, tmp_path):
    out = tmp_path / "clip"
    export("clip-benchmark", bench, out, ExportConfig(images=str(bench.parent / "images")))
    module = _module(out / "autocomp_dataset.py", "autocomp_clip_dataset")
    qs = list(
        questions(open_benchmark(bench), ExportConfig(images=str(bench.parent / "images")), None)
    )
    seen = 0
    for path in sorted(out.glob("*/*.json")):
        dataset = module.AutoCompCaptions(path)
        for i in range(len(dataset)):
            image, captions = dataset[i]
            key = dataset.keys[i]
            q = qs[int(key)]
            assert captions[0] == q.options[q.answer]  # the metric's caption 0 is the positive
            assert sorted(captions) == sorted(q.options) and image.size == (16, 16)
            assert path.name == f"n{q.n}_{q.set_name}_{len(q.options)}.json"
            seen += 1
    assert seen == len(qs)


def test_the_cli_offers_every_registered_harness():
    from autocomp.cli.exports import HARNESS_NAMES
    from autocomp.exports import HARNESSES

    assert tuple(HARNESSES) == HARNESS_NAMES
