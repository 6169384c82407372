"""Backends as data (autocomp.scoring.backends) and AUTOCOMP_MODEL_REGISTRY adding models: what
the registry, the checks, the report layout and load_scorer ask of a backend, without a model."""

from __future__ import annotations

import dataclasses
import functools
import os

import pytest
import yaml

from autocomp.config import ScoreConfig
from autocomp.errors import UsageError
from autocomp.scoring import backends, load_scorer
from autocomp.scoring.checks import check_mode
from autocomp.scoring.registry import REGISTRY_FILE, all_models, get_model

EXTRA = {"name": "my-vlm", "title": "Mine", "backend": "transformers_vlm", "score": "loglik",
         "model_class": "Qwen2_5_VLForConditionalGeneration", "weights": "org/mine",
         "dtype": "bfloat16", "gpus": 1, "gpu_memory_gb": 24, "trust_remote_code": False}  # fmt: skip


def _registry(path, *entries):
    path.write_text(yaml.safe_dump({"models": list(entries)}, sort_keys=False))
    return str(path)


def test_the_shipped_backends_say_what_the_modules_used_to_ask_by_name():
    clip, vlm = backends.get("open_clip"), backends.get("transformers_vlm")
    assert (clip.group, clip.batch_option, clip.scores) == ("contrastive", "text_batch",
                                                            ("cosine", "sigmoid"))  # fmt: skip
    assert (vlm.group, vlm.batch_option, vlm.scores) == ("generative", "chunk_size", ("loglik",))
    assert clip.finetune and not vlm.finetune
    assert vlm.blind and vlm.prompts and not clip.blind and not clip.prompts
    assert clip.images and vlm.images
    assert clip.required - backends.COMMON_KEYS == {"architecture", "preprocess"}
    assert vlm.required - backends.COMMON_KEYS == {"model_class"}
    entry = get_model("clip-vit-b-16")
    assert clip.hub_repo(entry) == "timm/vit_base_patch16_clip_224.openai"
    assert clip.weights_text(entry) == "ViT-B-16 / openai"
    assert vlm.hub_repo(get_model("qwen2.5-vl-7b")) == "Qwen/Qwen2.5-VL-7B-Instruct"


def test_an_unknown_backend_is_one_line_naming_the_known_ones():
    with pytest.raises(UsageError) as caught:
        backends.get("onnx", "model registry x: models[0]")
    assert "open_clip, transformers_vlm" in str(caught.value)
    assert backends.ENTRY_POINT_GROUP in str(caught.value) and "\n" not in str(caught.value)
    assert backends.group_of("onnx") == backends.OTHER_GROUP  # a report on another machine


def test_row_groups_sort_paper_first_then_by_name_other_last():
    groups = ["other", "zebra", "generative", "pixel statistics", "contrastive"]
    assert sorted(groups, key=backends.group_rank) == [
        "contrastive", "generative", "pixel statistics", "zebra", "other",
    ]  # fmt: skip


def test_the_model_registry_variable_adds_models(tmp_path, monkeypatch):
    shipped = all_models()
    first = _registry(tmp_path / "a.yaml", EXTRA)
    second = _registry(tmp_path / "b.yaml", {**EXTRA, "name": "my-vlm-2"})
    monkeypatch.setenv("AUTOCOMP_MODEL_REGISTRY", os.pathsep.join([first, second]))
    models = all_models()
    assert list(models) == [*shipped, "my-vlm", "my-vlm-2"]  # shipped first, then in file order
    assert models["my-vlm"].weights == "org/mine"
    assert all_models(first).keys() == {"my-vlm"}  # a path given: that file alone


def test_a_name_registered_twice_is_refused_unless_it_is_the_same_entry(tmp_path, monkeypatch):
    shipped = yaml.safe_load(REGISTRY_FILE.read_text())["models"]
    clip = next(m for m in shipped if m["name"] == "tiny-clip")
    same = _registry(tmp_path / "same.yaml", clip)  # as a fine-tune's registry.yaml repeats it
    monkeypatch.setenv("AUTOCOMP_MODEL_REGISTRY", same)
    assert all_models()["tiny-clip"] == get_model("tiny-clip")
    changed = _registry(tmp_path / "changed.yaml", {**clip, "title": "Mine"})
    monkeypatch.setenv("AUTOCOMP_MODEL_REGISTRY", changed)
    with pytest.raises(UsageError) as caught:
        all_models()
    message = str(caught.value)
    assert "tiny-clip" in message and "changed.yaml" in message and "\n" not in message
    assert "never replaces" in message


