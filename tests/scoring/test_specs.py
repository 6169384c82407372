"""--model values: parsing (registered names, open_clip:, hf:) and entry inference, no weights
loaded (open_clip's tables and transformers' classes only)."""

from __future__ import annotations

import json
import time

import pytest

from autocomp.errors import UsageError
from autocomp.scoring.specs import (
    parse_spec,
    parse_specs,
    resolve_models,
    resolve_spec,
    safe_name,
    split_values,
)

TINY_CLIP = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "head_width": 32, "patch_size": 8},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
}


def test_safe_names_and_comma_lists():
    assert (
        safe_name("open_clip-ViT-B-32-laion2b_s34b_b79k") == "open_clip-ViT-B-32-laion2b_s34b_b79k"
    )
    assert safe_name("hf-../../etc passwd") == "hf-..-..-etc-passwd"
    assert safe_name("../..") == "model"
    assert "/" not in safe_name("a/b\\c:d") and len(safe_name("x" * 500)) <= 100
    assert split_values(["a,b", " c ", "d,,"]) == ["a", "b", "c", "d"]


def test_registered_names_and_their_typos():
    spec = parse_spec("tiny-clip")
    assert (spec.kind, spec.name, spec.entry.name) == ("registry", "tiny-clip", "tiny-clip")
    assert resolve_spec(spec) is spec.entry
    with pytest.raises(UsageError, match="closest: tiny-clip"):
        parse_spec("tiny-clpi")


def test_a_typo_in_the_third_value_fails_fast_before_any_library_loads():
    start = time.perf_counter()
    with pytest.raises(UsageError, match="tiny-clpi"):  # not the 2nd value's tag: every value
        resolve_models(["tiny-clip", "open_clip:ViT-B-32:no_such_tag,tiny-clpi"])  # parses first
    assert time.perf_counter() - start < 1.0


def test_open_clip_specs_parse_into_architecture_and_weights(tmp_path):
    spec = parse_spec("open_clip:ViT-B-32:laion2b_s34b_b79k")
    assert (spec.kind, spec.architecture, spec.pretrained) == (
        "open_clip", "ViT-B-32", "laion2b_s34b_b79k",
    )  # fmt: skip
    assert spec.name == "open_clip-ViT-B-32-laion2b_s34b_b79k"
    spec = parse_spec("open_clip:ViT-B-32:file:/ckpts/run 1/epoch_10.pt")
    assert spec.pretrained == "file:/ckpts/run 1/epoch_10.pt"
    assert spec.name == "open_clip-ViT-B-32-epoch_10"
    spec = parse_spec("open_clip:hf-hub:timm/ViT-B-16-SigLIP")
    assert (spec.architecture, spec.pretrained) == ("hf-hub:timm/ViT-B-16-SigLIP", None)
    assert spec.name == "open_clip-timm-ViT-B-16-SigLIP"
    for bad in ("open_clip:ViT-B-32", "open_clip::openai", "open_clip:hf-hub:nope"):
        with pytest.raises(UsageError, match="^models: "):
            parse_spec(bad)
    with pytest.raises(UsageError, match="holds no open_clip_config.json"):
        parse_spec(f"open_clip:local-dir:{tmp_path}")


def test_hf_specs_local_folders_and_hub_ids(tmp_path):
    spec = parse_spec("hf:Qwen/Qwen2.5-VL-7B-Instruct@abc123")
    assert (spec.source, spec.revision) == ("Qwen/Qwen2.5-VL-7B-Instruct", "abc123")
    assert spec.name == "hf-Qwen-Qwen2.5-VL-7B-Instruct-abc123"
    (tmp_path / "my model").mkdir()
    (tmp_path / "my model" / "config.json").write_text("{}")
    spec = parse_spec(f"hf:{tmp_path / 'my model'}")
    assert (spec.source, spec.name) == (str(tmp_path / "my model"), "hf-my-model")
    with pytest.raises(UsageError, match="no such folder"):
        parse_spec(f"hf:{tmp_path / 'nowhere'}")
    with pytest.raises(UsageError, match="neither config.json nor open_clip_config.json"):
        parse_spec(f"hf:{tmp_path}")
    with pytest.raises(UsageError, match="neither a local folder nor a hub id"):
        parse_spec("hf:just-a-name")


def test_duplicate_and_reserved_names_are_refused():
    with pytest.raises(UsageError, match="same folder 'tiny-clip'"):
        parse_specs(["tiny-clip,tiny-siglip", "tiny-clip"])
    with pytest.raises(UsageError, match="at least one model"):
        parse_specs([" , "])
    assert [s.name for s in parse_specs(["tiny-clip", "tiny-siglip,tiny-llava"])] == [
        "tiny-clip", "tiny-siglip", "tiny-llava",
    ]  # fmt: skip


