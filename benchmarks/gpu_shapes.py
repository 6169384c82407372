"""The shapes `gpu_bench.py` runs: FULL (the paper's models at their published sizes, built
from their configurations with random weights) and TINY (the same code shrunken, for
`gpu.sh --dry-run` on a CPU), and the paper's Table 22 as rates per A100.

Table 22 (A.12): 100,000 concepts on 16 A100 (80 GB): caption generation 0.2 h, image
generation 8.5 h, object/background check (Grounded-SAM-2) 0.8 h, VQA validation 0.1 h on the
~47,000 images that pass the object check; 9.6 h, ~154 GPU-hours in all.
"""

from __future__ import annotations

from typing import Any

PAPER_GPU_HOURS = 154.0
PAPER_A100 = 16
VQA_SHARE = 0.47  # Table 22: ~47k of 100k images reach the VQA check
TABLE_22 = {  # step: (work, cluster hours on 16 A100)
    "caption": (100_000, 0.2),
    "render": (100_000, 8.5),
    "detect+segment": (100_000, 0.8),
    "vqa": (47_000, 0.1),
}
PAPER_RATE = {k: n / (h * PAPER_A100 * 3600) for k, (n, h) in TABLE_22.items()}  # per A100, /s
PAPER_SCALE = {"positives": 259_579, "captions": 14_961_307}  # the benchmark suite (Table 2)

FULL: dict[str, Any] = {
    "image": 1024,  # the renders: SD3.5-L's output, the validators' and scorers' input
    "steps": 28,
    "cfg": 4.5,
    "render_batch": 8,  # autocomp's batched call (paper: 16 per GPU; 8 keeps gpu.sh in 8 min)
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
    "validate_batch": 8,  # ValidateConfig.batch_size
    "detect_queries": 3,  # autocomp: one detector query per object class (Color N=3: 3)
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
    "gemma_image_tokens": 256,  # Gemma 3: 256 soft tokens per 896 px image
    "vqa_questions": 3,  # Color N=3: one question per object
    "vqa_options": 19,  # Color: every colour of the vocabulary is an answer option
    "vqa_option_tokens": 2,
    "vqa_prompt_tokens": 40,
    "clip_arch": "ViT-H-14-378",  # the paper's CLIP H/14-378 (DFN5B): 0.99B
    "siglip_arch": "ViT-gopt-16-SigLIP2-256",  # the paper's SigLIP2 Giant: 1.87B
    "caption_tokens": 22,  # Color N=3 captions: 20.8 tokens on average, + start and end
    "candidates": 729,  # a Color N=3 item: the positive + 728 Confusion negatives
    "peer_items": 8,  # CLIP_benchmark-style: images of 8 items a batch, captions 256 a batch
    "peer_text_batch": 256,
    "image_batch": 256,  # OpenClipScorer's batch_size
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
    "qwen_image": 1024,
    # Qwen2.5-VL's preprocessor_config.json: min_pixels 3136, max_pixels 12845056 (the fields
    # transformers 5 reads as size.shortest_edge / longest_edge); 1024 px -> 37 x 37 tokens
    "qwen_pixels": (3136, 12845056),
    "qwen_image_tokens": 1369,
    "qwen_caption_tokens": 15,
    "qwen_chunk": 256,
    "baseline_sweep": [8, 16, 32, 64],  # the baseline's batch: the fastest of these
    "baseline_candidates": 64,  # the baseline is timed on these and scaled to 729
}

TINY: dict[str, Any] = {
    **FULL,
    "image": 64,
    "steps": 2,
    "render_batch": 2,
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
    "peer_items": 2,
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
    "qwen_image": 112,  # 4 x 4 tokens
    "qwen_image_tokens": 16,
    "qwen_chunk": 128,
    "baseline_sweep": [8, 16],
    "baseline_candidates": 16,
}  # fmt: skip
