"""The image each score class runs in: a model whose engine lives in an image of its own (vLLM:
the caption image, and on a class without GPUs its CPU variant) forms classes of its own
(`4x80gb-vllm`, `cpu-vllm`) with the same resources as its size; every other class runs in the
gpu image. A tiny entry stays in its size's class (the tiny vLLM entries are the vllm lane's), so
the shipped registry names no variant. The variant's name is the tag `make images IMAGES=caption VARIANT=cpu` builds and
`make push` locks (images/imagetool.py keeps the same keys)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest
import yaml

from autocomp import __version__
from autocomp.errors import UsageError
from autocomp.pipelines.cluster import images
from autocomp.pipelines.cluster.gpus import ScoreClass, score_class
from autocomp.pipelines.cluster.plan import score_groups
from autocomp.scoring.registry import all_models

ROOT = Path(__file__).resolve().parents[2]
TOOL = runpy.run_path(str(ROOT / "images" / "imagetool.py"))
DIGEST = "sha256:" + "ef" * 32


def _small_vllm() -> dict:
    """A CPU vLLM entry that is not tiny (a text model from the hub): a `cpu-vllm` class."""
    small = {**all_models()["tiny-qwen2.5-vl"].raw, "name": "small-vllm", "engine": "vllm",
             "weights": "Qwen/Qwen2.5-0.5B-Instruct", "model_class": "Qwen2ForCausalLM"}  # fmt: skip
    small.pop("tiny_config", None)
    return small


def test_vllm_entries_form_their_own_classes_in_the_caption_image(tmp_path):
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump({"models": [_small_vllm()]}, sort_keys=False))
    groups = {k.name: (k, m) for k, m in score_groups(path).items()}  # that file's models
    assert list(groups) == ["cpu-vllm"] and groups["cpu-vllm"][1] == ["small-vllm"]
    assert groups["cpu-vllm"][0].image == ("caption", "cpu")
    shipped, models = score_groups(), all_models()
    for klass, members in shipped.items():
        engines = {models[m].engine or models[m].kind.default_engine for m in members}
        assert klass.image == ("gpu", "") and not klass.engine, klass
        if engines & {"vllm"}:  # only the tiny vLLM entries, in the CPU class
            assert klass == ScoreClass(0, 0), klass
    # the tiny vLLM entries stay in the CPU class of the default engines (the vllm lane's):
    # the shipped registry names no image variant
    tiny = shipped[ScoreClass(0, 0)]
    assert {"tiny-qwen2.5-vl", "tiny-qwen2.5-vl-vllm", "tiny-llava-vllm"} <= set(tiny)
    assert not any(k.engine for k in score_groups())
    assert images.named_keys() == images.IMAGE_KINDS
    assert images.named_keys(path) == (*images.IMAGE_KINDS, "caption-cpu")


def test_a_class_split_by_engine_keeps_its_sizes_resources():
    """Only the image differs: GPUs, GPU size, host CPU and parallelism are the size's."""
    plain, vllm = score_class(4, 260), score_class(4, 260, "vllm")
    assert (plain.name, vllm.name) == ("4x80gb", "4x80gb-vllm")
    assert (vllm.gpus, vllm.gpu_gb, vllm.cpu, vllm.parallelism) == (
        plain.gpus, plain.gpu_gb, plain.cpu, plain.parallelism)  # fmt: skip
    assert (plain.image, vllm.image) == (("gpu", ""), ("caption", ""))
    # the default engine by name, or an engine with no image of its own: the plain class
    assert score_class(4, 260, "transformers") == score_class(4, 260, None) == plain


def test_a_registry_whose_only_vllm_entry_needs_four_gpus(tmp_path):
    models = all_models()
    big = {**models["qwen3.5-122b-a10b"].raw, "name": "big-vllm", "engine": "vllm"}
    entries = [models["clip-vit-b-16"].raw, models["qwen3.5-122b-a10b"].raw, big]
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump({"models": entries}, sort_keys=False))
    groups = {k.name: (k, m) for k, m in score_groups(path).items()}
    assert list(groups) == ["1x16gb", "4x80gb", "4x80gb-vllm"]  # GPU order, engine last
    klass, members = groups["4x80gb-vllm"]
    assert members == ["big-vllm"] and klass.image == ("caption", "")
    assert groups["4x80gb"][1] == ["qwen3.5-122b-a10b"] and groups["4x80gb"][0].image == (
        "gpu", "")  # fmt: skip


