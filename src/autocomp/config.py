"""One typed configuration per stage, and the profiles (`paper`, `tiny`) defined once.

The CLI's flag defaults, the Kubeflow pipelines' parameter defaults and the local run all read
these objects; stage functions take their configuration object instead of a dozen positionals.
Every output records the effective configuration (the stage's own record of models, settings and
seeds), so a default changed here shows up in what the next run writes.

- `paper`: the paper's setup (Appendix A.6): Gemma-3-12b-it captions through vLLM on the
  cluster, SD3.5-large at 1024 px / 28 steps / CFG 4.5, Grounding DINO tiny + SAM2.1-L + Gemma
  VQA, every registered (non-tiny) model scored.
- `tiny`: random-weight models built from configs, offline on a CPU (tests, `make demo`).
  Random detectors reject every image, so it runs every check and keeps rejected samples
  (marked) to exercise the rest of the chain; random LLMs never pass the caption check, so it
  falls back to the Minimal caption (marked).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from autocomp.errors import UsageError

PAPER_SPECS = (
    "color:2,color:3,shape_color:2,shape_color:3,position:2,position:3,"
    "relative_size:2,relative_size:3"
)


@dataclass(frozen=True)
class SampleConfig:
    """`sample` (several family:N pairs, as the pipeline runs it)."""

    specs: str = PAPER_SPECS
    count: int = 1000
    seed: int = 0


@dataclass(frozen=True)
class CaptionConfig:
    """`caption`: the LLM that writes Contextual captions (paper protocol: checked, 3 tries)."""

    captioner: str
    engine: str = "transformers"
    seed: int = 0
    num_shards: int = 1
    batch_size: int = 16
    fallback: str | None = None
    device: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RenderConfig:
    """`render`: the text-to-image model, one seed per concept shared by both conditions."""

    renderer: str
    seed: int = 0
    num_shards: int = 1
    batch_size: int = 4
    device: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ValidateConfig:
    """`validate`: detector, segmenter and VQA judge; `settings` per role (detector, segmenter)."""

    detector: str
    segmenter: str
    vqa: str
    num_shards: int = 1
    batch_size: int = 8
    masks: str = "sam2"
    all_checks: bool = False
    device: str | None = None
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class CurateConfig:
    """`curate`: B_min, B_ctx, B_paired and the survival table."""

    keep_rejected: bool = False


@dataclass(frozen=True)
class NegativesConfig:
    """`negatives`: Swap and Confusion candidate sets (workers: None = one process per usable
    core, after any cgroup CPU quota, 1 = in process; force: replace an existing output)."""

    protocol: str = "paper"
    workers: int | None = None
    batch_size: int = 256
    force: bool = False


@dataclass(frozen=True)
class ImportConfig:
    """`import`: a benchmark autocomp did not make, as a benchmark folder (protocol: the
    candidate sets rebuilt for mapped Auto-Comp concepts; skip_missing: drop and count rows
    whose image file is missing instead of stopping; force: replace an existing folder)."""

    protocol: str = "paper"
    skip_missing: bool = False
    force: bool = False


@dataclass(frozen=True)
class ScoreConfig:
    """`score`: models on one benchmark (a table, a folder of parts or a published name).

    `blind` (paper A.8, generative models only): "" scores each caption against its image;
    "likelihood" scores each caption's log-likelihood without the image (True, the old flag,
    means this); "choice" shows the positive and up to `choice_negatives` negatives of a set,
    shuffled under `choice_seed`, in one prompt and reads which number the model answers.
    `batch_size`: candidate texts per forward pass (open_clip: captions per text-encoder batch;
    transformers: candidates per chunk after the shared prefix, halved on out-of-memory); None
    keeps each backend's own default (open_clip: 256 on a CPU, sized to the free memory on a GPU;
    transformers: 128). `limit`: score only the first N benchmark items (in table order); None
    scores them all. `max_candidates`: candidates per written part (the resume granularity).
    """

    images: str | None = None
    blind: str = ""
    device: str | None = None
    max_candidates: int = 4096
    batch_size: int | None = None
    limit: int | None = None
    choice_negatives: int = 49
    choice_seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.blind, bool):  # the flag's former type: True = caption likelihood
            object.__setattr__(self, "blind", "likelihood" if self.blind else "")


@dataclass(frozen=True)
class Profile:
    """A whole run's configuration: one configuration per stage, the models scored, and the
    pipeline's fan-out (`num_shards`: render/validate workers)."""

    name: str
    sample: SampleConfig
    caption: CaptionConfig
    render: RenderConfig
    validate: ValidateConfig
    curate: CurateConfig
    negatives: NegativesConfig
    models: tuple[str, ...]
    num_shards: int
    offline: bool = False  # random weights only: nothing is downloaded

    def roles(self) -> dict[str, str]:
        """The model of each generation role (and the VQA judge)."""
        return {
            "captioner": self.caption.captioner,
            "renderer": self.render.renderer,
            "detector": self.validate.detector,
            "segmenter": self.validate.segmenter,
            "vqa": self.validate.vqa,
        }