def test_an_entry_point_named_like_a_shipped_backend_is_refused(tmp_path, monkeypatch):
    info = tmp_path / "thief-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thief\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[autocomp.scoring_backends]\nopen_clip = thief:B\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh = functools.lru_cache(maxsize=1)(backends._entry_points.__wrapped__)
    monkeypatch.setattr(backends, "_entry_points", fresh)
    with pytest.raises(UsageError, match="shipped backend's name; rename it"):
        backends.names()


def test_the_mode_check_asks_the_backend(monkeypatch):
    clip = get_model("tiny-clip")
    with pytest.raises(UsageError, match="without images"):
        check_mode(clip, ScoreConfig(blind="likelihood"))
    check_mode(get_model("tiny-llava"), ScoreConfig(blind="likelihood"))
    text_only = dataclasses.replace(backends.SHIPPED["transformers_vlm"], images=False)
    monkeypatch.setitem(backends.SHIPPED, "transformers_vlm", text_only)
    with pytest.raises(UsageError, match="pass --blind"):
        check_mode(get_model("tiny-llava"), ScoreConfig())


class Recorder:
    """A scorer class that records how load_scorer built it (the batch keyword)."""

    def __init__(self, entry, device=None, **options):
        self.entry, self.device, self.options = entry, device, options


def test_load_scorer_sets_the_backends_own_batch_keyword(monkeypatch):
    mine = dataclasses.replace(
        backends.SHIPPED["open_clip"], scorer=f"{__name__}:Recorder", batch_option="rows"
    )
    monkeypatch.setitem(backends.SHIPPED, "open_clip", mine)
    scorer = load_scorer("tiny-clip", device="cpu", batch_size=7)
    assert isinstance(scorer, Recorder) and scorer.options == {"rows": 7}


def test_the_report_groups_models_by_their_backend():
    from autocomp.analysis.paper_tables import layout_of

    models = {"a": {"backend": "open_clip"}, "b": {"backend": "transformers_vlm"},
              "c": {"backend": "not-installed-here"}, "d": {}}  # fmt: skip
    layout = layout_of(models, {})
    assert [layout.group(m) for m in "abcd"] == ["contrastive", "generative", "other", "other"]


def test_an_entry_names_one_of_its_backends_engines(tmp_path):
    from autocomp.scoring.generative import VlmScorer
    from autocomp.scoring.registry import backend_class
    from autocomp.scoring.vllm_engine import VllmScorer  # vLLM itself is imported only to load

    vlm = backends.get("transformers_vlm")
    assert vlm.engine_names == ("transformers", "vllm")
    assert backends.get("open_clip").engine_names == ()
    assert backend_class(get_model("tiny-qwen2.5-vl")) is VlmScorer  # the default engine
    assert backend_class(get_model("tiny-qwen2.5-vl-vllm")) is VllmScorer
    assert vlm.scorer_class("transformers") is VlmScorer
    with pytest.raises(UsageError, match=r"engine: 'tgi': must be one of transformers, vllm"):
        all_models(_registry(tmp_path / "r.yaml", {**EXTRA, "engine": "tgi"}))
    clip = {k: v for k, v in get_model("clip-vit-b-16").raw.items()}
    with pytest.raises(UsageError, match="engine"):  # a backend of one engine takes no engine:
        all_models(_registry(tmp_path / "c.yaml", {**clip, "engine": "vllm"}))
    with pytest.raises(UsageError, match="must be one of transformers, vllm"):
        vlm.scorer_class("tgi")


def test_an_engine_not_installed_here_is_one_line_naming_its_environment():
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.fail("this test runs in the main environment, which has no vLLM")
    with pytest.raises(UsageError, match=r"engine: 'vllm': is not installed here.*make vllm-env"):
        load_scorer("tiny-qwen2.5-vl-vllm", device="cpu")
