"""GPU throughput of the paper's full-size models, built from configs with random weights.

Throughput does not depend on the weights, so every model is built from its published
architecture (no download: the GPU machine has no network) and timed on synthetic inputs of the
paper's shapes. Sections, each time-boxed (`--budget` seconds of timed work) and independent (a
failing section prints its error and the others still run):

- render: Stable Diffusion 3.5 Large (MMDiT 8.1B, CLIP-L + CLIP-G + T5-XXL text encoders, the
  SD3 VAE), 1024 px, 28 flow-matching steps, CFG 4.5 (batch rows: conditional + unconditional);
  the pipeline's own computation as an explicit loop (the tokenizers are not downloadable).
- validate: Grounding DINO (Swin-T, the paper's grounding-dino-tiny) and SAM2.1 Hiera-L on 1024 px
  images with box prompts, and the VQA check (Gemma-3-12B-it: one prefill per question).
- score: CLIP ViT-L/14 and SigLIP SO400M/14-384 per Color N=3 item (1 image, 729 captions; CLIP
  text run to each batch's longest caption as autocomp does, SigLIP at its fixed 64 tokens), and
  Qwen2.5-VL-7B shared-prefix scoring (autocomp's VlmScorer) against batched scoring without
  sharing, per item.

Prints one table and the GPU-hours per 100k concepts against the paper's 154 A100 GPU-hours
(Table 22: 100k images in 136 GPU-h, 0.2 img/s per A100).

`--tiny` runs the same code with tiny dimensions on any device (the CPU check of this script);
`--dry-run` builds nothing and prints the plan.

Usage: benchmarks/gpu.sh [--tiny] [--dry-run] [--sections render validate score] [--budget 60]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

PAPER_GPU_HOURS = 154.0  # Table 22: 100k concepts, 9.6 h on 16 A100
PAPER_RENDER_IMG_S = 100_000 / (136 * 3600)  # ~0.2 images/s per A100
VQA_SHARE = 0.47  # Table 22: ~47k of 100k images reach the VQA check
PAPER_SCALE = {"positives": 259_579, "captions": 14_960_000}  # benchmark suite (Table 2)

FULL: dict[str, Any] = {
    "image": 1024,
    "steps": 28,
    "cfg": 4.5,
    "render_batch": 4,
    "sd3": dict(
        sample_size=128,
        patch_size=2,
        in_channels=16,
        out_channels=16,
        num_layers=38,
        attention_head_dim=64,
        num_attention_heads=38,
        joint_attention_dim=4096,
        caption_projection_dim=2432,
        pooled_projection_dim=2048,
        pos_embed_max_size=192,
        qk_norm="rms_norm",
    ),
    "vae": dict(block_out_channels=(128, 256, 512, 512), layers_per_block=2, norm_num_groups=32),
    "clip_l": dict(
        hidden_size=768,
        intermediate_size=3072,
        num_attention_heads=12,
        num_hidden_layers=12,
        projection_dim=768,
        hidden_act="quick_gelu",
    ),
    "clip_g": dict(
        hidden_size=1280,
        intermediate_size=5120,
        num_attention_heads=20,
        num_hidden_layers=32,
        projection_dim=1280,
        hidden_act="gelu",
    ),
    "t5": dict(
        d_model=4096,
        d_kv=64,
        d_ff=10240,
        num_layers=24,
        num_heads=64,
        vocab_size=32128,
        feed_forward_proj="gated-gelu",
    ),
    "t5_tokens": 256,
    "dino_swin": dict(embed_dim=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], window_size=7),
    "dino": dict(d_model=256, encoder_layers=6, decoder_layers=6, num_queries=900),
    "dino_bert": dict(),
    "dino_image": 800,
    "sam_hiera": dict(
        hidden_size=144,
        num_attention_heads=2,
        blocks_per_stage=[2, 6, 36, 4],
        embed_dim_per_stage=[144, 288, 576, 1152],
        num_attention_heads_per_stage=[2, 4, 8, 16],
        global_attention_blocks=[23, 33, 43],
        window_positional_embedding_background_size=[7, 7],
        window_size_per_stage=[8, 4, 16, 8],
        image_size=[1024, 1024],
    ),
    "sam_vision": dict(
        backbone_channel_list=[1152, 576, 288, 144],
        fpn_hidden_size=256,
        backbone_feature_sizes=[[256, 256], [128, 128], [64, 64]],
    ),
    "sam_prompt": dict(hidden_size=256, image_size=1024, patch_size=16),
    "sam_decoder": dict(hidden_size=256),
    "validate_batch": 8,
    "gemma_text": dict(
        hidden_size=3840,
        intermediate_size=15360,
        num_hidden_layers=48,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=256,
        vocab_size=262208,
        sliding_window=1024,
    ),
    "gemma_vision": dict(
        hidden_size=1152,
        intermediate_size=4304,
        num_hidden_layers=27,
        num_attention_heads=16,
        image_size=896,
        patch_size=14,
    ),
    "gemma_image_tokens": 256,
    "vqa_questions": 3,
    "vqa_prompt_tokens": 40,
    "clip_arch": "ViT-L-14",
    "siglip_arch": "ViT-SO400M-14-SigLIP-384",
    "caption_tokens": 22,  # Color N=3 captions: 20.8 tokens on average, + start and end
    "candidates": 729,
    "text_batch": 1024,
    "image_batch": 128,
    "qwen_text": dict(
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        vocab_size=152064,
        max_position_embeddings=128000,
        rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]},
        rope_theta=1000000.0,
    ),
    "qwen_vision": dict(
        depth=32,
        hidden_size=1280,
        intermediate_size=3420,
        num_heads=16,
        out_hidden_size=3584,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
        window_size=112,
        fullatt_block_indexes=[7, 15, 23, 31],
    ),
    "qwen_chunk": 256,
    "baseline_batch": 16,
    "baseline_candidates": 64,
}

TINY: dict[str, Any] = {
    **FULL,
    "image": 64,
    "steps": 2,
    "render_batch": 1,
    "sd3": dict(
        sample_size=8, patch_size=2, in_channels=16, out_channels=16, num_layers=2,
        attention_head_dim=8, num_attention_heads=4, joint_attention_dim=32,
        caption_projection_dim=32, pooled_projection_dim=64, pos_embed_max_size=16,
        qk_norm="rms_norm",
    ),
    "vae": dict(block_out_channels=(8, 8, 8, 8), layers_per_block=1, norm_num_groups=4),
    "clip_l": dict(hidden_size=32, intermediate_size=37, num_attention_heads=4,
                   num_hidden_layers=2, projection_dim=32, hidden_act="quick_gelu"),
    "clip_g": dict(hidden_size=32, intermediate_size=37, num_attention_heads=4,
                   num_hidden_layers=2, projection_dim=32, hidden_act="gelu"),
    "t5": dict(d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4, vocab_size=1000,
               feed_forward_proj="gated-gelu"),
    "t5_tokens": 16,
    "dino_swin": dict(embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2], window_size=4),
    "dino": dict(d_model=32, encoder_layers=1, decoder_layers=2, num_queries=30,
                 encoder_ffn_dim=32, decoder_ffn_dim=32, encoder_attention_heads=2,
                 decoder_attention_heads=2, n_points=2),
    "dino_bert": dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=37),
    "dino_image": 64,
    "sam_hiera": dict(
        hidden_size=8, image_size=[128, 128], blocks_per_stage=[1, 1, 2, 1],
        embed_dim_per_stage=[8, 16, 32, 64], num_attention_heads_per_stage=[1, 1, 2, 2],
        global_attention_blocks=[3], window_positional_embedding_background_size=[4, 4],
        window_size_per_stage=[2, 2, 2, 2],
    ),
    "sam_vision": dict(backbone_channel_list=[64, 32, 16, 8], fpn_hidden_size=32,
                       backbone_feature_sizes=[[32, 32], [16, 16], [8, 8]]),
    "sam_prompt": dict(hidden_size=32, image_size=128, patch_size=16),
    "sam_decoder": dict(hidden_size=32, mlp_dim=64, num_attention_heads=2,
                        iou_head_hidden_dim=32),
    "validate_batch": 2,
    "gemma_text": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                       vocab_size=262208, sliding_window=64),
    "gemma_vision": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, image_size=56, patch_size=14),
    "gemma_image_tokens": 4,
    "clip_arch": "autocomp-tiny-clip",
    "siglip_arch": "autocomp-tiny-sigmoid",
    "text_batch": 256,
    "image_batch": 16,
    "qwen_text": dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=152064, max_position_embeddings=4096,
        rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]}, rope_theta=1000000.0,
    ),
    "qwen_vision": dict(
        depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
        patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=28,
        fullatt_block_indexes=[0],
    ),
    "qwen_chunk": 128,
    "baseline_batch": 16,
    "baseline_candidates": 32,
}  # fmt: skip


class Budget:
    """Timed repetitions within a time box: at least one, then more while time is left."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def median(self, fn: Callable[[], Any], sync: Callable[[], None], most: int = 5) -> float:
        times: list[float] = []
        start = time.perf_counter()
        while not times or (len(times) < most and time.perf_counter() - start < self.seconds):
            t0 = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)


