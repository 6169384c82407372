"""The original Grounding DINO package (IDEA-Research, PyPI `groundingdino-py`) against
transformers' port: its state dict converted into the port's checkpoint format.

The mapping is transformers' own converter, read from huggingface/transformers
src/transformers/models/grounding_dino/convert_grounding_dino_to_hf.py (not in the wheel):
`create_rename_keys()` (the Swin backbone, the encoder's deformable / text-enhancer / fusion
layers, the decoder, the text backbone, projections and heads) and `read_in_q_k_v()` (each Swin
block's fused qkv split into query, key, value). The version read keeps the text-enhancer's and
decoder's nn.MultiheadAttention `in_proj_*` fused; the port's attention now holds them as
query/key/value (transformers 5.24 refuses `in_proj_*` as unexpected), so they are split the
same way here. The result loads through `from_pretrained` (the detector's path; transformers 5
renames the Swin's legacy key layout on load) with 0 missing keys; the only unexpected ones are
the tiny BERT's pooler, which the port's text backbone lacks. The gdino lane (`make test-gdino`)
runs the original in .envs/gdino (transformers<5) and the port in .venv, and compares them.
"""

from __future__ import annotations

from typing import Any

SWIN = "model.backbone.conv_encoder.model."
# create_rename_keys(): a Swin block's parts (original -> port), under backbone.0.layers.L.blocks.B
SWIN_BLOCK = {
    "norm1": "layernorm_before",
    "norm2": "layernorm_after",
    "attn.proj": "attention.output.dense",
    "mlp.fc1": "intermediate.dense",
    "mlp.fc2": "output.dense",
}
DEFORMABLE = {
    "self_attn.sampling_offsets": "deformable_layer.self_attn.sampling_offsets",
    "self_attn.attention_weights": "deformable_layer.self_attn.attention_weights",
    "self_attn.value_proj": "deformable_layer.self_attn.value_proj",
    "self_attn.output_proj": "deformable_layer.self_attn.output_proj",
    "norm1": "deformable_layer.self_attn_layer_norm",
    "linear1": "deformable_layer.fc1",
    "linear2": "deformable_layer.fc2",
    "norm2": "deformable_layer.final_layer_norm",
}
TEXT_ENHANCER = {
    "self_attn.in_proj_": "text_enhancer_layer.self_attn.in_proj_",
    "self_attn.out_proj": "text_enhancer_layer.self_attn.out_proj",
    "linear1": "text_enhancer_layer.fc1",
    "linear2": "text_enhancer_layer.fc2",
    "norm1": "text_enhancer_layer.layer_norm_before",
    "norm2": "text_enhancer_layer.layer_norm_after",
}
FUSION = {
    "gamma_v": "fusion_layer.vision_param",
    "gamma_l": "fusion_layer.text_param",
    "layer_norm_v": "fusion_layer.layer_norm_vision",
    "layer_norm_l": "fusion_layer.layer_norm_text",
    "attn.v_proj": "fusion_layer.attn.vision_proj",
    "attn.l_proj": "fusion_layer.attn.text_proj",
    "attn.values_v_proj": "fusion_layer.attn.values_vision_proj",
    "attn.values_l_proj": "fusion_layer.attn.values_text_proj",
    "attn.out_v_proj": "fusion_layer.attn.out_vision_proj",
    "attn.out_l_proj": "fusion_layer.attn.out_text_proj",
}
DECODER = {
    "cross_attn.sampling_offsets": "encoder_attn.sampling_offsets",
    "cross_attn.attention_weights": "encoder_attn.attention_weights",
    "cross_attn.value_proj": "encoder_attn.value_proj",
    "cross_attn.output_proj": "encoder_attn.output_proj",
    "norm1": "encoder_attn_layer_norm",
    "ca_text.in_proj_": "encoder_attn_text.in_proj_",
    "ca_text.out_proj": "encoder_attn_text.out_proj",
    "catext_norm": "encoder_attn_text_layer_norm",
    "self_attn.in_proj_": "self_attn.in_proj_",
    "self_attn.out_proj": "self_attn.out_proj",
    "norm2": "self_attn_layer_norm",
    "linear1": "fc1",
    "linear2": "fc2",
    "norm3": "final_layer_norm",
}
# the "Additional" renames of create_rename_keys(): a substring -> its replacement, first match
PREFIXES = (
    ("transformer.decoder.ref_point_head", "model.decoder.reference_points_head"),
    ("transformer.decoder.bbox_embed", "model.decoder.bbox_embed"),
    ("transformer.enc_out_bbox_embed", "model.encoder_output_bbox_embed"),
    ("transformer.enc_output", "model.enc_output"),
    ("transformer.level_embed", "model.level_embed"),
    ("transformer.decoder.norm.", "model.decoder.layer_norm."),
    ("transformer.tgt_embed.", "model.query_position_embeddings."),
    ("input_proj", "model.input_proj_vision"),
    ("feat_map", "model.text_projection"),
    ("bert", "model.text_backbone"),
)
STAGE_NAMES = (("transformer.encoder.layers.", DEFORMABLE),
               ("transformer.encoder.text_layers.", TEXT_ENHANCER),
               ("transformer.encoder.fusion_layers.", FUSION))  # fmt: skip


