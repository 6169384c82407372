"""Caption, render and validate stages with tiny random-weight models, loaded through the
production loaders (offline, CPU)."""

from __future__ import annotations

import json
from dataclasses import replace

import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.config import CaptionConfig, RenderConfig, ValidateConfig
from autocomp.errors import UsageError
from autocomp.generation import caption as captioning
from autocomp.generation import checks
from autocomp.generation.render import image_seed, render_stage
from autocomp.generation.validate import Models, check_detector_vocabulary, validate_stage
from autocomp.protocol.stages import sample_stage
from autocomp.store.shards import read_stage, shard_path

CAPTION = CaptionConfig(captioner="tiny-llm", num_shards=2, fallback="minimal")
RENDER = RenderConfig(renderer="tiny-sd3", num_shards=2)
VALIDATE = ValidateConfig(
    detector="tiny-grounding-dino", segmenter="tiny-sam2", vqa="tiny-qwen2.5-vl"
)

pytestmark = pytest.mark.slow


class Scripted:
    """A captioner that replays replies per concept spec (for the protocol, not the model)."""

    settings: dict = {}

    def __init__(self, replies):
        self.replies = replies  # attempt number -> list of replies, in prompt order
        self.calls = []

    def generate(self, prompts, seeds):
        self.calls.append((len(prompts), list(seeds)))
        return self.replies[len(self.calls)][: len(prompts)]


def _rows(path):
    return pq.read_table(path).to_pylist()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """sample -> caption (tiny LLM, minimal fallback) -> render (tiny SD3), two shards."""
    folder = tmp_path_factory.mktemp("gen")
    sample_stage("color", 2, 3, 0, folder / "concepts.parquet")
    summary = captioning.caption_stage(folder / "concepts.parquet", folder / "captions", CAPTION)
    render = render_stage(folder / "captions", folder / "render", RENDER)
    return folder, summary, render


# ----------------------------------------------------------------------------- captions


def test_retries_only_the_failures_and_records_every_attempt(tmp_path, color):
    sample_stage("color", 2, 2, 0, tmp_path / "c.parquet")
    rows = _rows(tmp_path / "c.parquet")
    good = [f"A {r['attributes'][0]} {r['objects'][0]} stands beside a {r['attributes'][1]} "
            f"{r['objects'][1]} in a kitchen." for r in rows]  # fmt: skip
    scripted = Scripted({1: ["", good[1]], 2: [good[0]]})
    results, attempts = captioning.caption_rows(rows, scripted, seed=7)
    assert [r["status"] for r in results] == ["accepted", "accepted"]
    assert [r["attempts"] for r in results] == [2, 1]
    assert [c[0] for c in scripted.calls] == [2, 1]  # the second call holds only the failure
    assert [(a["attempt"], a["verdict"]) for a in attempts] == [
        (1, "empty"), (1, "accepted"), (2, "accepted"),
    ]  # fmt: skip
    # seeds are per concept and attempt, stable, and differ between attempts
    assert attempts[0]["seed"] == captioning.attempt_seed(7, rows[0]["concept_id"], 1)
    assert attempts[2]["seed"] == captioning.attempt_seed(7, rows[0]["concept_id"], 2)
    assert attempts[0]["seed"] != attempts[2]["seed"]


def test_three_failures_drop_the_concept_or_fall_back(tmp_path):
    sample_stage("color", 2, 1, 0, tmp_path / "c.parquet")
    rows = _rows(tmp_path / "c.parquet")
    bad = {1: ["x"], 2: ["Caption:\n\nTwo lines"], 3: ["a" * 500]}
    results, attempts = captioning.caption_rows(rows, Scripted(bad), seed=0)
    assert results[0]["status"] == "dropped" and results[0]["contextual_caption"] is None
    assert [a["verdict"] for a in attempts][1:] == ["multiline", "too_long"]
    results, _ = captioning.caption_rows(rows, Scripted(bad), seed=0, fallback="minimal")
    assert results[0]["status"] == "fallback"
    assert results[0]["contextual_caption"] == rows[0]["minimal_caption"]