@contextmanager
def built_on(device: str, dtype: Any):
    """Modules created inside are allocated on `device` in `dtype` (random init on the GPU:
    seconds, not minutes of CPU initialisation of billions of parameters)."""
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            yield
    finally:
        torch.set_default_dtype(previous)


def free(*_: Any) -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------- render


def render(cfg: dict, device: str, dtype: Any, budget: Budget, sync: Callable) -> list[dict]:
    import torch
    import torch.nn.functional as F
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModelWithProjection, T5Config, T5EncoderModel

    with built_on(device, dtype):
        transformer = SD3Transformer2DModel(**cfg["sd3"]).eval()
        vae = AutoencoderKL(
            in_channels=3, out_channels=3, latent_channels=16,
            down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
            use_quant_conv=False, use_post_quant_conv=False, shift_factor=0.0609,
            scaling_factor=1.5305, sample_size=cfg["image"], **cfg["vae"],
        ).eval()  # fmt: skip
        clips = [
            CLIPTextModelWithProjection(
                CLIPTextConfig(vocab_size=49408, max_position_embeddings=77, **cfg[name])
            ).eval()
            for name in ("clip_l", "clip_g")
        ]
        t5 = T5EncoderModel(T5Config(**cfg["t5"])).eval()
    batch, steps, scale = cfg["render_batch"], cfg["steps"], cfg["cfg"]
    rows = 2 * batch  # conditional + unconditional

    def generate(steps: int = steps) -> None:
        with torch.inference_mode():
            ids = torch.randint(0, 49406, (rows, 77), device=device)
            outs = [enc(ids, output_hidden_states=True) for enc in clips]
            pooled = torch.cat([o.text_embeds for o in outs], -1)
            clip_seq = torch.cat([o.hidden_states[-2] for o in outs], -1)
            t5_ids = torch.randint(0, cfg["t5"]["vocab_size"], (rows, cfg["t5_tokens"]))
            t5_seq = t5(t5_ids.to(device)).last_hidden_state
            clip_seq = F.pad(clip_seq, (0, t5_seq.shape[-1] - clip_seq.shape[-1]))
            context = torch.cat([clip_seq, t5_seq], 1)
            side = cfg["image"] // 8
            latents = torch.randn(batch, 16, side, side, device=device, dtype=dtype)
            scheduler = FlowMatchEulerDiscreteScheduler(shift=3.0)
            scheduler.set_timesteps(steps, device=device)
            for t in scheduler.timesteps:
                noise = transformer(
                    hidden_states=torch.cat([latents] * 2),
                    timestep=t.expand(rows),
                    encoder_hidden_states=context,
                    pooled_projections=pooled,
                ).sample
                uncond, cond = noise.chunk(2)
                latents = scheduler.step(uncond + scale * (cond - uncond), t, latents).prev_sample
            vae.decode(latents / vae.config.scaling_factor + vae.config.shift_factor)

    generate(2)  # warm-up: kernels, allocator (the timed runs do every step)
    sync()
    seconds = budget.median(generate, sync, most=3)
    params = sum(p.numel() for p in transformer.parameters()) / 1e9
    free(transformer, vae, clips, t5)
    return [
        {
            "section": "render",
            "what": f"SD3.5-L ({params:.1f}B MMDiT) {cfg['image']} px, {steps} steps, CFG {scale}",
            "unit": "images/s",
            "rate": batch / seconds,
            "note": f"batch {batch}; paper 0.2 img/s per A100",
        }
    ]


