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

A profile holds every stage's configuration, fine-tuning's (paper A.9) included; which of its
fields reach the Kubeflow pipelines, under which parameter names, is one table
(autocomp.pipelines.plumbing). `with_overrides` is the one way to change some fields of one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields, replace
from typing import Any

from autocomp.errors import UsageError

PAPER_SPECS = (
    "color:2,color:3,shape_color:2,shape_color:3,position:2,position:3,"
    "relative_size:2,relative_size:3"
)


K_MAX = 100  # fine-tuning: hard negatives per positive, at most


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
    whose image is missing or does not decode instead of stopping; force: replace an existing
    folder; condition: the one condition an Auto-Comp source with caption / image columns holds,
    minimal or contextual, "" = from the source's name, or only that condition of a Paired
    source)."""

    protocol: str = "paper"
    skip_missing: bool = False
    force: bool = False
    condition: str = ""


@dataclass(frozen=True)
class ExportConfig:
    """`export`: a benchmark as another harness's files (autocomp.exports). One question per
    item and candidate set in `sets` (paper protocol: every negative; a set an item lacks, such
    as the N=1 sanity sets at N>1, is skipped); `negatives`: shown negatives per question at
    most, a seeded draw as the blind choice test draws them (scoring/choice.py), None = every
    one the harness can show (VLMEvalKit's options are the letters A..Z); `seed`: that draw and
    the option order, recorded in every export; `images`: the folder a benchmark's image paths
    are under (published benchmarks embed theirs); `limit`: the first N rows; `force`: replace
    an existing output folder."""

    sets: tuple[str, ...] = ("swap", "confusion", "vary_attribute", "vary_object")
    negatives: int | None = None
    seed: int = 0
    images: str | None = None
    limit: int | None = None
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
    `part_range`: "k/K" scores only the k-th of K contiguous ranges of those parts (one pod of a
    model's data-parallel scoring, committed to a store; scoring.ranges); "" scores every part.
    `target_width` (percentage points; None: score every item): adaptive scoring, each
    (family, N, condition) cell in the order `adaptive_seed` draws, `adaptive_round` items of
    every open cell at a time, until its accuracies' confidence sequences are narrower
    (scoring/adaptive.py).
    """

    images: str | None = None
    blind: str = ""
    device: str | None = None
    max_candidates: int = 4096
    batch_size: int | None = None
    limit: int | None = None
    choice_negatives: int = 49
    choice_seed: int = 0
    part_range: str = ""
    target_width: float | None = None
    adaptive_seed: int = 0
    adaptive_round: int = 100

    def __post_init__(self) -> None:
        if isinstance(self.blind, bool):  # the flag's former type: True = caption likelihood
            object.__setattr__(self, "blind", "likelihood" if self.blind else "")


NEGATIVE_KINDS = ("swap", "confusion")  # fine-tuning's hard negatives: Swap-only or Confusion


@dataclass(frozen=True)
class FinetuneConfig:
    """`finetune`: every setting of a fine-tuning run (paper A.9; recorded in every output).
    Values are checked when the configuration is made (a profile, an override, a component)."""

    family: str = "color"  # the training partition: Color N=2 Minimal
    n: int = 2
    condition: str = "minimal"
    heldout_fraction: float = 0.2  # of source concepts, for evaluation
    validation_fraction: float = 0.1  # of the training concepts, for early stopping
    k: int = 3  # hard negatives per positive
    peak_lr: float = 1e-6
    betas: tuple[float, float] = (0.9, 0.98)
    weight_decay: float = 0.1
    warmup_steps: int = 500
    steps: int = 5000
    batch_cosine: int = 2048  # positives per step, CLIP family
    batch_sigmoid: int = 4096  # positives per step, SigLIP family
    micro_batch: int = 256  # positives encoded at once with gradients (gradient caching)
    eval_every: int = 250  # steps between validation evaluations (and checkpoints)
    patience: int = 4  # evaluations without a better validation Confusion accuracy -> stop
    seeds: tuple[int, ...] = (0, 1, 2)
    mixed_precision: bool = True  # bf16 autocast on GPU; ignored on CPU

    def __post_init__(self) -> None:
        least = {"steps": 1, "batch_cosine": 1, "batch_sigmoid": 1, "micro_batch": 1,
                 "eval_every": 1, "patience": 1, "warmup_steps": 0}  # fmt: skip
        if not 0 <= self.k <= K_MAX:  # each positive encodes k captions: a huge k is OOM
            raise UsageError("k", self.k, f"must be 0 to {K_MAX} (hard negatives per positive)")
        for name, minimum in least.items():
            value = getattr(self, name)
            if value < minimum:
                raise UsageError(name, value, f"must be {'at least 1' if minimum else '0 or more'}")
        for what in ("heldout_fraction", "validation_fraction"):
            if not 0 < getattr(self, what) < 1:
                raise UsageError(what, getattr(self, what), "must be between 0 and 1")
        if not self.seeds or any(seed < 0 for seed in self.seeds):
            raise UsageError("seeds", list(self.seeds), "must be one or more seeds, each 0 or more")

    def batch_for(self, score: str) -> int:
        """Positives per optimizer step for a model scored by `score` (cosine / sigmoid)."""
        return self.batch_sigmoid if score == "sigmoid" else self.batch_cosine

    def record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def negative_kind(kind: str) -> str:
    """A fine-tuning negatives kind (swap, confusion), or a usage error naming the known ones."""
    if kind not in NEGATIVE_KINDS:
        raise UsageError("negatives", kind, f"must be one of {', '.join(NEGATIVE_KINDS)}")
    return kind


@dataclass(frozen=True)
class Profile:
    """A whole run's configuration: one configuration per stage (fine-tuning's included), the
    models scored (`models`) and fine-tuned (`finetune_models`), and the pipeline's fan-out
    (`num_shards`: render/validate workers; each stage's own `num_shards` is what one CLI
    invocation shards into)."""

    name: str
    sample: SampleConfig
    caption: CaptionConfig
    render: RenderConfig
    validate: ValidateConfig
    curate: CurateConfig
    negatives: NegativesConfig
    score: ScoreConfig
    finetune: FinetuneConfig
    models: tuple[str, ...]
    finetune_models: tuple[str, ...]
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
        score=ScoreConfig(),
        finetune=FinetuneConfig(),
        models=("all",),
        finetune_models=("clip-vit-b-16", "siglip-b-16-224"),  # CLIP and SigLIP ViT-B/16 (A.9)
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
        score=ScoreConfig(),
        # the A.9 recipe shrunk to a few CPU steps; random weights: a larger LR so that a few
        # steps visibly move the loss
        finetune=FinetuneConfig(
            peak_lr=5e-4,
            warmup_steps=2,
            steps=8,
            batch_cosine=8,
            batch_sigmoid=8,
            micro_batch=4,
            eval_every=4,
            patience=2,
            seeds=(0,),
            mixed_precision=False,
        ),
        models=("tiny-clip", "tiny-siglip", "tiny-qwen2.5-vl"),
        finetune_models=("tiny-clip", "tiny-siglip"),
        num_shards=2,
        offline=True,
    ),
}


def get_profile(name: str) -> Profile:
    """A profile by name; an unknown name is a usage error that lists the known ones."""
    if name not in PROFILES:
        raise UsageError("profile", name, f"must be one of {', '.join(PROFILES)}")
    return PROFILES[name]


def with_overrides(config: Any, **given: Any) -> Any:
    """`config` with the given fields replaced; None means "not given" (keep the default). The
    one override helper, for every stage's configuration and for a Profile."""
    names = {f.name for f in fields(config)}
    unknown = sorted(set(given) - names)
    if unknown:
        raise TypeError(f"{type(config).__name__} has no field {unknown[0]}")
    return replace(config, **{k: v for k, v in given.items() if v is not None})
