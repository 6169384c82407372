"""The steps `gpu_bench.py` times, each against a baseline in the same run (see its docstring).

Every step builds its models from configurations (gpu_shapes.py) with random weights on the
device, checks the shapes it will print (common.require), times autocomp's way and the
baseline's way, and returns its rows (gpu_bench.row).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from common import require
from gpu_shapes import FULL, PAPER_RATE, PAPER_SCALE, VQA_SHARE


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


def row(section: str, what: str, rate: float, unit: str, baseline: str, base_rate: float,
        paper: float | None = None, note: str = "") -> dict:  # fmt: skip
    """One figure: autocomp's rate, the baseline's in the same run, their ratio, the paper's
    Table 22 rate per A100 where it has one."""
    return {"section": section, "what": what, "rate": rate, "unit": unit, "baseline": baseline,
            "baseline_rate": base_rate, "ratio": rate / base_rate, "paper": paper,
            "note": note}  # fmt: skip


# ----------------------------------------------------------------------------- score


def contrastive(cfg: dict, device: str, dtype: Any, budget: Any, sync: Callable) -> list[dict]:
    """Per Color N=3 item (1 image + 729 captions): autocomp (images `image_batch` a batch;
    text batches from free memory; a causal EOT-pooled tower cut to the captions' length)
    against the CLIP_benchmark-style loop (images of 8 items a batch, captions 256 a batch,
    padded to the full context)."""
    from autocomp.tiny.scoring import register_open_clip_configs

    register_open_clip_configs()
    return [
        _contrastive_one(arch, cfg, device, dtype, budget, sync)
        for arch in (cfg["clip_arch"], cfg["siglip_arch"])
    ]


def _contrastive_one(
    arch: str, cfg: dict, device: str, dtype: Any, budget: Any, sync: Callable
) -> dict:
    import open_clip
    import torch

    from autocomp.scoring.contrastive import (
        _encode_text_prefix,
        _trimmable,
        text_batch_size,
        text_width,
    )

    with built_on(device, torch.float32):
        model = open_clip.create_model(arch, pretrained=None, device=device).eval()
    model = model.to(dtype)
    size = open_clip.get_model_config(arch)["vision_cfg"]["image_size"]
    size = size[0] if isinstance(size, (tuple, list)) else size
    context = int(getattr(model, "context_length", None) or 77)
    trim, width = _trimmable(model), text_width(model)
    length = cfg["caption_tokens"] if trim else context
    ours = text_batch_size(device, width, context, 256)
    vocab = getattr(model, "text", model).token_embedding.num_embeddings
    tokens = torch.randint(
        1, vocab - 2, (max(ours, cfg["peer_text_batch"]), context), device=device
    )
    tokens[:, length - 1] = vocab - 1  # the end-of-text token is the largest id (argmax)
    tokens[:, length:] = 0  # padding
    images = torch.randn(cfg["image_batch"], 3, size, size, device=device, dtype=dtype)

    def encode_images(count: int) -> Any:
        with torch.inference_mode():
            return model.encode_image(images[:count])

    def encode_texts(count: int, cut: bool) -> Any:
        with torch.inference_mode():
            if cut:
                return _encode_text_prefix(model, tokens[:count, :length])
            return model.encode_text(tokens[:count])

    dim = encode_images(2).shape[-1]
    got = (encode_images(2).shape, encode_texts(2, trim).shape, encode_texts(2, False).shape)
    require(all(tuple(s) == (2, dim) for s in got), f"{arch}: features {got}")
    sync()
    peer_items, peer_text, batch = cfg["peer_items"], cfg["peer_text_batch"], cfg["image_batch"]
    t_img_peer = budget.median(lambda: encode_images(peer_items), sync) / peer_items
    t_txt_peer = budget.median(lambda: encode_texts(peer_text, False), sync) / peer_text
    t_img = budget.median(lambda: encode_images(batch), sync) / batch
    t_txt = budget.median(lambda: encode_texts(ours, trim), sync) / ours
    per_item = t_img + cfg["candidates"] * t_txt
    per_item_peer = t_img_peer + cfg["candidates"] * t_txt_peer
    kind = f"text cut to {length} of {context} tokens" if trim else f"text at its {context}"
    params = sum(p.numel() for p in model.parameters()) / 1e9
    out = row(
        "score", f"{arch} ({params:.2f}B, {size} px) per Color N=3 item", 1 / per_item,
        "items/s", f"CLIP_benchmark-style, padded to {context}", 1 / per_item_peer,
        note=f"{kind}, {ours} a batch; {1 / t_img:,.0f} img/s, {1 / t_txt:,.0f} captions/s",
    )  # fmt: skip
    out["paper_scale_h"] = (
        PAPER_SCALE["positives"] * t_img + PAPER_SCALE["captions"] * t_txt
    ) / 3600
    free(model)
    return out


def generative(cfg: dict, device: str, dtype: Any, budget: Any, sync: Callable) -> list[dict]:
    """Qwen2.5-VL per Color N=3 item at the render's size: autocomp's shared prefix (split
    attention) and the repeated cache it replaced, against candidates batched without sharing
    at the fastest batch of a sweep (timed on `baseline_candidates`, scaled to 729)."""
    from PIL import Image
    from transformers.image_utils import SizeDict

    from autocomp.scoring import ScoreRequest, load_scorer
    from scoring_baselines import batched_no_sharing
    from scoring_throughput import color_items

    scorer = load_scorer("tiny-qwen2.5-vl", device=device, chunk_size=cfg["qwen_chunk"])
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    tiny = scorer.model.config  # the architecture of cfg behind the tiny (offline) processor
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
    low, high = cfg["qwen_pixels"]  # transformers 5: min/max pixels live in `size`
    scorer.processor.image_processor.size = SizeDict(shortest_edge=low, longest_edge=high)
    side = cfg["qwen_image"]
    image = Image.new("RGB", (side, side), (180, 40, 40))
    prefix = scorer._prefix_inputs(image)
    image_tokens = int((prefix["input_ids"] == tiny.image_token_id).sum())
    require(image_tokens == cfg["qwen_image_tokens"] and (cfg is not FULL or image_tokens >= 540),
            f"Qwen2.5-VL prefix: {image_tokens} image tokens at {side} px, expected "
            f"{cfg['qwen_image_tokens']}")  # fmt: skip
    cut = cfg["qwen_caption_tokens"] - 4
    captions = [f"{i:03d} " + c[:cut] for i, c in enumerate(color_items(1)[0])]
    ids = scorer._caption_ids(captions)
    require(len(set(captions)) == cfg["candidates"] and {len(c) for c in ids} ==
            {cfg["qwen_caption_tokens"]}, f"candidates {len(set(captions))}, lengths "
            f"{sorted({len(c) for c in ids})}")  # fmt: skip
    requests = [ScoreRequest("img", c) for c in captions]
    prefix_tokens = prefix["input_ids"].shape[1]

    def shared() -> None:
        require(len(scorer.score(requests, {"img": image})) == len(ids), "scores")

    scorer.score(requests[:2], {"img": image})
    sync()
    t_shared = budget.median(shared, sync, most=3)
    scorer.split = False  # before: the prefix cache copied per candidate, masked SDPA over it
    scorer.score(requests[:2], {"img": image})
    t_repeated = budget.median(shared, sync, most=3)
    scorer.split = True
    sample = ids[: cfg["baseline_candidates"]]
    sweep = {}
    for b in cfg["baseline_sweep"]:
        batched_no_sharing(scorer, prefix, sample[:b], b)  # warm-up at this shape
        sync()
        sweep[b] = budget.median(lambda b=b: batched_no_sharing(scorer, prefix, sample, b), sync,
                                 most=3)  # fmt: skip
    best = min(sweep, key=sweep.__getitem__)
    t_batched = sweep[best] * len(ids) / len(sample)
    limit = (prefix_tokens + cfg["qwen_caption_tokens"]) / cfg["qwen_caption_tokens"]
    name = "Qwen2.5-VL-7B" if cfg is FULL else "tiny Qwen2.5-VL"
    swept = ", ".join(f"{b}: {len(sample) / t:,.1f}" for b, t in sweep.items())
    base = f"batched, no sharing, batch {best} (of {'/'.join(map(str, sweep))})"
    shape = f"prefix {prefix_tokens} tokens ({image_tokens} of image), 729 x 15-token captions"
    rows = [
        row("score", f"{name} shared prefix (autocomp) per Color N=3 item", 1 / t_shared,
            "items/s", base, 1 / t_batched,
            note=f"{shape}; token limit {limit:.0f}x; baseline candidates/s by batch: {swept}"),
        row("score", f"{name} shared prefix, repeated cache (before)", 1 / t_repeated,
            "items/s", base, 1 / t_batched,
            note=f"split attention is {t_repeated / t_shared:.2f}x the repeated cache"),
    ]  # fmt: skip
    # the suite averages 58 captions per item: scaled per caption (prefix cost left out)
    rows[0]["paper_scale_h"] = PAPER_SCALE["captions"] * t_shared / len(ids) / 3600
    free(scorer)
    return rows


# ----------------------------------------------------------------------------- validate


def _validators(cfg: dict, device: str, dtype: Any) -> tuple[Any, Any]:
    import torch
    from transformers import (
        BertConfig,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        Sam2Config,
        Sam2HieraDetConfig,
        Sam2MaskDecoderConfig,
        Sam2Model,
        Sam2PromptEncoderConfig,
        Sam2VisionConfig,
        SwinConfig,
    )  # fmt: skip

    with built_on(device, torch.float32):  # the registry runs both detectors in float32
        swin = SwinConfig(image_size=cfg["dino_image"],
                          out_features=["stage2", "stage3", "stage4"], **cfg["dino_swin"])  # fmt: skip
        dino = GroundingDinoForObjectDetection(
            GroundingDinoConfig(backbone_config=swin, text_config=BertConfig(**cfg["dino_bert"]),
                                num_feature_levels=4 if cfg is FULL else 3, **cfg["dino"])
        ).eval()  # fmt: skip
        vision = Sam2VisionConfig(
            backbone_config=Sam2HieraDetConfig(**cfg["sam_hiera"]), **cfg["sam_vision"]
        )
        sam = Sam2Model(Sam2Config(
            vision_config=vision,
            prompt_encoder_config=Sam2PromptEncoderConfig(**cfg["sam_prompt"]),
            mask_decoder_config=Sam2MaskDecoderConfig(**cfg["sam_decoder"]),
        )).eval()  # fmt: skip
    return dino, sam


def validate(cfg: dict, device: str, dtype: Any, budget: Any, sync: Callable) -> list[dict]:
    """Grounding DINO and SAM2.1 at `validate_batch` against one image at a time; the VQA
    check (Gemma-3-12B, 3 questions of 19 options per image) with one prefill per question and
    the options over its cache, against one full forward per option."""
    import torch

    batch, rows = cfg["validate_batch"], []
    dino, sam = _validators(cfg, device, dtype)
    side = cfg["dino_image"]
    pixels = torch.randn(batch, 3, side, side, device=device)
    text = torch.randint(1000, 2000, (batch, 16), device=device)
    text[:, 0], text[:, -1] = 101, 102  # [CLS] ... [SEP]

    def detect(n: int) -> Any:
        with torch.inference_mode():
            return dino(pixel_values=pixels[:n], input_ids=text[:n],
                        attention_mask=torch.ones_like(text[:n]))  # fmt: skip

    boxes = detect(batch).pred_boxes.shape
    require(tuple(boxes) == (batch, cfg["dino"]["num_queries"], 4), f"DINO boxes {boxes}")
    t_detect = budget.median(lambda: detect(batch), sync) / batch
    t_detect_1 = budget.median(lambda: detect(1), sync)
    rows.append(row("validate", f"Grounding DINO (Swin-T) detection, {side} px, batch {batch}",
                    1 / t_detect, "images/s", "one image a call", 1 / t_detect_1))  # fmt: skip
    size = cfg["sam_prompt"]["image_size"]
    sam_pixels = torch.randn(batch, 3, size, size, device=device)
    sam_boxes = torch.tensor([[10.0, 10.0, size / 2, size / 2]] * 3, device=device)
    sam_boxes = sam_boxes.expand(batch, -1, -1).contiguous()  # 3 objects per image

    def segment(n: int) -> Any:
        with torch.inference_mode():
            return sam(pixel_values=sam_pixels[:n], input_boxes=sam_boxes[:n],
                       multimask_output=False)  # fmt: skip

    masks = segment(batch).pred_masks.shape
    require(tuple(masks[:3]) == (batch, 3, 1), f"SAM2 masks {masks}")
    t_segment = budget.median(lambda: segment(batch), sync) / batch
    t_segment_1 = budget.median(lambda: segment(1), sync)
    rows.append(row("validate", f"SAM2.1 Hiera-L segmentation, {size} px, 3 boxes, batch {batch}",
                    1 / t_segment, "images/s", "one image a call", 1 / t_segment_1))  # fmt: skip
    free(dino, sam)
    t_vqa, t_vqa_naive, vqa_rows = _vqa(cfg, device, dtype, budget, sync)
    rows += vqa_rows
    # autocomp queries the detector once per object class (no box given to the wrong class by
    # phrase matching): N = 3 calls per Color N=3 image; the baseline, one multi-class query
    queries = cfg["detect_queries"]
    per_image = queries * t_detect + t_segment + VQA_SHARE * t_vqa
    per_image_base = t_detect_1 + t_segment_1 + VQA_SHARE * t_vqa_naive
    paper = 1 / (1 / PAPER_RATE["detect+segment"] + VQA_SHARE / PAPER_RATE["vqa"])
    rows.append(row("validate", "validation per rendered image (VQA on 47 %)", 1 / per_image,
                    "images/s", "the per-image baselines, one detector query", 1 / per_image_base,
                    paper, f"{queries} detector queries (one per class) + segment + 0.47 x VQA"))  # fmt: skip
    return rows


def _vqa(cfg: dict, device: str, dtype: Any, budget: Any, sync: Callable) -> tuple:
    import torch
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3TextConfig,
        SiglipVisionConfig,
    )  # fmt: skip

    image_token = 262144
    with built_on(device, dtype):
        gemma = Gemma3ForConditionalGeneration(Gemma3Config(
            text_config=Gemma3TextConfig(**cfg["gemma_text"]),
            vision_config=SiglipVisionConfig(**cfg["gemma_vision"]),
            mm_tokens_per_image=cfg["gemma_image_tokens"], image_token_index=image_token,
            boi_token_index=255999, eoi_token_index=256000,
        )).eval()  # fmt: skip
    questions, options = cfg["vqa_questions"], cfg["vqa_options"]
    vision = cfg["gemma_vision"]["image_size"]
    picture = torch.randn(1, 3, vision, vision, device=device, dtype=dtype)
    prompts = torch.randint(1000, 200000, (questions, cfg["vqa_prompt_tokens"]), device=device)
    image_ids = torch.full((1, cfg["gemma_image_tokens"]), image_token, device=device)
    answers = torch.randint(1000, 200000, (options, cfg["vqa_option_tokens"]), device=device)

    def prefix(q: int) -> Any:
        return torch.cat([prompts[q : q + 1, :4], image_ids, prompts[q : q + 1, 4:]], 1)

    def shared() -> None:  # autocomp: the image + question once, every option over its cache
        with torch.inference_mode():
            for q in range(questions):
                ids = prefix(q)
                cache = gemma(input_ids=ids, pixel_values=picture, use_cache=True,
                              logits_to_keep=1).cache  # fmt: skip
                cache.batch_repeat_interleave(options)
                out = gemma(input_ids=answers, cache=cache)
                require(tuple(out.logits.shape[:2]) == answers.shape, "VQA option logits")

    def naive() -> None:  # one forward per option: the image + question + that option
        with torch.inference_mode():
            for q in range(questions):
                ids = torch.cat([prefix(q).expand(options, -1), answers], 1)
                gemma(input_ids=ids, pixel_values=picture.expand(options, -1, -1, -1),
                      logits_to_keep=answers.shape[1] + 1)  # fmt: skip

    tokens = int((prefix(0) == image_token).sum())
    require(tokens == cfg["gemma_image_tokens"], f"Gemma-3 prefix: {tokens} image tokens")
    shared(), naive(), sync()
    t_shared = budget.median(shared, sync)
    t_naive = budget.median(naive, sync)
    free(gemma)
    what = f"Gemma-3-12B VQA, {questions} questions x {options} options per image"
    note = f"prefix {prefix(0).shape[1]} tokens ({tokens} of image); shared: 1 prefill a question"
    rows = [row("validate", what, 1 / t_shared, "images/s", "one forward per option",
                1 / t_naive, PAPER_RATE["vqa"], note)]  # fmt: skip
    return t_shared, t_naive, rows


# ----------------------------------------------------------------------------- render


def render(cfg: dict, device: str, dtype: Any, budget: Any, sync: Callable) -> list[dict]:
    """SD3.5 Large (MMDiT, CLIP-L + CLIP-G + T5-XXL, the SD3 VAE), the pipeline's computation
    as an explicit loop (its tokenizers are not downloadable): `render_batch` prompts a call
    (autocomp's batched render) against one prompt a call."""
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
    steps, scale = cfg["steps"], cfg["cfg"]

    def generate(batch: int, steps: int = steps) -> Any:
        rows = 2 * batch  # conditional + unconditional
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
            return vae.decode(latents / vae.config.scaling_factor + vae.config.shift_factor).sample

    batch = cfg["render_batch"]
    shape = tuple(generate(batch, 2).shape)  # warm-up: kernels, allocator (timed runs: all steps)
    require(shape == (batch, 3, cfg["image"], cfg["image"]), f"SD3.5 images {shape}")
    generate(1, 2)
    sync()
    t_one = budget.median(lambda: generate(1), sync, most=3)
    t_batch = budget.median(lambda: generate(batch), sync, most=2) / batch
    params = sum(p.numel() for p in transformer.parameters()) / 1e9
    tokens = (cfg["image"] // 8 // cfg["sd3"]["patch_size"]) ** 2
    free(transformer, vae, clips, t5)
    what = f"SD3.5-L ({params:.1f}B MMDiT) {cfg['image']} px, {steps} steps, CFG {scale}"
    return [row("render", f"{what}, batch {batch}", 1 / t_batch, "images/s", "one prompt a call",
                1 / t_one, PAPER_RATE["render"], f"{tokens} image tokens a row")]  # fmt: skip
