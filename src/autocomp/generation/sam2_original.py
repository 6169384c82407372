"""The original SAM 2 package (facebookresearch/sam2, PyPI `sam2`) as a segmenter backend, and
the key mapping that turns its state dict into transformers' `Sam2Model` (the port the default
segmenter runs).

The paper ran the original package; validation runs transformers' port by default (one
environment with diffusers). `--segmenter sam2.1-hiera-large-original` runs the original
(`SAM2ImagePredictor`, box prompts, masks thresholded at 0) for users who want the paper's exact
stack. It needs `sam2`, which pins omegaconf/antlr4 4.9 through hydra-core (the dev tools'
moto[server] takes antlr4 4.13): `make env-sam2` layers it over .venv (.envs/sam2); the gpu image
installs it (images/Dockerfile, SOURCE_EXTRA). The sam2 lane (`make test-sam2`) holds the two
equal on random weights.

The mapping is transformers' own converter, read from
huggingface/transformers src/transformers/models/sam2/convert_sam2_to_hf.py (not in the wheel):
its `KEYS_TO_MODIFY_MAPPING` (substring renames, applied in order) and `replace_keys()` (the
regex renames of MLP layers, neck convs and the memory encoder's projection; the four point
embeddings stacked into one; the shared positional embedding copied). The video-memory weights
it carries over are ones `Sam2Model` (the image model) ignores on load
(`Sam2Model._keys_to_ignore_on_load_unexpected`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from autocomp.devices import select_device
from autocomp.errors import UsageError
from autocomp.generation.registry import GenerationModel, weights_error

Box = list[float]

# convert_sam2_to_hf.py KEYS_TO_MODIFY_MAPPING, in its order (each applies to the key as renamed
# by the ones before it)
KEY_RENAMES: tuple[tuple[str, str], ...] = (
    ("iou_prediction_head.layers.0", "iou_prediction_head.proj_in"),
    ("iou_prediction_head.layers.1", "iou_prediction_head.layers.0"),
    ("iou_prediction_head.layers.2", "iou_prediction_head.proj_out"),
    ("mask_decoder.output_upscaling.0", "mask_decoder.upscale_conv1"),
    ("mask_decoder.output_upscaling.1", "mask_decoder.upscale_layer_norm"),
    ("mask_decoder.output_upscaling.3", "mask_decoder.upscale_conv2"),
    ("mask_downscaling.0", "mask_embed.conv1"),
    ("mask_downscaling.1", "mask_embed.layer_norm1"),
    ("mask_downscaling.3", "mask_embed.conv2"),
    ("mask_downscaling.4", "mask_embed.layer_norm2"),
    ("mask_downscaling.6", "mask_embed.conv3"),
    ("dwconv", "depthwise_conv"),
    ("pwconv", "pointwise_conv"),
    ("fuser", "memory_fuser"),
    ("point_embeddings", "point_embed"),
    ("pe_layer.positional_encoding_gaussian_matrix", "shared_embedding.positional_embedding"),
    ("obj_ptr_tpos_proj", "temporal_positional_encoding_projection_layer"),
    ("no_obj_embed_spatial", "occlusion_spatial_embedding_parameter"),
    ("sam_prompt_encoder", "prompt_encoder"),
    ("sam_mask_decoder", "mask_decoder"),
    ("maskmem_tpos_enc", "memory_temporal_positional_encoding"),
    ("gamma", "scale"),
    ("image_encoder.neck", "vision_encoder.neck"),
    ("image_encoder", "vision_encoder.backbone"),
    ("neck.0", "neck.conv1"),
    ("neck.1", "neck.layer_norm1"),
    ("neck.2", "neck.conv2"),
    ("neck.3", "neck.layer_norm2"),
    ("pix_feat_proj", "feature_projection"),
    ("patch_embed.proj", "patch_embed.projection"),
    ("no_mem_embed", "no_memory_embedding"),
    ("no_mem_pos_enc", "no_memory_positional_encoding"),
    ("obj_ptr", "object_pointer"),
    (".norm", ".layer_norm"),
    ("trunk.", ""),
    ("out_proj", "o_proj"),
)

# replace_keys(): an MLP's numbered layers -> proj_in / layers.k / proj_out, by pattern
_TWO_LAYER = {0: "proj_in", 1: "proj_out"}
_THREE_LAYER = {0: "proj_in", 1: "layers.0", 2: "proj_out"}
_MLP_RULES: tuple[tuple[re.Pattern[str], int, str, dict[int, str]], ...] = (
    # (pattern, the group holding the layer number, the text before it, new names)
    (re.compile(r"vision_encoder.backbone.blocks.(\d+).mlp.layers.(\d+).*"), 2, "", _TWO_LAYER),
    (re.compile(r"mask_decoder.transformer.layers.(\d+).mlp.layers.(\d+).*"), 2, "mlp.",
     _TWO_LAYER),
    (re.compile(r"mask_decoder.pred_obj_score_head.layers.(\d+).*"), 1, "", _THREE_LAYER),
    (re.compile(r".*.output_hypernetworks_mlps.(\d+).layers.(\d+).*"), 2, "", _THREE_LAYER),
    (re.compile(r"object_pointer_proj.layers.(\d+).*"), 1, "", _THREE_LAYER),
)  # fmt: skip
_NECK_CONV = re.compile(r"vision_encoder.neck.convs.(\d+).conv")
_MEMORY_PROJECTION = re.compile(r"memory_encoder.o_proj.*")
POINT_EMBEDDINGS = 4  # the original's point_embeddings.0-3, one (1, C) weight each


def convert_key(key: str) -> str:
    """One original state-dict key as transformers' Sam2Model names it (replace_keys())."""
    for old, new in KEY_RENAMES:
        if old in key:
            key = key.replace(old, new)
    for pattern, group, prefix, names in _MLP_RULES:
        match = pattern.match(key)
        if match:
            layer = int(match.group(group))
            if layer in names:
                key = key.replace(f"{prefix}layers.{layer}", f"{prefix}{names[layer]}")
    if _NECK_CONV.match(key):
        key = key.replace(".conv.", ".")
    if _MEMORY_PROJECTION.match(key):
        key = key.replace(".o_proj.", ".projection.")
    return key