# ----------------------------------------------------------------------------- validate


def validate(cfg: dict, device: str, dtype: Any, budget: Budget, sync: Callable) -> list[dict]:
    import torch
    from transformers import (
        BertConfig,
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3TextConfig,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        Sam2Config,
        Sam2HieraDetConfig,
        Sam2MaskDecoderConfig,
        Sam2Model,
        Sam2PromptEncoderConfig,
        Sam2VisionConfig,
        SiglipVisionConfig,
        SwinConfig,
    )

    batch = cfg["validate_batch"]
    rows = []
    with built_on(device, torch.float32):  # the registry runs both detectors in float32
        swin = SwinConfig(
            image_size=cfg["dino_image"], out_features=["stage2", "stage3", "stage4"],
            **cfg["dino_swin"],
        )  # fmt: skip
        dino = GroundingDinoForObjectDetection(
            GroundingDinoConfig(
                backbone_config=swin, text_config=BertConfig(**cfg["dino_bert"]),
                num_feature_levels=4 if cfg is FULL else 3, **cfg["dino"],
            )
        ).eval()  # fmt: skip
    side = cfg["dino_image"]
    pixels = torch.randn(batch, 3, side, side, device=device)
    text = torch.randint(1000, 2000, (batch, 16), device=device)
    text[:, 0], text[:, -1] = 101, 102  # [CLS] ... [SEP]

    def detect() -> None:
        with torch.inference_mode():
            dino(pixel_values=pixels, input_ids=text, attention_mask=torch.ones_like(text))

    detect()
    sync()
    t_detect = budget.median(detect, sync) / batch
    rows.append(_row("validate", "Grounding DINO (Swin-T) detection", 1 / t_detect, "images/s",
                     f"{side} px, batch {batch}"))  # fmt: skip
    free(dino)

    with built_on(device, torch.float32):
        vision = Sam2VisionConfig(
            backbone_config=Sam2HieraDetConfig(**cfg["sam_hiera"]), **cfg["sam_vision"]
        )
        sam = Sam2Model(
            Sam2Config(
                vision_config=vision,
                prompt_encoder_config=Sam2PromptEncoderConfig(**cfg["sam_prompt"]),
                mask_decoder_config=Sam2MaskDecoderConfig(**cfg["sam_decoder"]),
            )
        ).eval()
    size = cfg["sam_prompt"]["image_size"]
    sam_pixels = torch.randn(batch, 3, size, size, device=device)
    boxes = torch.tensor([[10.0, 10.0, size / 2, size / 2]] * 3, device=device)
    boxes = boxes.expand(batch, -1, -1).contiguous()  # 3 objects per image

    def segment() -> None:
        with torch.inference_mode():
            sam(pixel_values=sam_pixels, input_boxes=boxes, multimask_output=False)

    segment()
    sync()
    t_segment = budget.median(segment, sync) / batch
    rows.append(_row("validate", "SAM2.1 Hiera-L segmentation (3 boxes)", 1 / t_segment,
                     "images/s", f"{size} px, batch {batch}"))  # fmt: skip
    free(sam)

    image_token = 262144
    with built_on(device, dtype):
        gemma = Gemma3ForConditionalGeneration(
            Gemma3Config(
                text_config=Gemma3TextConfig(**cfg["gemma_text"]),
                vision_config=SiglipVisionConfig(**cfg["gemma_vision"]),
                mm_tokens_per_image=cfg["gemma_image_tokens"], image_token_index=image_token,
                boi_token_index=255999, eoi_token_index=256000,
            )
        ).eval()  # fmt: skip
    questions = cfg["vqa_questions"]
    count = batch * questions
    vision_side = cfg["gemma_vision"]["image_size"]
    vqa_pixels = torch.randn(count, 3, vision_side, vision_side, device=device, dtype=dtype)
    prompt = torch.randint(1000, 200000, (count, cfg["vqa_prompt_tokens"]), device=device)
    image_ids = torch.full((count, cfg["gemma_image_tokens"]), image_token, device=device)
    ids = torch.cat([prompt[:, :4], image_ids, prompt[:, 4:]], 1)

    def ask() -> None:
        with torch.inference_mode():
            gemma(input_ids=ids, pixel_values=vqa_pixels, attention_mask=torch.ones_like(ids),
                  logits_to_keep=1)  # fmt: skip

    ask()
    sync()
    t_vqa = budget.median(ask, sync) / batch
    rows.append(_row("validate", f"Gemma-3-12B VQA ({questions} questions/image)", 1 / t_vqa,
                     "images/s", f"one prefill per question, batch {count}"))  # fmt: skip
    free(gemma)
    per_image = t_detect + t_segment + VQA_SHARE * t_vqa
    rows.append(_row("validate", "validation per rendered image (VQA on 47 %)", 1 / per_image,
                     "images/s", "detect + segment + 0.47 x VQA"))  # fmt: skip
    return rows