def test_caption_stage_with_the_tiny_llm(run_dir):
    folder, summary, _ = run_dir
    assert summary["concepts"] == 3 and summary["fallback"] == 3 and summary["attempts"] == 9
    captions, meta = read_stage(folder / "captions", "captions")
    attempts, _ = read_stage(folder / "captions", "caption_attempts")
    assert captions.num_rows == 3 and attempts.num_rows == 9
    assert meta["config"]["captioner"]["settings"]["temperature"] == 0.7
    # random weights never produce a caption that states its concept: every attempt is rejected
    # with one of the protocol's reason codes
    reasons = {"empty", "multiline", "too_long", "overlap", "missing_binding", "unbound_mention",
               "relation_count"}  # fmt: skip
    assert set(attempts.column("verdict").to_pylist()) <= reasons


def test_caption_stage_resumes_and_refuses_another_config(run_dir):
    folder, _, _ = run_dir
    again = captioning.caption_stage(
        folder / "concepts.parquet", folder / "captions", CAPTION,
        load=lambda: pytest.fail("finished shards must not load the model"),
    )  # fmt: skip
    assert again["skipped_shards"] == 2 and again["concepts"] == 0
    with pytest.raises(UsageError, match="another configuration"):
        captioning.caption_stage(
            folder / "concepts.parquet", folder / "captions",
            replace(CAPTION, fallback=None, settings={"temperature": 0.2}),
        )  # fmt: skip


def test_unknown_captioner_names_the_registered_ones():
    with pytest.raises(UsageError, match="registered: gemma-3-12b-it"):
        captioning.load_captioner("gpt-5")


# ----------------------------------------------------------------------------- render


def test_render_pairs_share_a_seed_and_store_lossless_pngs(run_dir):
    folder, _, summary = run_dir
    assert summary["images"] == 6
    rows, meta = read_stage(folder / "render", "render")
    rows = rows.to_pylist()
    assert meta["config"]["renderer"]["settings"]["num_inference_steps"] == 28
    by_concept = {}
    for r in rows:
        by_concept.setdefault(r["concept_id"], []).append(r)
        with Image.open(folder / "render" / r["image"]) as image:
            assert image.format == "PNG" and image.size == (64, 64)
            info = json.loads(image.text["autocomp"])
        assert info["seed"] == r["seed"] and info["prompt"] == r["caption"]
        assert info["weights"] == "tiny"
    for concept_id, pair in by_concept.items():
        assert {r["condition"] for r in pair} == {"minimal", "contextual"}
        assert {r["seed"] for r in pair} == {image_seed(0, concept_id)}


def test_render_is_reproducible_and_nearly_independent_of_batching(run_dir, tmp_path):
    import numpy as np

    folder, _, _ = run_dir

    def shas(path):
        return {r["sample_id"]: r["sha256"] for r in read_stage(path, "render")[0].to_pylist()}

    render_stage(folder / "captions", tmp_path / "same", RENDER)
    assert shas(tmp_path / "same") == shas(folder / "render")  # same batches: bit-identical
    render_stage(folder / "captions", tmp_path / "one", replace(RENDER, num_shards=1, batch_size=1))
    for row in read_stage(tmp_path / "one", "render")[0].to_pylist():
        a = np.asarray(Image.open(tmp_path / "one" / row["image"]), dtype=int)
        b = np.asarray(Image.open(folder / "render" / row["image"]), dtype=int)
        assert np.abs(a - b).max() <= 1  # per-image generators: only float rounding differs


def test_render_resumes_from_the_images_on_disk(run_dir, tmp_path):
    import shutil

    folder, _, _ = run_dir
    shutil.copytree(folder / "render", tmp_path / "r")
    victim = max((shard_path(tmp_path / "r", "render", i, 2) for i in range(2)),
                 key=lambda p: pq.read_metadata(p).num_rows)  # fmt: skip
    lost = read_stage(victim, "render")[0].to_pylist()
    victim.unlink()  # the shard's table was never written: the worker died before the end
    (tmp_path / "r" / lost[0]["image"]).unlink()  # and one of its images is missing
    summary = render_stage(folder / "captions", tmp_path / "r", RENDER)
    assert summary == {"images": 1, "reused": len(lost) - 1, "skipped_shards": 1}
    assert len(lost) >= 2
    redone = {r["sample_id"]: r for r in read_stage(victim, "render")[0].to_pylist()}
    assert set(redone) == {r["sample_id"] for r in lost}
    for r in lost[1:]:  # reused: the very same files, and the very same rows
        assert redone[r["sample_id"]] == r