def test_open_clip_entries_take_score_and_preprocessing_from_open_clip(tmp_path):
    entry = resolve_spec(parse_spec("open_clip:ViT-B-32:openai"))
    assert (entry.backend, entry.score, entry.weights) == ("open_clip", "cosine", "openai")
    assert entry.preprocess["quick_gelu"] is True  # OpenAI weights were trained with QuickGELU
    assert entry.preprocess["resolution"] == 224
    entry = resolve_spec(parse_spec("open_clip:ViT-B-16-SigLIP:webli"))
    assert entry.score == "sigmoid" and entry.preprocess["resize_mode"] == "squash"
    assert entry.preprocess["mean"] == [0.5, 0.5, 0.5]
    assert entry.record()["spec"] == "open_clip:ViT-B-16-SigLIP:webli"
    checkpoint = tmp_path / "ckpt.safetensors"
    checkpoint.write_bytes(b"weights")
    entry = resolve_spec(parse_spec(f"open_clip:autocomp-tiny-sigmoid:file:{checkpoint}"))
    assert entry.score == "sigmoid" and entry.weights == f"file:{checkpoint}"
    with pytest.raises(UsageError, match="unknown pretrained weights.*laion2b_s34b_b79k"):
        resolve_spec(parse_spec("open_clip:ViT-B-32:laion2b_xx"))
    with pytest.raises(UsageError, match="closest: ViT-B-32"):
        resolve_spec(parse_spec("open_clip:ViT-B-3:openai"))
    with pytest.raises(UsageError, match="not found"):
        resolve_spec(parse_spec(f"open_clip:ViT-B-32:file:{tmp_path / 'none.pt'}"))


def _folder(path, **files):
    path.mkdir()
    for name, content in files.items():
        data = json.dumps(content) if isinstance(content, dict) else content
        (path / name.replace("__", ".")).write_text(data)
    return path


def test_hf_folders_infer_their_backend(tmp_path):
    vlm = _folder(tmp_path / "vlm", config__json={
        "architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
        "vision_config": {"model_type": "clip_vision_model"}, "torch_dtype": "bfloat16",
    })  # fmt: skip
    entry = resolve_spec(parse_spec(f"hf:{vlm}"))
    assert (entry.backend, entry.score, entry.model_class) == (
        "transformers_vlm", "loglik", "LlavaForConditionalGeneration",
    )  # fmt: skip
    assert (entry.weights, entry.dtype, entry.name) == (str(vlm), "bfloat16", "hf-vlm")
    export = _folder(tmp_path / "export", open_clip_config__json={
        "model_cfg": {**TINY_CLIP, "init_logit_bias": -10},
        "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]},
    }, open_clip_model__safetensors="x")  # fmt: skip
    entry = resolve_spec(parse_spec(f"hf:{export}"))
    assert (entry.backend, entry.score, entry.architecture) == (
        "open_clip", "sigmoid", f"local-dir:{export}",
    )  # fmt: skip
    assert entry.preprocess["mean"] == [0.5, 0.5, 0.5] and entry.preprocess["resolution"] == 32
    bare = _folder(tmp_path / "bare", open_clip_config__json={"model_cfg": TINY_CLIP})
    with pytest.raises(UsageError, match="holds no weights"):
        resolve_spec(parse_spec(f"hf:{bare}"))


@pytest.mark.parametrize(
    "config, message",
    [
        ({"architectures": ["CLIPModel"], "model_type": "clip"}, "open_clip:ARCH:PRETRAINED"),
        ({"architectures": ["SiglipModel"], "model_type": "siglip"}, "without open_clip weights"),
        ({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, "not a vision-language"),
        ({"architectures": ["NoSuchVLForConditionalGeneration"], "vision_config": {}},
         "update transformers"),
        ({"architectures": ["MyVLM"], "vision_config": {}, "auto_map": {"AutoModel": "m.MyVLM"}},
         "allow_remote_code"),
    ],
)  # fmt: skip
def test_hf_folders_that_cannot_be_scored_say_what_to_do(tmp_path, config, message):
    folder = _folder(tmp_path / "m", config__json=config)
    with pytest.raises(UsageError, match=message):
        resolve_spec(parse_spec(f"hf:{folder}"))


def test_hub_repositories_of_open_clip_weights_map_to_their_pretrained_pair():
    from autocomp.scoring.contrastive import open_clip_pair_for_hub

    assert open_clip_pair_for_hub("timm/vit_base_patch32_clip_224.openai") == ("ViT-B-32", "openai")
    assert open_clip_pair_for_hub("laion/CLIP-ViT-B-32-laion2B-s34B-b79K") == (
        "ViT-B-32", "laion2b_s34b_b79k",
    )  # fmt: skip
    assert open_clip_pair_for_hub("openai/clip-vit-base-patch32") is None