def _rename_layer(key: str) -> str | None:
    """An encoder or decoder layer's key, renamed; None when it is no such key."""
    for prefix, table in STAGE_NAMES:
        if key.startswith(prefix):
            layer, rest = key[len(prefix) :].split(".", 1)
            for old, new in table.items():
                if rest.startswith(old):
                    return f"model.encoder.layers.{layer}.{new}{rest[len(old) :]}"
    if key.startswith("transformer.decoder.layers."):
        layer, rest = key[len("transformer.decoder.layers.") :].split(".", 1)
        for old, new in DECODER.items():
            if rest.startswith(old):
                return f"model.decoder.layers.{layer}.{new}{rest[len(old) :]}"
    return None


def _rename_backbone(key: str) -> str | None:
    """A Swin backbone key, renamed; None when it is none."""
    if not key.startswith("backbone.0."):
        return None
    rest = key[len("backbone.0.") :]
    if rest.startswith("patch_embed.proj."):
        return SWIN + "embeddings.patch_embeddings.projection." + rest.rsplit(".", 1)[1]
    if rest.startswith("patch_embed.norm."):
        return SWIN + "embeddings.norm." + rest.rsplit(".", 1)[1]
    if rest.startswith("norm"):  # the outputs' norms: norm{i-1} -> stage{i}
        index, tail = rest[len("norm") :].split(".", 1)
        return f"{SWIN}hidden_states_norms.stage{int(index) + 1}.{tail}"
    parts = rest.split(".")  # layers.L.blocks.B.<part>.<weight> or layers.L.downsample.<...>
    if parts[2] == "downsample":
        return SWIN + "encoder." + rest
    block = ".".join(parts[:4])
    part = ".".join(parts[4:])
    if part == "attn.relative_position_bias_table":
        return f"{SWIN}encoder.{block}.attention.self.relative_position_bias_table"
    for old, new in SWIN_BLOCK.items():
        if part.startswith(old + "."):
            return f"{SWIN}encoder.{block}.{new}{part[len(old) :]}"
    return None  # qkv (split by convert_state_dict) and relative_position_index (a buffer)


def convert_key(key: str) -> str:
    """One original key in the port's checkpoint format (unchanged when the converter keeps it:
    the heads `bbox_embed.*`, buffers)."""
    key = key.replace("module.", "")
    renamed = _rename_backbone(key) or _rename_layer(key)
    if renamed:
        return renamed
    for old, new in PREFIXES:
        if old in key:
            return key.replace(old, new)
    return key


