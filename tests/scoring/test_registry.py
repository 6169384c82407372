import pytest

from autocomp.errors import UsageError
from autocomp.scoring.backends import SHIPPED
from autocomp.scoring.registry import all_models, get_model


def test_registry_has_the_papers_models():
    models = all_models()
    assert len(models) >= 25
    backends = {m.backend for m in models.values()}
    assert backends == set(SHIPPED)
    paper = {m.paper_name for m in models.values() if m.paper_name}
    for name in ("ViT-B-P16", "ViT-H-P14-378 (OC)", "S-SO400M-P14-384", "S2-Giant-P16-256",
                 "Gemma 3-12B", "Qwen 2.5-72B", "InternVL 3-78B", "Qwen 3.5-122B", "NegCLIP"):  # fmt: skip
        assert name in paper
    assert sum(1 for m in models.values() if m.backend == "open_clip" and not m.is_tiny) >= 21


@pytest.mark.slow
def test_every_open_clip_entry_resolves_in_open_clips_own_table():
    import open_clip

    pretrained = set(open_clip.list_pretrained())
    for m in all_models().values():
        if m.backend != "open_clip" or m.is_tiny or m.weights.startswith("file:"):
            continue
        assert (m.architecture, m.weights) in pretrained, m.name
        cfg = open_clip.get_pretrained_cfg(m.architecture, m.weights)
        assert m.hf_hub == cfg["hf_hub"].rstrip("/")
        assert m.preprocess["mean"] == pytest.approx(list(cfg["mean"]))
        assert m.preprocess["std"] == pytest.approx(list(cfg["std"]))
        assert m.preprocess["quick_gelu"] == bool(cfg.get("quick_gelu"))
        size = open_clip.get_model_config(m.architecture)["vision_cfg"]["image_size"]
        assert m.preprocess["resolution"] == size
        assert m.score == ("sigmoid" if "SigLIP" in m.architecture else "cosine"), m.name


@pytest.mark.slow
def test_every_transformers_entry_names_a_real_class():
    import transformers

    for m in all_models().values():
        if m.backend == "transformers_vlm":
            assert hasattr(transformers, m.model_class), m.model_class
            assert m.weights.count("/") == 1 or m.is_tiny
            assert m.dtype == "bfloat16" or m.is_tiny


def test_resources_and_remote_code_are_explicit():
    for m in all_models().values():
        assert isinstance(m.trust_remote_code, bool)
        assert m.gpus >= (0 if m.is_tiny else 1)
    assert get_model("qwen2.5-vl-72b").gpus >= 2


def test_unknown_model_suggests_close_names():
    with pytest.raises(UsageError) as err:
        get_model("siglip-so400m")
    assert "siglip-so400m-14-384" in str(err.value)


def test_remote_code_is_refused_unless_allowed(tmp_path):
    registry = tmp_path / "registry.yaml"
    entry = (
        "  - {name: remote, title: R, backend: transformers_vlm, score: loglik, model_class: X, "
        "weights: a/b, dtype: bfloat16, gpus: 1, gpu_memory_gb: 1, trust_remote_code: true%s}\n"
    )
    registry.write_text("models:\n" + entry % "")
    with pytest.raises(UsageError, match="allow_remote_code"):
        get_model("remote", registry)
    registry.write_text("models:\n" + entry % ", allow_remote_code: true")
    assert get_model("remote", registry).trust_remote_code


def test_registry_validation(tmp_path):
    registry = tmp_path / "registry.yaml"
    registry.write_text("models:\n  - {name: x, backend: onnx}\n")
    with pytest.raises(UsageError, match="backend must be one of"):
        get_model("x", registry)


@pytest.mark.slow
def test_generation_registry_names_real_classes_builders_and_profiles():
    import diffusers
    import transformers

    from autocomp.config import get_profile
    from autocomp.generation.registry import ROLES, generation_models
    from autocomp.scoring.registry import get_model
    from autocomp.tiny.generation import BUILDERS

    for role in ROLES:
        for entry in generation_models(role).values():
            if entry.pipeline_class:
                assert hasattr(diffusers, entry.pipeline_class), entry.name
            if entry.model_class:
                assert hasattr(transformers, entry.model_class), entry.name
            assert entry.is_tiny == (entry.tiny_builder is not None), entry.name
            if entry.is_tiny:
                assert entry.tiny_builder in BUILDERS
    for name in ("paper", "tiny"):
        chosen = get_profile(name).roles()
        for role in ROLES:
            assert chosen[role] in generation_models(role)
        assert get_model(chosen["vqa"]).backend == "transformers_vlm"
    paper = {role: generation_models(role)[get_profile("paper").roles()[role]] for role in ROLES}
    assert paper["renderer"].settings == {
        "height": 1024, "width": 1024, "num_inference_steps": 28, "guidance_scale": 4.5,
    }  # fmt: skip
    assert paper["captioner"].settings == {"temperature": 0.7, "top_p": 0.9, "max_new_tokens": 150}
    assert paper["detector"].settings["box_threshold"] == 0.4
    assert paper["detector"].settings["text_threshold"] == 0.3
    assert paper["segmenter"].settings == {"brightness": 190, "min_white_fraction": 0.7}