def test_a_missing_shard_stops_the_next_stage(run_dir, tmp_path):
    import shutil

    folder, _, _ = run_dir
    shutil.copytree(folder / "render", tmp_path / "r")
    shard_path(tmp_path / "r", "render", 1, 2).unlink()
    with pytest.raises(UsageError, match="missing render shard"):
        validate_stage(tmp_path / "r", tmp_path / "v", VALIDATE)


# ----------------------------------------------------------------------------- validate


def test_validate_runs_every_check_with_tiny_models(run_dir, tmp_path):
    folder, _, _ = run_dir
    summary = validate_stage(
        folder / "render", tmp_path / "v", replace(VALIDATE, num_shards=2, all_checks=True)
    )
    assert summary["samples"] == 6
    rows = read_stage(tmp_path / "v", "verdicts")[0].to_pylist()
    assert len(rows) == 6 * 4
    for r in rows:
        if r["check"] == "background" and r["condition"] == "contextual":
            assert r["outcome"] == "n/a"
        else:
            assert r["outcome"] in ("pass", "fail")
        if r["check"] == "attributes":
            assert len(json.loads(r["detail"])["answers"]) == 2


def test_cheapest_first_skips_later_checks(run_dir, tmp_path):
    folder, _, _ = run_dir
    validate_stage(folder / "render", tmp_path / "v", VALIDATE)
    rows = read_stage(tmp_path / "v", "verdicts")[0].to_pylist()
    for r in rows:  # the random detector finds dozens of boxes: every object check fails
        if r["check"] == "objects":
            assert r["outcome"] == "fail" and "found" in r["reason"]
        if r["check"] == "attributes":
            assert r["outcome"] == "skipped" and r["reason"] == "failed objects"


def test_bad_images_are_rejected_not_fatal(run_dir, tmp_path):
    import shutil

    folder, _, _ = run_dir
    shutil.copytree(folder / "render", tmp_path / "r")
    rows = read_stage(tmp_path / "r", "render")[0].to_pylist()
    (tmp_path / "r" / rows[0]["image"]).write_bytes(b"\x89PNG\r\n\x1a\n broken")
    Image.new("LA", (64, 64)).save(tmp_path / "r" / rows[1]["image"])  # transparent
    Image.new("L", (64, 64), 255).save(tmp_path / "r" / rows[2]["image"])  # grayscale: normalised
    validate_stage(tmp_path / "r", tmp_path / "v", replace(VALIDATE, masks="boxes"))
    verdicts = {(r["sample_id"], r["check"]): r
                for r in read_stage(tmp_path / "v", "verdicts")[0].to_pylist()}  # fmt: skip
    assert "cannot be decoded" in verdicts[(rows[0]["sample_id"], "image")]["reason"]
    assert "transparent" in verdicts[(rows[1]["sample_id"], "image")]["reason"]
    normalised = verdicts[(rows[2]["sample_id"], "image")]
    assert normalised["outcome"] == "pass" and "L->RGB" in normalised["detail"]
    assert verdicts[(rows[0]["sample_id"], "objects")]["outcome"] == "skipped"