# ----------------------------------------------------------------------------- score


def contrastive(cfg: dict, device: str, dtype: Any, budget: Budget, sync: Callable) -> list[dict]:
    import open_clip
    import torch

    from autocomp.scoring.contrastive import _encode_text_prefix, _trimmable
    from autocomp.tiny.scoring import register_open_clip_configs

    register_open_clip_configs()
    rows = []
    for arch in (cfg["clip_arch"], cfg["siglip_arch"]):
        with built_on(device, torch.float32):
            model = open_clip.create_model(arch, pretrained=None, device=device).eval()
        model = model.to(dtype)
        size = open_clip.get_model_config(arch)["vision_cfg"]["image_size"]
        size = size[0] if isinstance(size, (tuple, list)) else size
        context = int(getattr(model, "context_length", None) or 77)
        trim = _trimmable(model)
        length = cfg["caption_tokens"] if trim else context
        images = torch.randn(cfg["image_batch"], 3, size, size, device=device, dtype=dtype)
        text = getattr(model, "text", model)
        vocab = text.token_embedding.num_embeddings
        tokens = torch.randint(1, vocab - 2, (cfg["text_batch"], length), device=device)
        tokens[:, -1] = vocab - 1  # CLIP: the end-of-text token is the largest id (the argmax)

        def encode_images(model: Any = model, images: Any = images) -> None:
            with torch.inference_mode():
                model.encode_image(images)

        def encode_texts(model: Any = model, tokens: Any = tokens, trim: bool = trim) -> None:
            with torch.inference_mode():
                if trim:
                    _encode_text_prefix(model, tokens)
                else:
                    model.encode_text(tokens)

        encode_images(), encode_texts(), sync()
        t_image = budget.median(encode_images, sync) / cfg["image_batch"]
        t_text = budget.median(encode_texts, sync) / cfg["text_batch"]
        per_item = t_image + cfg["candidates"] * t_text
        kind = f"text to {length} tokens" if trim else f"text at its fixed {length} tokens"
        rows.append(_row("score", f"{arch} per Color N=3 item (1 image + 729 captions)",
                         1 / per_item, "items/s",
                         f"{1 / t_image:,.0f} img/s, {1 / t_text:,.0f} captions/s, {kind}"))  # fmt: skip
        rows[-1]["paper_scale_h"] = (
            PAPER_SCALE["positives"] * t_image + PAPER_SCALE["captions"] * t_text
        ) / 3600
        free(model)
    return rows