PROFILES: dict[str, Profile] = {
    "paper": Profile(
        name="paper",
        sample=SampleConfig(),
        caption=CaptionConfig(captioner="gemma-3-12b-it", engine="vllm"),
        render=RenderConfig(renderer="sd3.5-large", batch_size=16),
        validate=ValidateConfig(
            detector="grounding-dino-tiny", segmenter="sam2.1-hiera-large", vqa="gemma-3-12b-it"
        ),
        curate=CurateConfig(),
        negatives=NegativesConfig(),
        models=("all",),
        num_shards=16,
    ),
    "tiny": Profile(
        name="tiny",
        sample=SampleConfig(specs="color:2,position:2", count=2),
        caption=CaptionConfig(captioner="tiny-llm", fallback="minimal"),
        render=RenderConfig(renderer="tiny-sd3"),
        validate=ValidateConfig(
            detector="tiny-grounding-dino",
            segmenter="tiny-sam2",
            vqa="tiny-qwen2.5-vl",
            all_checks=True,
        ),
        curate=CurateConfig(keep_rejected=True),
        negatives=NegativesConfig(),
        models=("tiny-clip", "tiny-siglip", "tiny-qwen2.5-vl"),
        num_shards=2,
        offline=True,
    ),
}


def get_profile(name: str) -> Profile:
    """A profile by name; an unknown name is a usage error that lists the known ones."""
    if name not in PROFILES:
        raise UsageError("--profile", name, f"must be one of {', '.join(PROFILES)}")
    return PROFILES[name]


def with_overrides(config: Any, **given: Any) -> Any:
    """`config` with the given fields replaced; None means "not given" (keep the default)."""
    names = {f.name for f in fields(config)}
    unknown = sorted(set(given) - names)
    if unknown:
        raise TypeError(f"{type(config).__name__} has no field {unknown[0]}")
    return replace(config, **{k: v for k, v in given.items() if v is not None})


def generate_arguments(profile: Profile) -> dict[str, Any]:
    """The generate_benchmark pipeline's parameters for a profile (the compiled pipeline's
    defaults are `generate_arguments(PROFILES["paper"])`; the local run passes the tiny ones)."""
    return {
        "specs": profile.sample.specs,
        "count": profile.sample.count,
        "seed": profile.sample.seed,
        "captioner": profile.caption.captioner,
        "caption_engine": profile.caption.engine,
        "caption_settings": dict(profile.caption.settings),
        "caption_fallback": profile.caption.fallback or "",
        "renderer": profile.render.renderer,
        "render_settings": dict(profile.render.settings),
        "render_batch_size": profile.render.batch_size,
        "detector": profile.validate.detector,
        "segmenter": profile.validate.segmenter,
        "vqa": profile.validate.vqa,
        "validate_settings": dict(profile.validate.settings),
        "masks": profile.validate.masks,
        "all_checks": profile.validate.all_checks,
        "keep_rejected": profile.curate.keep_rejected,
        "protocol": profile.negatives.protocol,
        "num_shards": profile.num_shards,
    }


def evaluate_arguments(profile: Profile) -> dict[str, Any]:
    """The evaluate_models pipeline's parameters for a profile."""
    return {"models": list(profile.models), "report_seed": 0}
