"""transformers' Grounding DINO converter mapping (autocomp.generation.gdino_original) on
hand-checked keys; the gdino lane runs the models."""

from __future__ import annotations

import pytest

from autocomp.generation.gdino_original import BERT_SPECIAL, convert_key, tiny_bert_vocab

SWIN = "model.backbone.conv_encoder.model."
# original key -> the port's checkpoint key, traced by hand through create_rename_keys()
KEYS = {
    "backbone.0.patch_embed.proj.weight": SWIN + "embeddings.patch_embeddings.projection.weight",
    "backbone.0.patch_embed.norm.bias": SWIN + "embeddings.norm.bias",
    "backbone.0.layers.2.blocks.5.norm1.weight":
        SWIN + "encoder.layers.2.blocks.5.layernorm_before.weight",
    "backbone.0.layers.0.blocks.1.mlp.fc2.bias": SWIN + "encoder.layers.0.blocks.1.output.dense.bias",
    "backbone.0.layers.1.blocks.0.attn.relative_position_bias_table":
        SWIN + "encoder.layers.1.blocks.0.attention.self.relative_position_bias_table",
    "backbone.0.layers.1.downsample.reduction.weight":
        SWIN + "encoder.layers.1.downsample.reduction.weight",
    "backbone.0.norm1.weight": SWIN + "hidden_states_norms.stage2.weight",
    "transformer.encoder.layers.3.self_attn.sampling_offsets.bias":
        "model.encoder.layers.3.deformable_layer.self_attn.sampling_offsets.bias",
    "transformer.encoder.text_layers.0.norm2.weight":
        "model.encoder.layers.0.text_enhancer_layer.layer_norm_after.weight",
    "transformer.encoder.fusion_layers.5.gamma_v": "model.encoder.layers.5.fusion_layer.vision_param",
    "transformer.encoder.fusion_layers.1.attn.values_l_proj.weight":
        "model.encoder.layers.1.fusion_layer.attn.values_text_proj.weight",
    "transformer.decoder.layers.4.catext_norm.bias":
        "model.decoder.layers.4.encoder_attn_text_layer_norm.bias",
    "transformer.decoder.layers.0.norm3.weight": "model.decoder.layers.0.final_layer_norm.weight",
    "transformer.decoder.ref_point_head.layers.1.bias":
        "model.decoder.reference_points_head.layers.1.bias",
    "transformer.decoder.bbox_embed.2.layers.0.weight": "model.decoder.bbox_embed.2.layers.0.weight",
    "transformer.enc_out_bbox_embed.layers.2.bias": "model.encoder_output_bbox_embed.layers.2.bias",
    "transformer.enc_output_norm.weight": "model.enc_output_norm.weight",
    "transformer.level_embed": "model.level_embed",
    "transformer.tgt_embed.weight": "model.query_position_embeddings.weight",
    "input_proj.3.1.bias": "model.input_proj_vision.3.1.bias",
    "feat_map.weight": "model.text_projection.weight",
    "bert.encoder.layer.0.output.dense.weight": "model.text_backbone.encoder.layer.0.output.dense.weight",
    "bbox_embed.0.layers.2.weight": "bbox_embed.0.layers.2.weight",
}  # fmt: skip


@pytest.mark.parametrize(("original", "port"), sorted(KEYS.items()))
def test_keys_are_renamed_as_the_converter_does(original: str, port: str) -> None:
    assert convert_key(original) == port


def test_the_tiny_vocabulary_puts_the_special_tokens_at_bert_base_ids() -> None:
    vocab = tiny_bert_vocab()
    assert {t: vocab.index(t) for t in BERT_SPECIAL} == BERT_SPECIAL
    assert len(set(vocab)) == len(vocab)


def test_fused_projections_are_split_into_query_key_value() -> None:
    import torch

    from autocomp.generation.gdino_original import convert_state_dict

    qkv = torch.arange(2 * 3 * 96 * 2, dtype=torch.float32).reshape(3 * 96 * 2, 2)  # stage 1
    in_proj = torch.arange(3 * 4, dtype=torch.float32)
    state = {
        "backbone.0.layers.1.blocks.0.attn.qkv.weight": qkv,
        "backbone.0.layers.1.blocks.0.attn.relative_position_index": torch.zeros(1),
        "transformer.decoder.layers.2.ca_text.in_proj_bias": in_proj,
    }
    out = convert_state_dict(state, embed_dim=96)
    block = SWIN + "encoder.layers.1.blocks.0.attention.self."
    decoder = "model.decoder.layers.2.encoder_attn_text."
    assert sorted(out) == sorted(
        [block + f"{n}.weight" for n in ("query", "key", "value")]
        + [decoder + f"{n}.bias" for n in ("query", "key", "value")]
    )
    assert torch.equal(out[block + "key.weight"], qkv[192:384])
    assert out[decoder + "value.bias"].tolist() == [8.0, 9.0, 10.0, 11.0]
