"""Detector and segmenter backends (transformers): Grounding DINO boxes and SAM2 masks; a
segmenter entry with `backend: sam2` runs the original package instead (sam2_original.py).

transformers' own implementations load the checkpoints the paper names
(IDEA-Research/grounding-dino-tiny; SAM2.1 hiera-large); the groundingdino-py package does not
work with transformers 5, which diffusers needs.

The detector takes (image, class name) pairs in batches: one text query per object class, so
every box it returns is a box of that class (autocomp.generation.checks explains the counting).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from autocomp.devices import select_device
from autocomp.generation.registry import GenerationModel, get_generation_model, weights_error

Box = list[float]


def query_text(name: str) -> str:
    """Grounding DINO's text format: lower case, each phrase ended by a period."""
    return f"{name.strip().lower()}."


class _ProcessorModel:
    """A transformers processor + model pair loaded from a registry entry (shared loading)."""

    model_class = ""  # the transformers class that loads the weights
    option = ""  # the CLI option that chose the model, for errors

    def __init__(
        self,
        entry: GenerationModel,
        device: str | None = None,
        random_weights: bool = False,
        **overrides: Any,
    ) -> None:
        import transformers

        self.entry = entry
        self.settings = {**entry.settings, **overrides}
        self.device = select_device(device)
        source = entry.source()
        model_class = getattr(transformers, self.model_class)
        try:
            self.processor = transformers.AutoProcessor.from_pretrained(source)
            if random_weights:  # throughput benchmarks: the architecture from its config alone
                config = transformers.AutoConfig.from_pretrained(source)
                load = getattr(model_class, "from_config", None) or model_class._from_config
                self.model = load(config)
            else:
                self.model = model_class.from_pretrained(source)
        except (OSError, ValueError) as exc:
            raise weights_error(self.option, entry, exc) from exc
        self.model = self.model.to(self.device).eval()


class Detector(_ProcessorModel):
    """Open-vocabulary detection with Grounding DINO (box and text thresholds from settings)."""

    model_class = "AutoModelForZeroShotObjectDetection"
    option = "detector"

    @property
    def max_text_len(self) -> int:
        return int(getattr(self.model.config, "max_text_len", 256))

    def too_long(self, names: Sequence[str]) -> list[str]:
        """Class names whose query does not fit the detector's text length."""
        if not names:
            return []
        ids = self.processor.tokenizer([query_text(n) for n in names]).input_ids
        return [n for n, i in zip(names, ids) if len(i) > self.max_text_len]

    def detect(self, pairs: Sequence[tuple[Any, str]]) -> list[tuple[list[Box], list[float]]]:
        """(boxes in pixels, scores) for each (image, class name) pair."""
        import torch

        images = [image for image, _ in pairs]
        inputs = self.processor(
            images=images,
            text=[query_text(n) for _, n in pairs],
            return_tensors="pt",
            padding=True,
        )
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        with torch.inference_mode():
            outputs = self.model(**inputs)
        results = self.processor.post_process_grounded_object_detection(
            outputs,
            inputs["input_ids"],
            threshold=self.settings["box_threshold"],
            text_threshold=self.settings["text_threshold"],
            target_sizes=[(im.height, im.width) for im in images],
        )
        return [(r["boxes"].tolist(), r["scores"].tolist()) for r in results]


class Segmenter(_ProcessorModel):
    """SAM2 masks prompted by boxes: one boolean (height, width) union mask per image."""

    model_class = "Sam2Model"
    option = "segmenter"

    def union_mask(self, image: Any, boxes: Sequence[Box]) -> Any:
        import numpy as np
        import torch

        if not boxes:
            return np.zeros((image.height, image.width), dtype=bool)
        inputs = self.processor(
            images=image, input_boxes=[[list(b) for b in boxes]], return_tensors="pt"
        )
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        with torch.inference_mode():
            out = self.model(**inputs, multimask_output=False)
        masks = self.processor.post_process_masks(
            out.pred_masks.cpu(), inputs["original_sizes"].cpu()
        )
        return masks[0].any(dim=(0, 1)).numpy()


def load_detector(name: str, device: str | None = None, **overrides: Any) -> Detector:
    return Detector(get_generation_model("detector", name), device=device, **overrides)


def _original_segmenter(entry: GenerationModel, device: str | None, **overrides: Any) -> Any:
    from autocomp.generation.sam2_original import OriginalSegmenter

    return OriginalSegmenter(entry, device=device, **overrides)


# A segmenter entry's `backend` (models.yaml) -> what loads it: transformers' Sam2Model port, or
# the original sam2 package (generation/sam2_original.py; its own environment)
SEGMENTER_BACKENDS: dict[str, Callable[..., Any]] = {
    "transformers": Segmenter,
    "sam2": _original_segmenter,
}


def load_segmenter(name: str, device: str | None = None, **overrides: Any) -> Any:
    """The segmenter of a registry entry, by its backend (both give `union_mask`)."""
    entry = get_generation_model("segmenter", name)
    return SEGMENTER_BACKENDS[entry.backend](entry, device=device, **overrides)
