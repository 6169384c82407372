"""Tiny training runs: the loss goes down, the checkpoint scores through the unchanged scorer,
a killed run resumes to the same weights, and the CLI verbs work."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from autocomp.cli.main import main
from autocomp.config import PROFILES, with_overrides

pytestmark = pytest.mark.slow
TINY = with_overrides(PROFILES["tiny"].finetune, steps=8, eval_every=4, patience=10)


class Interrupted(Exception):
    pass


@pytest.fixture(scope="module")
def split_dir(color_bench, tmp_path_factory):
    from autocomp.finetune.stage import split

    return split(color_bench[0], tmp_path_factory.mktemp("split"), TINY, seed=0)


def _batch_loss(model, preprocess, tokenizer, score, rows, images, kind):
    import torch

    from autocomp.finetune.losses import contrastive_loss
    from autocomp.finetune.sampler import hard_negatives

    rng = np.random.default_rng(123)
    texts = [r["caption"] for r in rows]
    texts += [c for r in rows for c, _ in hard_negatives(r, kind, TINY.k, rng)]
    with torch.no_grad():
        img = model.encode_image(torch.stack([preprocess(i) for i in images]), normalize=True)
        txt = model.encode_text(tokenizer(texts), normalize=True)
        bias = getattr(model, "logit_bias", None)
        n = len(rows)
        return float(contrastive_loss(score, img, txt[:n], txt[n:], model.logit_scale, bias))


@pytest.mark.parametrize("model,kind", [("tiny-clip", "confusion"), ("tiny-siglip", "swap")])
def test_training_lowers_the_loss_and_the_checkpoint_scores(
    model, kind, color_bench, split_dir, tmp_path
):
    import torch
    from safetensors.torch import load_file

    from autocomp.finetune import split as split_mod
    from autocomp.finetune.checkpoint import finetuned_entry
    from autocomp.finetune.stage import score_checkpoint, train
    from autocomp.finetune.train import _load_images, load_base
    from autocomp.scoring.contrastive import OpenClipScorer
    from autocomp.scoring.registry import get_model

    bench, images = color_bench
    out = tmp_path / "ck"
    result = train(model, bench, split_dir["split"], kind, 0, out, TINY, images_root=images)
    assert result.steps == 8 and result.steps_per_second > 0
    curve = pq.read_table(out / "curve.parquet").to_pylist()
    assert [r["step"] for r in curve if r["val_confusion"] is not None] == [0, 4, 8]
    assert (out / "curve.csv").is_file() and (out / "curve.svg").read_text().startswith("<svg")
    run = json.loads((out / "run.json").read_text())
    assert run["seed"] == 0 and run["negatives"] == kind and run["config"]["steps"] == 8

    # the training loss on a fixed batch (all training rows, fixed negatives) went down
    base = get_model(model)
    rows = split_mod.rows_of(bench, split_mod.read_split(split_dir["split"]), "train", TINY)
    pics = _load_images(rows, images)
    net, preprocess, tokenizer, _ = load_base(base, "cpu")
    before = _batch_loss(net.eval(), preprocess, tokenizer, base.score, rows, pics, kind)
    state = torch.load(out / "state" / "train_state.pt", weights_only=False)
    net.load_state_dict(state["model"])
    after = _batch_loss(net.eval(), preprocess, tokenizer, base.score, rows, pics, kind)
    assert after < before

    # the checkpoint loads through the unchanged scorer with exactly the saved weights
    entry = finetuned_entry(out)
    assert entry.base_model == model and entry.score == base.score
    scorer = OpenClipScorer(entry, device="cpu")
    saved = load_file(str(out / "open_clip_model.safetensors"))
    loaded = scorer.model.state_dict()
    assert set(saved) == set(loaded)
    assert all(torch.equal(saved[k], loaded[k]) for k in saved)
    scored = score_checkpoint(out, split_dir["evaluation"], tmp_path / "scores", images, "cpu")
    summary = pq.read_table(scored / "summary.parquet").to_pylist()
    assert {r["model"] for r in summary} == {entry.name}
    assert json.loads((scored / "finetune.json").read_text())["negatives"] == kind


def test_a_killed_run_resumes_to_the_same_weights(color_bench, split_dir, tmp_path):
    import torch

    from autocomp.finetune.stage import train

    bench, images = color_bench
    train("tiny-clip", bench, split_dir["split"], "confusion", 1, tmp_path / "a", TINY, images)
    done = []

    def stop_after_six(rows):
        done.append(rows)
        if len(done) == 6:
            raise Interrupted

    with pytest.raises(Interrupted):
        train(
            "tiny-clip",
            bench,
            split_dir["split"],
            "confusion",
            1,
            tmp_path / "b",
            TINY,
            images,
            progress=stop_after_six,
        )
    resumed = []
    train(
        "tiny-clip",
        bench,
        split_dir["split"],
        "confusion",
        1,
        tmp_path / "b",
        TINY,
        images,
        progress=resumed.append,
    )
    assert len(resumed) == 4  # from the step-4 checkpoint to step 8
    a = torch.load(tmp_path / "a" / "state" / "train_state.pt", weights_only=False)
    b = torch.load(tmp_path / "b" / "state" / "train_state.pt", weights_only=False)
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["curve"] == b["curve"]


def test_cli_finetune_score_and_report(color_bench, tmp_path, capsys, monkeypatch):
    bench, images = color_bench
    ck = tmp_path / "ck"
    args = ["--benchmark", str(bench), "--images", str(images), "--profile", "tiny"]
    assert (
        main(
            [
                "finetune",
                "train",
                "--model",
                "tiny-clip",
                "--negatives",
                "swap",
                "--k",
                "2",
                "--seed",
                "0",
                "--steps",
                "4",
                "--out",
                str(ck),
                *args,
            ]
        )
        == 0
    )
    assert "steps/s" in capsys.readouterr().out
    evaluation = ck / "split" / "evaluation.parquet"
    # by name through the written registry, with the project's own `score` verb
    monkeypatch.setenv("AUTOCOMP_MODEL_REGISTRY", str(ck / "registry.yaml"))
    name = json.loads((ck / "run.json").read_text())["entry"]
    assert (
        main(
            [
                "score",
                "--model",
                name,
                "--benchmark",
                str(evaluation),
                "--images",
                str(images),
                "--out",
                str(tmp_path / "s-name"),
            ]
        )
        == 0
    )
    monkeypatch.delenv("AUTOCOMP_MODEL_REGISTRY")
    runs = []
    for model in (str(ck), "tiny-clip"):
        runs.append(str(tmp_path / f"s{len(runs)}"))
        assert (
            main(
                [
                    "finetune",
                    "score",
                    "--model",
                    model,
                    "--benchmark",
                    str(evaluation),
                    "--images",
                    str(images),
                    "--out",
                    runs[-1],
                ]
            )
            == 0
        )
    a = pq.read_table(tmp_path / "s-name" / name / "scores").sort_by("sample_id")
    b = pq.read_table(tmp_path / "s0" / "scores").sort_by("sample_id")
    assert a["score"].equals(b["score"])
    assert (
        main(
            [
                "finetune",
                "report",
                "--runs",
                *runs,
                "--checkpoints",
                str(ck),
                "--out",
                str(tmp_path / "report"),
                "--benchmark",
                str(evaluation),
            ]
        )
        == 0
    )
    deltas = pq.read_table(tmp_path / "report" / "finetune_deltas.parquet").to_pylist()
    assert {(r["variant"], r["set"]) for r in deltas} == {("swap", "swap"), ("swap", "confusion")}
    assert "training curve" in (tmp_path / "report" / "report.html").read_text()
    # the project's whole report over the same runs has the fine-tuning sections and compares
    # the fine-tuned model with its base (hard-negative deltas, via the entry's base_model)
    index = (tmp_path / "report" / "full" / "index.html").read_text()
    assert "Fine-tuned vs pretrained (Table 8)" in index
    hard = pq.read_table(tmp_path / "report" / "full" / "tables" / "hard_negative_deltas.parquet")
    assert set(hard["model"].to_pylist()) == {json.loads((ck / "run.json").read_text())["entry"]}


def test_cli_refuses_bad_input(color_bench, tmp_path, capsys):
    bench, images = color_bench
    code = main(
        [
            "finetune",
            "train",
            "--model",
            "tiny-qwen2.5-vl",
            "--negatives",
            "swap",
            "--benchmark",
            str(bench),
            "--out",
            str(tmp_path / "x"),
            "--profile",
            "tiny",
        ]
    )
    assert code == 2 and "open_clip models only" in capsys.readouterr().err
    code = main(
        [
            "finetune",
            "train",
            "--model",
            "tiny-clip",
            "--negatives",
            "swap",
            "--benchmark",
            str(tmp_path / "missing.parquet"),
            "--out",
            str(tmp_path / "y"),
        ]
    )
    assert code == 2 and "no such file" in capsys.readouterr().err