def convert_state_dict(original: dict[str, Any]) -> dict[str, Any]:
    """The original package's state dict (`SAM2Base.state_dict()` or a checkpoint's "model")
    renamed for transformers' Sam2Model."""
    import torch

    converted = {convert_key(k): v for k, v in original.items()}
    converted["shared_image_embedding.positional_embedding"] = converted[
        "prompt_encoder.shared_embedding.positional_embedding"
    ]
    converted["prompt_encoder.point_embed.weight"] = torch.cat(
        [converted.pop(f"prompt_encoder.point_embed.{i}.weight") for i in range(POINT_EMBEDDINGS)]
    )
    return converted


def ignored_on_load(keys: Sequence[str]) -> list[str]:
    """The converted keys Sam2Model does not hold (the video model's memory weights), by its
    own `_keys_to_ignore_on_load_unexpected`; every other unexpected key is a mapping error."""
    from transformers import Sam2Model

    patterns = Sam2Model._keys_to_ignore_on_load_unexpected or []
    return [k for k in keys if any(re.search(p, k) for p in patterns)]


def _sam2_modules() -> tuple[Any, Any]:
    """(build_sam, SAM2ImagePredictor) of the original package, or one line naming the install."""
    try:
        from sam2 import build_sam
        from sam2.sam2_image_predictor import SAM2ImagePredictor
    except ImportError as exc:
        raise UsageError(
            "segmenter",
            "sam2 (original package)",
            f"is not installed here ({exc.name or exc}): run autocomp with the python of "
            ".envs/sam2 (`make env-sam2`) or the gpu image, or pick a transformers segmenter",
        ) from None
    return build_sam, SAM2ImagePredictor


class OriginalSegmenter:
    """SAM 2 masks from the original package, prompted by boxes: one boolean (height, width)
    union mask per image (the same contract as detection.Segmenter)."""

    option = "segmenter"

    def __init__(
        self,
        entry: GenerationModel,
        device: str | None = None,
        random_weights: bool = False,
        **overrides: Any,
    ) -> None:
        build_sam, predictor_class = _sam2_modules()
        self.entry = entry
        self.settings = {**entry.settings, **overrides}
        self.device = select_device(device)
        try:
            if random_weights:  # throughput benchmarks: the architecture from its config alone
                config, _ = build_sam.HF_MODEL_ID_TO_FILENAMES[entry.weights]
                model = build_sam.build_sam2(config, ckpt_path=None, device=self.device)
            else:
                model = build_sam.build_sam2_hf(entry.weights, device=self.device)
        except (OSError, ValueError) as exc:
            raise weights_error(self.option, entry, exc) from exc
        self.predictor = predictor_class(model)

    def union_mask(self, image: Any, boxes: Sequence[Box]) -> Any:
        import numpy as np
        import torch

        if not boxes:
            return np.zeros((image.height, image.width), dtype=bool)
        with torch.inference_mode():
            self.predictor.set_image(image)
            masks, _, _ = self.predictor.predict(
                box=np.asarray(boxes, dtype=np.float32), multimask_output=False
            )
        return masks.reshape(-1, image.height, image.width).astype(bool).any(axis=0)