def generative(cfg: dict, device: str, dtype: Any, budget: Budget, sync: Callable) -> list[dict]:
    from PIL import Image

    sys.path.insert(0, str(Path(__file__).parent))
    from autocomp.scoring import ScoreRequest, load_scorer
    from scoring_throughput import batched_no_sharing, color_items

    scorer = load_scorer("tiny-qwen2.5-vl", device=device, chunk_size=cfg["qwen_chunk"])
    if cfg["qwen_text"] is not None:  # the 7B architecture behind the tiny (offline) processor
        from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

        tiny = scorer.model.config
        config = Qwen2_5_VLConfig(
            text_config={**cfg["qwen_text"], "bos_token_id": tiny.bos_token_id,
                         "eos_token_id": tiny.eos_token_id},
            vision_config=cfg["qwen_vision"], image_token_id=tiny.image_token_id,
            video_token_id=tiny.video_token_id, vision_start_token_id=tiny.vision_start_token_id,
            vision_end_token_id=tiny.vision_end_token_id, bos_token_id=tiny.bos_token_id,
            eos_token_id=tiny.eos_token_id,
        )  # fmt: skip
        with built_on(device, dtype):
            scorer.model = Qwen2_5_VLForConditionalGeneration(config).eval()
        side = cfg["image"]
        scorer.processor.image_processor.min_pixels = side * side
        scorer.processor.image_processor.max_pixels = side * side
    image = Image.new("RGB", (cfg["image"], cfg["image"]), (180, 40, 40))
    captions = [f"{i:03d} " + c[:11] for i, c in enumerate(color_items(1)[0])]  # 15 tokens each
    requests = [ScoreRequest("img", c) for c in captions]
    prefix = scorer._prefix_inputs(image)
    prefix_tokens = prefix["input_ids"].shape[1]
    ids = scorer._caption_ids(captions)
    scorer.score(requests[:2], {"img": image})
    sync()
    t_shared = budget.median(lambda: scorer.score(requests, {"img": image}), sync, most=3)
    scorer.split = False  # before: the prefix cache copied per candidate, masked SDPA over it
    scorer.score(requests[:2], {"img": image})
    t_repeated = budget.median(lambda: scorer.score(requests, {"img": image}), sync, most=3)
    scorer.split = True
    sample = ids[: cfg["baseline_candidates"]]
    batched_no_sharing(scorer, prefix, sample[: cfg["baseline_batch"]], cfg["baseline_batch"])
    sync()
    t_sample = budget.median(
        lambda: batched_no_sharing(scorer, prefix, sample, cfg["baseline_batch"]), sync, most=3
    )
    t_batched = t_sample * len(ids) / len(sample)
    limit = (prefix_tokens + 15) / 15
    ratio = t_batched / t_shared
    name = "Qwen2.5-VL-7B" if cfg is FULL else "tiny Qwen2.5-VL"
    rows = [
        _row("score", f"{name} batched, no sharing (1 image + 729 captions)", 1 / t_batched,
             "items/s", f"prefix {prefix_tokens} tokens; timed on {len(sample)} candidates"),
        _row("score", f"{name} shared prefix (autocomp)", 1 / t_shared, "items/s",
             f"{ratio:.1f}x over batched = {ratio / limit:.0%} of the {limit:.0f}x token limit"),
        _row("score", f"{name} shared prefix, repeated cache (before)", 1 / t_repeated,
             "items/s", f"{t_batched / t_repeated:.1f}x over batched; split attention is "
             f"{t_repeated / t_shared:.2f}x faster"),
    ]  # fmt: skip
    # the suite averages 58 captions per item: scaled per caption (prefix cost left out)
    rows[1]["paper_scale_h"] = PAPER_SCALE["captions"] * min(t_shared, t_repeated) / len(ids) / 3600
    free(scorer)
    return rows


