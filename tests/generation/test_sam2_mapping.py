"""The original-SAM 2 segmenter backend where the package is absent (the main environment), and
the converter's key mapping on hand-checked keys (no model: the sam2 lane runs the models)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autocomp.errors import UsageError
from autocomp.generation import detection
from autocomp.generation.registry import GENERATION_FILE, get_generation_model
from autocomp.generation.sam2_original import convert_key, convert_state_dict

# original key -> transformers' Sam2Model key, traced by hand through convert_sam2_to_hf.py
KEYS = {
    "image_encoder.trunk.blocks.0.mlp.layers.1.weight":
        "vision_encoder.backbone.blocks.0.mlp.proj_out.weight",
    "image_encoder.trunk.blocks.1.norm1.weight": "vision_encoder.backbone.blocks.1.layer_norm1.weight",
    "image_encoder.trunk.patch_embed.proj.weight":
        "vision_encoder.backbone.patch_embed.projection.weight",
    "image_encoder.neck.convs.2.conv.weight": "vision_encoder.neck.convs.2.weight",
    "sam_mask_decoder.iou_prediction_head.layers.1.weight":
        "mask_decoder.iou_prediction_head.layers.0.weight",
    "sam_mask_decoder.transformer.layers.1.mlp.layers.0.bias":
        "mask_decoder.transformer.layers.1.mlp.proj_in.bias",
    "sam_mask_decoder.output_hypernetworks_mlps.3.layers.2.weight":
        "mask_decoder.output_hypernetworks_mlps.3.proj_out.weight",
    "sam_mask_decoder.output_upscaling.1.weight": "mask_decoder.upscale_layer_norm.weight",
    "sam_mask_decoder.pred_obj_score_head.layers.0.weight":
        "mask_decoder.pred_obj_score_head.proj_in.weight",
    "sam_prompt_encoder.pe_layer.positional_encoding_gaussian_matrix":
        "prompt_encoder.shared_embedding.positional_embedding",
    "sam_prompt_encoder.mask_downscaling.4.bias": "prompt_encoder.mask_embed.layer_norm2.bias",
    "no_mem_embed": "no_memory_embedding",
    "memory_encoder.out_proj.weight": "memory_encoder.projection.weight",
    "obj_ptr_proj.layers.2.bias": "object_pointer_proj.proj_out.bias",
}  # fmt: skip


@pytest.mark.parametrize(("original", "port"), sorted(KEYS.items()))
def test_keys_are_renamed_as_the_converter_does(original: str, port: str) -> None:
    assert convert_key(original) == port


def test_point_embeddings_are_stacked_and_the_positional_embedding_shared() -> None:
    import torch

    state = {f"sam_prompt_encoder.point_embeddings.{i}.weight": torch.full((1, 3), float(i))
             for i in range(4)}  # fmt: skip
    gaussian = torch.arange(6.0).reshape(2, 3)
    state["sam_prompt_encoder.pe_layer.positional_encoding_gaussian_matrix"] = gaussian
    converted = convert_state_dict(state)
    assert sorted(converted) == [
        "prompt_encoder.point_embed.weight",
        "prompt_encoder.shared_embedding.positional_embedding",
        "shared_image_embedding.positional_embedding",
    ]
    assert converted["prompt_encoder.point_embed.weight"].tolist() == [
        [float(i)] * 3 for i in range(4)
    ]
    assert converted["shared_image_embedding.positional_embedding"] is gaussian


def test_the_original_backend_without_the_package_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sam2", None)  # absent, whatever this environment holds
    assert get_generation_model("segmenter", "sam2.1-hiera-large-original").backend == "sam2"
    with pytest.raises(UsageError) as caught:
        detection.load_segmenter("sam2.1-hiera-large-original", device="cpu")
    message = str(caught.value)
    assert "\n" not in message
    assert "make env-sam2" in message and "sam2 (original package)" in message


def test_an_unknown_backend_in_the_registry_is_refused(tmp_path: Path) -> None:
    from autocomp.generation.registry import generation_models

    text = GENERATION_FILE.read_text(encoding="utf-8").replace("backend: sam2", "backend: sam3")
    path = tmp_path / "models.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match="backend must be one of transformers, sam2"):
        generation_models("segmenter", path)


def test_every_backend_in_the_registry_has_a_loader() -> None:
    from autocomp.generation.registry import BACKENDS, generation_models

    assert set(BACKENDS["segmenter"]) == set(detection.SEGMENTER_BACKENDS)
    used = {m.backend for m in generation_models("segmenter").values()}
    assert used == set(BACKENDS["segmenter"])


def test_the_main_lanes_leave_the_sam2_and_gdino_tests_to_their_lanes() -> None:
    """`make test` and `make test-fast` deselect every side lane's marker (their packages are
    absent from .venv: the tests would fail, never skip); CI installs each lane's environment
    and runs the lane."""
    root = Path(__file__).resolve().parents[2]
    make = (root / "Makefile").read_text(encoding="utf-8")
    ci = (root / ".ci" / "run").read_text(encoding="utf-8")
    for lane, env in (("sam2", "env-sam2"), ("gdino", "env-gdino"), ("vllm", "vllm-env"),
                      ("peers", "env-peers")):  # fmt: skip
        for target in ("test", "test-fast"):
            recipe = make.split(f"\n{target}: ", 1)[1].split("\n\n", 1)[0]
            assert f"not {lane}" in recipe, (target, lane)
        assert f"test-{lane}" in ci and env in ci, lane
    assert "pytest.mark.sam2" in (root / "tests/generation/test_sam2_original.py").read_text()
    assert "pytest.mark.gdino" in (root / "tests/generation/test_gdino_original.py").read_text()