@pytest.fixture
def rule(monkeypatch, tmp_path):
    """The image rule for a fixed commit and registry, with no lock (or the one a test writes)."""
    monkeypatch.setenv("AUTOCOMP_GIT_COMMIT", "0123456789ab")
    monkeypatch.setenv("AUTOCOMP_IMAGE_REGISTRY", "r.test/ml")
    monkeypatch.setenv("AUTOCOMP_IMAGE_LOCK", str(tmp_path / "lock.json"))
    for cached in (images.git_commit, images.image_lock):
        cached.cache_clear()
    yield tmp_path / "lock.json"
    for cached in (images.git_commit, images.image_lock):
        cached.cache_clear()


def test_the_cpu_variant_is_the_tag_make_images_builds(rule):
    tag = f"{__version__}-0123456789ab"
    with pytest.warns(UserWarning, match="no image lock"):
        assert images.image("caption", "cpu") == f"r.test/ml/autocomp-caption:{tag}-cpu"
    assert images.image("caption") == f"r.test/ml/autocomp-caption:{tag}"
    assert images.placeholder("caption", "cpu") == "autocomp-caption:unresolved-cpu"
    assert images.resolve("autocomp-caption:unresolved-cpu") == images.image("caption", "cpu")
    assert images.resolve("autocomp-gpu:unresolved") == images.image("gpu")
    assert images.key_of(images.image("caption", "cpu")) == "caption-cpu"
    assert images.key_of(images.image("caption")) == "caption"
    assert images.key_of("python:3.11") is None
    with pytest.raises(ValueError, match="unknown variant 'cpu' of the gpu image"):
        images.image("gpu", "cpu")
    with pytest.raises(ValueError, match="unknown variant 'rocm' of the caption image"):
        images.placeholder("caption", "rocm")


def test_the_lock_keys_the_variant_apart(rule):
    """`make push IMAGES=caption VARIANT=cpu` locks caption-cpu; compile names it by digest,
    and the caption image by its own entry."""
    tag = f"{__version__}-0123456789ab"
    lock = {key: {"image": images.tagged(key, "r.test/ml", tag), "digest": DIGEST}
            for key in images.image_keys()}  # fmt: skip
    lock["caption"]["digest"] = "sha256:" + "01" * 32
    rule.write_text(json.dumps(lock))
    assert images.image("caption", "cpu") == f"r.test/ml/autocomp-caption:{tag}-cpu@{DIGEST}"
    assert images.image("caption").endswith(f":{tag}@sha256:" + "01" * 32)
    images.check_cluster_images()  # every image locked: nothing refused


def test_compile_without_the_variant_in_the_lock_says_how_to_push_it(rule, monkeypatch):
    monkeypatch.delenv("AUTOCOMP_IMAGE_REGISTRY")
    tag = f"{__version__}-0123456789ab"
    rule.write_text(json.dumps({k: {"image": images.tagged(k, "r.test/ml", tag), "digest": DIGEST}
                                for k in images.IMAGE_KINDS}))  # fmt: skip
    images.check_cluster_images()  # the shipped registry names no variant: the three suffice
    extra = rule.parent / "registry.yaml"
    extra.write_text(yaml.safe_dump({"models": [_small_vllm()]}, sort_keys=False))
    monkeypatch.setenv("AUTOCOMP_MODEL_REGISTRY", str(extra))  # a CPU vLLM entry: cpu-vllm
    with pytest.raises(UsageError) as refused:
        images.check_cluster_images()
    said = str(refused.value)
    assert "pins no caption-cpu image" in said
    assert "`make images push IMAGES=caption VARIANT=cpu`" in said


def test_imagetool_keys_the_lock_as_the_compile_rule_reads_it():
    """The lock `make push` writes (imagetool.py, standard library only) and the keys compile
    looks up (cluster.images) stay in step, and both read a variant's key off its reference."""
    assert TOOL["LOCK_KEYS"] == images.image_keys()
    assert set(TOOL["VARIANTS"]) == set(images.IMAGE_VARIANTS)
    assert set(TOOL["SIZE_BUDGET_MB"]) == set(images.image_keys())
    for key in images.image_keys():
        reference = images.tagged(key, "r.test/ml", f"{__version__}-abc") + "@" + DIGEST
        assert TOOL["lock_key"](reference) == images.key_of(reference) == key
