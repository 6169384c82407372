"""The render stage: one image per caption with a diffusers text-to-image pipeline.

Each concept that kept its captions becomes two samples, `<concept_id>/minimal` and
`<concept_id>/contextual`, rendered with the *same* seed (derived from the run seed and the
concept id), so the A/B pair differs only in its caption. Every image has its own
`torch.Generator`, so its noise does not depend on which other prompts share its batch: a re-run
with the same shards and batch size is bit-identical, and another batch size changes pixels only
by float rounding (measured: at most 1 level in under 0.02 % of pixels).

Images are PNG (lossless) at `images/<concept_id>/<condition>.png` under the stage folder (the
CLI) or under a prefix of a store (the pipelines: `images=StoreImages(...)`, so no image passes
through a KFP artifact), each with a `autocomp` PNG text chunk (prompt, seed, model, settings).
An image is written atomically (a local rename, an S3 PUT) as soon as it is rendered; on a
re-run, images that already exist and decode are reused (a killed or preempted shard resumes
where it stopped), then the shard's table is written. The table does not say which images were
reused, so a resumed shard is byte-identical to one that ran through (at the same batch size;
the summary counts the reused images).

render table (one row per sample):
    sample_id, concept_id, family, n, objects, attributes, condition, caption,
    image (path relative to the stage folder), seed (int64), renderer, width, height,
    sha256 (of the PNG file)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa

from autocomp.config import RenderConfig
from autocomp.devices import check_device, select_device, select_dtype
from autocomp.errors import UsageError
from autocomp.generation.registry import (
    GenerationModel,
    check_settings,
    get_generation_model,
    weights_error,
)
from autocomp.store.atomic import atomic_path
from autocomp.store.catalog import ids
from autocomp.store.catalog.schemas import RENDER_SCHEMA
from autocomp.store.images import ImageFolder, Images
from autocomp.store.shards import (
    check_shard_args,
    input_digest,
    prepare_folder,
    read_stage,
    shard_of,
    shard_path,
    unfinished,
)
from autocomp.store.storage import file_sha256
from autocomp.store.tables import provenance, require_columns, write_table

CONDITIONS = ("minimal", "contextual")


def image_seed(seed: int, concept_id: str) -> int:
    """The generator seed shared by a concept's Minimal and Contextual images."""
    digest = hashlib.sha256(f"autocomp/render/{seed}/{concept_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def samples(captions: pa.Table, seed: int) -> list[dict[str, Any]]:
    """The samples to render: both conditions of every concept that kept its captions."""
    out = []
    for row in captions.to_pylist():
        if row["status"] == "dropped":
            continue
        texts = {"minimal": row["minimal_caption"], "contextual": row["contextual_caption"]}
        for condition in CONDITIONS:
            out.append(
                {
                    "sample_id": ids.sample_id(row["concept_id"], condition),
                    "concept_id": row["concept_id"],
                    "family": row["family"],
                    "n": row["n"],
                    "objects": row["objects"],
                    "attributes": row["attributes"],
                    "condition": condition,
                    "caption": texts[condition],
                    "caption_status": row["status"],
                    "seed": image_seed(seed, row["concept_id"]),
                }
            )
    return out


def random_pipeline(source: str, pipeline_class: str, dtype: Any) -> Any:
    """The pipeline with every model built from its config, random weights (throughput
    benchmarks of full-size architectures: configs and tokenizers are read, weights never)."""
    import diffusers
    import transformers

    cls = getattr(diffusers, pipeline_class)
    parts = {}
    for name, spec in cls.load_config(source).items():
        if name.startswith("_") or not isinstance(spec, list | tuple) or spec[0] is None:
            continue
        library, class_name = spec
        part_cls = getattr(diffusers if library == "diffusers" else transformers, class_name)
        if "Tokenizer" in class_name or "Scheduler" in class_name:
            parts[name] = part_cls.from_pretrained(source, subfolder=name)
        elif library == "diffusers":
            parts[name] = part_cls.from_config(part_cls.load_config(source, subfolder=name))
        else:
            config = transformers.AutoConfig.from_pretrained(source, subfolder=name)
            parts[name] = part_cls._from_config(config, dtype=dtype)
    return cls(**parts).to(dtype=dtype)


@runtime_checkable
class Renderer(Protocol):
    """What the render stage asks of a text-to-image backend (beside autocomp.scoring.Scorer):
    one image per prompt, each from its own seed, so an image does not depend on its batch."""

    def render(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Any]:
        """One PIL image per prompt, in order, the i-th drawn from `seeds[i]`."""
        ...


class DiffusersRenderer:
    """A Renderer: a diffusers pipeline loaded by model id (bf16 on GPU), rendering seeded
    batches."""

    def __init__(
        self,
        entry: GenerationModel,
        device: str | None = None,
        random_weights: bool = False,
        **overrides: Any,
    ) -> None:
        import diffusers

        self.entry = entry
        self.settings = {**entry.settings, **overrides}
        self.device = select_device(device)
        dtype = select_dtype(entry.dtype, self.device)
        pipeline_class = getattr(diffusers, entry.pipeline_class or "DiffusionPipeline")
        diffusers.utils.logging.disable_progress_bar()  # autocomp shows its own progress
        try:
            if random_weights:
                self.pipe = random_pipeline(entry.source(), pipeline_class.__name__, dtype)
            else:
                self.pipe = pipeline_class.from_pretrained(entry.source(), dtype=dtype)
        except (OSError, ValueError) as exc:
            raise weights_error("renderer", entry, exc) from exc
        self.pipe = self.pipe.to(self.device)
        self.pipe.set_progress_bar_config(disable=True)

    def render(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[Any]:
        import torch

        generators = [torch.Generator(self.device).manual_seed(s) for s in seeds]
        with torch.inference_mode():
            result = self.pipe(prompt=list(prompts), generator=generators, **self.settings)
        return list(result.images)


def load_renderer(name: str, device: str | None = None, **overrides: Any) -> Renderer:
    """The registered renderer `name` (generation/models.yaml), loaded with diffusers."""
    return DiffusersRenderer(get_generation_model("renderer", name), device=device, **overrides)


def encode_png(image: Any, info: dict[str, Any]) -> bytes:
    """The PNG file of an image, with an `autocomp` text chunk."""
    import io

    from PIL.PngImagePlugin import PngInfo

    meta = PngInfo()
    meta.add_text("autocomp", json.dumps(info, sort_keys=True))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=meta)
    return buffer.getvalue()


def save_png(image: Any, path: Path, info: dict[str, Any]) -> str:
    """Write a PNG atomically with an `autocomp` text chunk; return the file's SHA-256."""
    data = encode_png(image, info)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def _existing(path: Path | bytes) -> tuple[int, int] | None:
    """(width, height) of an image already there (a file, or its bytes) that decodes, else
    None."""
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(path) if isinstance(path, bytes) else path) as image:
            image.load()
            return image.size
    except (OSError, ValueError):
        return None