def score(cfg: dict, device: str, dtype: Any, budget: Budget, sync: Callable) -> list[dict]:
    rows = contrastive(cfg, device, dtype, budget, sync)
    return rows + generative(cfg, device, dtype, budget, sync)


def _row(section: str, what: str, rate: float, unit: str, note: str) -> dict:
    return {"section": section, "what": what, "rate": rate, "unit": unit, "note": note}


SECTIONS: dict[str, Callable[..., list[dict]]] = {
    "render": render,
    "validate": validate,
    "score": score,
}


# ----------------------------------------------------------------------------- report


def cost_lines(rows: list[dict]) -> list[str]:
    """GPU-hours per 100k concepts (render + validation) against the paper's 154 A100 GPU-h,
    and per scored model at paper scale."""
    lines = []
    by = {r["what"]: r for r in rows if "error" not in r}
    render_row = next((r for r in rows if r["section"] == "render" and "error" not in r), None)
    validate_row = next((r for w, r in by.items() if w.startswith("validation per")), None)
    if render_row:
        render_h = 100_000 / render_row["rate"] / 3600
        total = render_h + (100_000 / validate_row["rate"] / 3600 if validate_row else 0.0)
        what = "render + validate" if validate_row else "render only"
        lines.append(
            f"per 100k concepts: {total:,.1f} GPU-h ({what}; render {render_h:,.1f} GPU-h, "
            f"{render_row['rate'] / PAPER_RENDER_IMG_S:.1f}x the paper's A100 rate) vs the "
            f"paper's {PAPER_GPU_HOURS:.0f} A100 GPU-h (caption generation not measured: "
            f"paper ~3 GPU-h)"
        )
    for r in rows:
        if "paper_scale_h" in r:
            lines.append(
                f"scoring the paper-scale suite ({PAPER_SCALE['positives']:,} items) with "
                f"{r['what'].split(' per ')[0].split(' shared')[0]}: {r['paper_scale_h']:,.2f} GPU-h"
            )
    return lines