def convert_state_dict(original: dict[str, Any], embed_dim: int) -> dict[str, Any]:
    """The original model's state dict in the port's checkpoint format: keys renamed, each Swin
    block's fused qkv split (read_in_q_k_v(); `embed_dim`: the Swin's first-stage width, 96 for
    SwinT), the blocks' relative_position_index buffers dropped (the port computes them)."""
    converted: dict[str, Any] = {}
    for key, value in original.items():
        key = key.replace("module.", "")
        if key.startswith("backbone.0.") and key.endswith("attn.relative_position_index"):
            continue
        if key.startswith("backbone.0.") and key.rsplit(".", 1)[0].endswith("attn.qkv"):
            parts = key.split(".")  # backbone.0.layers.L.blocks.B.attn.qkv.<kind>
            layer, block = int(parts[3]), ".".join(parts[2:6])
            kind = key.rsplit(".", 1)[1]
            width = embed_dim * 2**layer
            for i, name in enumerate(("query", "key", "value")):
                part = value[i * width : (i + 1) * width]
                converted[f"{SWIN}encoder.{block}.attention.self.{name}.{kind}"] = part
            continue
        renamed = convert_key(key)
        if ".in_proj_" in renamed:  # nn.MultiheadAttention's fused projection: q, k, v
            head, kind = renamed.split(".in_proj_")
            width = value.shape[0] // 3
            for i, name in enumerate(("query", "key", "value")):
                converted[f"{head}.{name}.{kind}"] = value[i * width : (i + 1) * width]
            continue
        converted[renamed] = value
    return converted


# ----------------------------------------------------------------------------- the original side

BERT_SPECIAL = {
    "[PAD]": 0,
    "[UNK]": 100,
    "[CLS]": 101,
    "[SEP]": 102,
    "[MASK]": 103,
    ".": 1012,
    "?": 1029,
}  # fmt: skip  (bert-base-uncased's ids: the port hard-codes 101/102/1012/1029)
SWINT_EMBED_DIM = 96  # GroundingDINO_SwinT_OGC.py: swin_T_224_1k


def tiny_bert_vocab() -> list[str]:
    """A WordPiece vocabulary spelling lowercase words letter by letter, its special tokens at
    bert-base-uncased's ids (both implementations find sub-sentence boundaries by those ids)."""
    import string

    vocab = [f"[unused{i}]" for i in range(max(BERT_SPECIAL.values()) + 1)]
    for token, index in BERT_SPECIAL.items():
        vocab[index] = token
    letters = [c for c in string.ascii_lowercase + string.digits + ",-'"]
    return vocab + letters + [f"##{c}" for c in letters]


def run_original(folder: str, caption: str, height: int, width: int) -> None:
    """In .envs/gdino (groundingdino-py, transformers<5): build a tiny BERT text encoder (saved
    to folder/bert), the SwinT-OGC Grounding DINO with seeded random weights around it, and run
    it on a seeded pixel tensor; writes folder/original.safetensors (its state dict) and
    folder/original.npz (pixels, input ids, logits, boxes)."""
    import os

    import groundingdino
    import numpy as np
    import torch
    from groundingdino.models import build_model
    from groundingdino.util.slconfig import SLConfig
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel, BertTokenizer

    bert_dir = os.path.join(folder, "bert")
    os.makedirs(bert_dir, exist_ok=True)
    vocab_file = os.path.join(folder, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as out:
        out.write("\n".join(tiny_bert_vocab()) + "\n")
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=len(tiny_bert_vocab()), hidden_size=32,
                                num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=37, max_position_embeddings=260))  # fmt: skip
    bert.save_pretrained(bert_dir)
    BertTokenizer(vocab_file).save_pretrained(bert_dir)
    config_dir = os.path.join(os.path.dirname(groundingdino.__file__), "config")
    config = SLConfig.fromfile(os.path.join(config_dir, "GroundingDINO_SwinT_OGC.py"))
    config.text_encoder_type = bert_dir
    config.device = "cpu"
    torch.manual_seed(1)
    model = build_model(config).eval()
    pixels = torch.randn(1, 3, height, width, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        out = model(pixels, captions=[caption])
    ids = model.tokenizer([caption], return_tensors="pt").input_ids
    state = {k: v.contiguous().clone() for k, v in model.state_dict().items()}
    save_file(state, os.path.join(folder, "original.safetensors"))
    np.savez(os.path.join(folder, "original.npz"), pixels=pixels.numpy(), input_ids=ids.numpy(),
             logits=out["pred_logits"].numpy(), boxes=out["pred_boxes"].numpy())  # fmt: skip


if __name__ == "__main__":  # .envs/gdino/bin/python -m autocomp.generation.gdino_original DIR ...
    import sys

    run_original(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