def _reusable(images: Images, ref: str, present: set[str] | None) -> tuple[tuple, str] | None:
    """((width, height), SHA-256) of an image a killed run already wrote, if it decodes.
    `present`: the references a store holds (one listing per shard; a folder is looked at)."""
    if isinstance(images, ImageFolder):
        path = images.root / ref
        size = _existing(path)
        return (size, file_sha256(path)) if size else None
    if present is None or ref not in present:
        return None
    data = images.read(ref)
    size = _existing(data)
    return (size, hashlib.sha256(data).hexdigest()) if size else None


def check_config(config: RenderConfig) -> GenerationModel:
    """The render settings are valid (before any work; the pipelines check their parameters
    with it too); returns the renderer's registry entry."""
    entry = get_generation_model("renderer", config.renderer)
    check_settings(entry, config.settings)
    check_shard_args(None, config.num_shards)
    if config.batch_size < 1:
        raise UsageError("batch_size", config.batch_size, "must be at least 1")
    check_device(config.device)
    return entry


def render_stage(
    captions: str | Path,
    out: str | Path,
    config: RenderConfig,
    shard: int | None = None,
    progress: Callable[[int], None] | None = None,
    load: Callable[[], Renderer] | None = None,
    images: Images | None = None,
) -> dict[str, int]:
    """`autocomp render`: images and render table for the selected shards; returns counts.
    The tables go to `out`; the images to `images` (default: `out` itself, as images/...)."""
    entry = check_config(config)
    shards = check_shard_args(shard, config.num_shards)
    folder = prepare_folder(out)
    images = images or ImageFolder(folder)
    table, _ = read_stage(captions, "captions", "captions")
    require_columns(
        captions,
        table.schema,
        ("concept_id", "contextual_caption", "status"),
        "give the caption stage's output folder",
    )
    settings = {**entry.settings, **config.settings}
    record = render_record(captions, config)
    todo = unfinished(folder, "render", shards, config.num_shards, record)
    summary = {"images": 0, "reused": 0, "skipped_shards": len(shards) - len(todo)}
    if not todo:
        return summary
    model: Renderer | None = None
    all_samples = samples(table, config.seed)
    for s in todo:
        mine = [x for x in all_samples if shard_of(x["concept_id"], config.num_shards) == s]
        present = None if isinstance(images, ImageFolder) else images.present("images")
        rows = []
        for start in range(0, len(mine), config.batch_size):
            batch = mine[start : start + config.batch_size]
            refs = [f"images/{x['sample_id']}.png" for x in batch]
            found = [_reusable(images, ref, present) for ref in refs]
            need = [i for i, got in enumerate(found) if got is None]
            if need:
                model = model or (
                    load()
                    if load
                    else load_renderer(config.renderer, config.device, **config.settings)
                )
                rendered = model.render(
                    [batch[i]["caption"] for i in need], [batch[i]["seed"] for i in need]
                )
                for i, image in zip(need, rendered):
                    info = {
                        "prompt": batch[i]["caption"],
                        "seed": batch[i]["seed"],
                        "renderer": entry.name,
                        "weights": entry.weights,
                        "settings": settings,
                    }
                    data = encode_png(image, info)
                    images.write(refs[i], data)
                    found[i] = (image.size, hashlib.sha256(data).hexdigest())
            for i, x in enumerate(batch):
                (width, height), sha = found[i]  # type: ignore[misc]
                rows.append(
                    {
                        **x,
                        "image": refs[i],
                        "renderer": entry.name,
                        "width": width,
                        "height": height,
                        "sha256": sha,
                    }
                )
                summary["reused" if i not in need else "images"] += 1
            if progress:
                progress(len(batch))
        write_table(
            pa.Table.from_pylist(rows, RENDER_SCHEMA),
            shard_path(folder, "render", s, config.num_shards),
            provenance("render", config=record, shard=s, batch_size=config.batch_size),
        )
    return summary


def render_record(captions: str | Path, config: RenderConfig) -> dict[str, Any]:
    """What a render shard is made with (recorded in every shard; resume keys on it): the
    renderer and its settings, the seed, the shard count and the captions' content."""
    entry = get_generation_model("renderer", config.renderer)
    return {
        "renderer": entry.record(config.settings),
        "seed": config.seed,
        "num_shards": config.num_shards,
        "input_sha256": input_digest(captions, "captions", "captions"),
    }