def print_row(r: dict) -> None:
    if "error" in r:
        print(f"{r['section']:<9} {'FAILED':<62} {'':>12}  {'':<9} {r['error']}", flush=True)
    else:
        print(
            f"{r['section']:<9} {r['what']:<62} {r['rate']:>12,.3f}  {r['unit']:<9} {r['note']}",
            flush=True,
        )


def print_table(rows: list[dict], device_name: str, tiny: bool) -> None:
    sizes = "TINY models (a check of the code, not figures)" if tiny else "full-size architectures"
    print(f"\nGPU benchmark on {device_name} (random weights, {sizes})")
    print(f"{'section':<9} {'what':<62} {'rate':>12}  {'unit':<9} note")
    for r in rows:
        print_row(r)
    for line in cost_lines(rows):
        print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="tiny dimensions (CPU check)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, build nothing")
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=list(SECTIONS))
    parser.add_argument("--budget", type=float, default=45.0, help="timed seconds per model")
    parser.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument(
        "--dtype", default="auto", choices=("auto", "bfloat16", "float32"),
        help="weights and activations (auto: bfloat16 on a GPU, float32 on a CPU)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    cfg = TINY if args.tiny else FULL
    if args.dry_run:
        print(json.dumps({"sections": args.sections, "tiny": args.tiny, "budget": args.budget,
                          "config": cfg}, indent=1, default=str))  # fmt: skip
        return 0
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    if args.dtype != "auto":  # e.g. a CPU check of the GPU's bfloat16 path
        dtype = getattr(torch, args.dtype)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else "CPU"
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
    rows: list[dict] = []
    for section in args.sections:
        t0 = time.perf_counter()
        try:
            new = SECTIONS[section](cfg, device, dtype, Budget(args.budget), sync)
        except Exception as exc:  # one failing section must not hide the others' figures
            traceback.print_exc()
            new = [{"section": section, "error": f"{type(exc).__name__}: {exc}"[:200]}]
        for r in new:  # printed as they come: a run cut by the time limit keeps its figures
            print_row(r)
        rows += new
        free()
        if args.json:
            args.json.write_text(json.dumps({"device": name, "rows": rows}, indent=1))
        print(f"[{section}: {time.perf_counter() - t0:.0f} s]", file=sys.stderr, flush=True)
    print_table(rows, name, args.tiny)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