def test_vqa_option_scores_are_option_likelihoods(run_dir, color):
    """The judge's option scores equal a naive full forward of prompt + image + option."""
    from autocomp.generation.vqa import VqaJudge
    from autocomp.scoring import load_scorer

    folder, _, _ = run_dir
    row = read_stage(folder / "render", "render")[0].to_pylist()[0]
    image, _ = checks.normalize_image(folder / "render" / row["image"])
    asked = checks.questions(color, row["objects"], row["attributes"])
    judge = VqaJudge("tiny-qwen2.5-vl")
    shared = judge.option_scores([("img", image, q) for q in asked])
    naive = VqaJudge("tiny-qwen2.5-vl", scorer=load_scorer("tiny-qwen2.5-vl", naive=True))
    reference = naive.option_scores([("img", image, q) for q in asked])
    assert [len(s) for s in shared] == [len(color.labels)] * 2
    for a, b in zip(shared, reference):
        assert a == pytest.approx(b, abs=1e-4)
        assert a.index(max(a)) == b.index(max(b))
    assert judge.scorer.calls["prefix_forwards"] == 2  # one per question: image + question once


def test_a_judge_must_be_a_generative_vlm():
    from autocomp.generation.vqa import VqaJudge

    with pytest.raises(UsageError, match="generative VLM"):
        VqaJudge("tiny-clip")


def test_object_names_too_long_for_the_detector_stop_the_stage():
    models = Models("tiny-grounding-dino", "tiny-sam2", "tiny-qwen2.5-vl", None, {})
    check_detector_vocabulary(models, {"lamp", "cup"})
    with pytest.raises(UsageError, match="too long for the detector"):
        check_detector_vocabulary(models, {"extraordinarily long ceremonial candelabrum"})


def test_segmenter_gives_one_union_mask(run_dir):
    from autocomp.generation.detection import load_segmenter

    segmenter = load_segmenter("tiny-sam2")
    image = Image.new("RGB", (64, 48), "white")
    mask = segmenter.union_mask(image, [[1, 1, 20, 20], [30, 10, 60, 40]])
    assert mask.shape == (48, 64) and mask.dtype == bool
    assert not segmenter.union_mask(image, []).any()


def test_random_weight_variants_read_configs_only(run_dir):
    """Throughput benchmarks build full-size architectures from their configs alone."""
    from autocomp.generation.detection import Detector
    from autocomp.generation.registry import get_generation_model
    from autocomp.generation.render import DiffusersRenderer, Renderer

    renderer = DiffusersRenderer(get_generation_model("renderer", "tiny-sd3"), random_weights=True)
    assert isinstance(renderer, Renderer)
    images = renderer.render(["a red cup"], [1])
    assert images[0].size == (64, 64)
    detector = Detector(
        get_generation_model("detector", "tiny-grounding-dino"), random_weights=True
    )
    ((boxes, scores),) = detector.detect([(images[0], "cup")])
    assert len(boxes) == len(scores)


@pytest.mark.parametrize(
    "loader, name, weights",
    [
        (
            "autocomp.generation.render:load_renderer",
            "sd3.5-large",
            "stabilityai/stable-diffusion-3.5-large",
        ),
        (
            "autocomp.generation.detection:load_detector",
            "grounding-dino-tiny",
            "IDEA-Research/grounding-dino-tiny",
        ),
        (
            "autocomp.generation.detection:load_segmenter",
            "sam2.1-hiera-large",
            "facebook/sam2.1-hiera-large",
        ),
        ("autocomp.generation.caption:load_captioner", "gemma-3-12b-it", "google/gemma-3-12b-it"),
    ],
)
def test_weights_missing_offline_name_the_id_and_the_fix(loader, name, weights):
    import importlib

    module, function = loader.split(":")
    with pytest.raises(UsageError) as info:
        getattr(importlib.import_module(module), function)(name)
    assert weights in str(info.value) and "HF_HOME" in str(info.value)


def test_an_empty_shard_flows_through_every_stage(run_dir, tmp_path):
    """With more shards than concepts some shards are empty: they are written, not an error."""
    folder, _, _ = run_dir
    render_stage(folder / "captions", tmp_path / "r", replace(RENDER, num_shards=8))
    empty = [
        i
        for i in range(8)
        if pq.read_metadata(shard_path(tmp_path / "r", "render", i, 8)).num_rows == 0
    ]
    assert empty
    validate_stage(tmp_path / "r", tmp_path / "v", replace(VALIDATE, num_shards=8), empty[0])
    assert pq.read_metadata(shard_path(tmp_path / "v", "verdicts", empty[0], 8)).num_rows == 0
