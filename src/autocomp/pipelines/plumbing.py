"""The one table between a profile (autocomp.config) and the three pipelines: every pipeline
parameter, the profile field its default comes from, and the configuration fields it sets.

Everything else is derived from PARAMETERS:
- the pipelines' signatures (`signature`: names, types, the `paper` profile's defaults, the
  help each input shows in the KFP UI), built in autocomp.pipelines.definitions.build;
- a profile's arguments (`arguments`: the compiled defaults are the paper profile's, the local
  run passes the tiny one's);
- the inputs of each component call (`inputs(stage, params)`: the stage's configuration fields,
  under their field names);
- the configuration a component rebuilds inside its image from its own inputs, named one by
  one: `rebuild("render", renderer=renderer, seed=seed, ...)` (refused unless the names are
  exactly the stage's fed fields);
- the configurations one run makes (`configs`), which autocomp.pipelines.checks checks with
  each stage's own rule before `run`, `submit` or `schedule` start anything.

A configuration field no parameter sets is in LOCAL_ONLY, with the reason;
tests/pipelines/test_plumbing.py fails on a field in neither. Renames are explicit: a
parameter's name differs from its field's only where two stages share a field name
(`caption_engine` -> caption.engine, `render_batch_size` -> render.batch_size, ...). One
parameter may set several fields (`seed`: sample, caption and render seeds); `num_shards` is the
pipeline's fan-out and sets the render and validate shard counts.

KFP parameters have no null: a field that may be None travels as a stand-in value (`none`:
caption_fallback "" = no fallback, limit 0 = every item, batch_size 0 = the backend's own).

No kfp here: the components import this module inside the images, and the CLI checks with it
before kfp is imported.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autocomp.config import NEGATIVE_KINDS, PROFILES, Profile
from autocomp.errors import UsageError

DISPLAY_NAMES = {  # each pipeline's name in KFP (its compiled pipelineInfo.name)
    "generate_benchmark": "autocomp-generate-benchmark",
    "evaluate_models": "autocomp-evaluate-models",
    "finetune_models": "autocomp-finetune-models",
    "generate_and_evaluate": "autocomp-generate-and-evaluate",
}
PIPELINES = tuple(DISPLAY_NAMES)
# a pipeline that nests others, each run on what the one before published (the recurring
# whole loop: docs/cluster.md "Recurring runs"): its parameters are theirs, the later ones'
# `name` being the earlier one's output
CHAINED: dict[str, tuple[str, ...]] = {
    "generate_and_evaluate": ("generate_benchmark", "evaluate_models"),
}
CHAIN_FED = ("name",)  # the parameters a later pipeline of a chain takes from the one before
# the pipelines' store default: KFP's own bucket, under the prefix every profile may write
# (multi-user KFP 2.15+ limits a profile's keys to mlpipeline/.../<ns> and shared/; docs/cluster.md)
DEFAULT_STORE = "s3://mlpipeline/shared/autocomp"
ALL = "all"  # the models parameter that means every model [all] stands for (cluster.plan)


class Required:
    """The default of a parameter that has none (the run must give it)."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = Required()
NOT_NULL = object()  # a field that is never None


@dataclass(frozen=True)
class Parameter:
    """One pipeline parameter.

    source: the profile field its default comes from (`sample.seed`, or a Profile field such as
            `models`); "" for a run-level parameter (`name`, `store`, ...), whose `default` is
            given here.
    feeds:  the configuration fields (`stage.field`) it sets in the components.
    none:   the value that stands for None in a pipeline (KFP parameters have no null).
    """

    name: str
    help: str
    source: str = ""
    feeds: tuple[str, ...] = ()
    default: Any = REQUIRED
    none: Any = NOT_NULL


def _field(name: str, source: str, help: str, *also: str, none: Any = NOT_NULL) -> Parameter:
    """A parameter whose default is the profile's `source` field. It sets that field when it is
    a stage's (`render.renderer`), and the fields in `also`."""
    feeds = (source, *also) if "." in source else also
    return Parameter(name, help, source, feeds, none=none)


def _run(name: str, help: str, default: Any = REQUIRED) -> Parameter:
    return Parameter(name, help, default=default)


_NAME = "the benchmark's name in the store"
_STORE = "the store: a folder, or s3://bucket/prefix (credentials from the autocomp-s3 Secret)"
_FINETUNE_FIELDS = tuple(
    _field(f.name, f"finetune.{f.name}", f"fine-tuning setting {f.name} (paper A.9)")
    for f in dataclasses.fields(PROFILES["paper"].finetune)
    if f.name != "seeds"
)

PARAMETERS: dict[str, tuple[Parameter, ...]] = {
    "generate_benchmark": (
        _run("name", f"{_NAME}; a run publishes under <name>-<first 8 hex of its run id>"),
        _run("store", _STORE, DEFAULT_STORE),
        _field("specs", "sample.specs", "family:N pairs to sample, comma-separated"),
        _field("count", "sample.count", "concepts per family:N"),
        _field(
            "seed",
            "sample.seed",
            "the run's seed (sample, captions, renders)",
            "caption.seed",
            "render.seed",
        ),  # fmt: skip
        _run(
            "reuse_concepts", "a published benchmark whose concept set to reuse (empty: sample)", ""
        ),  # fmt: skip
        _field("captioner", "caption.captioner", "the LLM that writes Contextual captions"),
        _field("caption_engine", "caption.engine", "the captioner's engine: vllm or transformers"),
        _field("caption_settings", "caption.settings", "captioner settings (key: value)"),
        _field(
            "caption_fallback",
            "caption.fallback",
            "minimal: a concept whose captions fail every try keeps its Minimal caption "
            "(marked); empty: it is dropped",
            none="",
        ),  # fmt: skip
        _field("caption_batch_size", "caption.batch_size", "concepts per captioning batch"),
        _field("renderer", "render.renderer", "the text-to-image model"),
        _field("render_settings", "render.settings", "renderer settings (key: value)"),
        _field("render_batch_size", "render.batch_size", "images per render batch"),
        _field("detector", "validate.detector", "the open-vocabulary detector"),
        _field("segmenter", "validate.segmenter", "the segmenter (masks=sam2)"),
        _field("vqa", "validate.vqa", "the VQA judge (a generative model)"),
        _field(
            "validate_settings",
            "validate.settings",
            "detector/segmenter settings ({detector: {...}, segmenter: {...}})",
        ),  # fmt: skip
        _field("validate_batch_size", "validate.batch_size", "images per validate batch"),
        _field("masks", "validate.masks", "sam2 (segment each box) or boxes"),
        _field("all_checks", "validate.all_checks", "run every check on every sample"),
        _field("keep_rejected", "curate.keep_rejected", "keep rejected samples (marked)"),
        _field("protocol", "negatives.protocol", "paper or strict (drop same-scene candidates)"),
        _field("negatives_batch_size", "negatives.batch_size", "rows per candidate-set batch"),
        _field(
            "num_shards",
            "num_shards",
            "render/validate workers (one GPU pod each)",
            "render.num_shards",
            "validate.num_shards",
        ),  # fmt: skip
        _run("unique_name", "publish under <name>-<run id> (false: under name as given)", True),
        _run(
            "draw",
            "empty: the seed as given; else folded into the sample, caption and render seeds (a "
            "recurring run's is its run id: a new draw each run)",
            "",
        ),  # fmt: skip
    ),
    "evaluate_models": (
        _run("name", f"{_NAME} (a generate run's <name>-<run id>)"),
        _run("store", _STORE, DEFAULT_STORE),
        _field("models", "models", "models to score: registered names, or [all]"),
        _field(
            "blind",
            "score.blind",
            "empty: with the image; likelihood or choice: the A.8 blind tests "
            "(generative models only)",
        ),  # fmt: skip
        _field("choice_negatives", "score.choice_negatives", "negatives per blind-choice item"),
        _field("choice_seed", "score.choice_seed", "seed of the blind-choice options"),
        _field("limit", "score.limit", "score the first N items (0: every item)", none=0),
        _field(
            "batch_size",
            "score.batch_size",
            "candidate texts per forward pass (0: the backend's own)",
            none=0,
        ),  # fmt: skip
        _field("max_candidates", "score.max_candidates", "candidates per written part"),
        _run(
            "score_ranges",
            "score pods per model, each a contiguous range of its parts (0: the capacity plan's, "
            "from the wall-time target)",
            0,
        ),  # fmt: skip
        _run("report_seed", "the report's bootstrap seed", 0),
    ),
    "finetune_models": (
        _run("name", f"{_NAME} (a generate run's <name>-<run id>)"),
        _run("store", _STORE, DEFAULT_STORE),
        _field("models", "finetune_models", "contrastive (open_clip) models to fine-tune"),
        _run(
            "negatives", "hard-negative kinds to train with: swap, confusion", list(NEGATIVE_KINDS)
        ),  # fmt: skip
        _field("seeds", "finetune.seeds", "training seeds (one run per model x kind x seed)"),
        *_FINETUNE_FIELDS,
        _run("split_seed", "seed of the concept split", 0),
        _run("report_seed", "the report's bootstrap seed", 0),
    ),
}

PARAMETERS["generate_and_evaluate"] = (
    *PARAMETERS["generate_benchmark"],
    *(p for p in PARAMETERS["evaluate_models"] if p.name not in ("store", *CHAIN_FED)),
)


def parts(pipeline: str) -> tuple[str, ...]:
    """The pipelines one run of `pipeline` runs: those it nests (CHAINED), or itself."""
    return CHAINED.get(pipeline, (pipeline,))


LOCAL_ONLY: dict[str, str] = {  # `stage.field` (or `profile.field`): why no parameter sets it
    "caption.num_shards": "the pipeline captions in one task (vLLM batches the whole set); "
    "shards split `autocomp caption` over workers",
    "caption.device": "a pod uses the GPU it is given",
    "render.device": "a pod uses the GPU it is given",
    "validate.device": "a pod uses the GPU it is given",
    "negatives.workers": "the step builds its candidate sets in process (workers=1) on the CPUs "
    "resources.py gives it",
    "negatives.force": "a step writes a new output artifact; nothing to replace",
    "score.images": "a published benchmark embeds its images",
    "score.device": "a pod uses the GPUs it is given",
    "score.part_range": "each score pod's range is its loop item (select_models: the plan's "
    "ranges per model, or score_ranges)",
    "score.target_width": "adaptive scoring runs into run folders (`autocomp score`); the "
    "pipelines' score steps commit every part to the store and score every item",
    "score.adaptive_seed": "adaptive scoring only (see score.target_width)",
    "score.adaptive_round": "adaptive scoring only (see score.target_width)",
    "profile.name": "the parameters carry the profile's values, not its name",
    "profile.offline": "a local-run setting (HF_HUB_OFFLINE); a cluster fills its model cache",
}


def stages() -> dict[str, type]:
    """Profile field -> its configuration class, for the stage configurations of a Profile."""
    hints = typing.get_type_hints(Profile)
    return {f.name: hints[f.name] for f in dataclasses.fields(Profile)
            if dataclasses.is_dataclass(hints[f.name])}  # fmt: skip


def unplumbed(local_only: Mapping[str, str] | None = None) -> list[str]:
    """Profile fields that no parameter sets and `local_only` (default LOCAL_ONLY) does not
    list: a stage field as `stage.field`, a Profile field as `profile.field`. Empty when
    every field reaches the pipelines or says why not (tests/pipelines/test_plumbing.py)."""
    local_only = LOCAL_ONLY if local_only is None else local_only
    reached = {path for pipeline in PARAMETERS.values() for p in pipeline for path in p.feeds}
    sources = {p.source for pipeline in PARAMETERS.values() for p in pipeline}
    missing = []
    for field in dataclasses.fields(Profile):
        if field.name in stages():
            for inner in dataclasses.fields(stages()[field.name]):
                path = f"{field.name}.{inner.name}"
                if path not in reached and path not in local_only:
                    missing.append(path)
        elif field.name not in sources and f"profile.{field.name}" not in local_only:
            missing.append(f"profile.{field.name}")
    return missing


def parameters(pipeline: str) -> tuple[Parameter, ...]:
    if pipeline not in PARAMETERS:
        raise UsageError("pipeline", pipeline, f"must be one of {', '.join(PARAMETERS)}")
    return PARAMETERS[pipeline]


def _profile_value(profile: Profile, path: str) -> Any:
    value: Any = profile
    for part in path.split("."):
        value = getattr(value, part)
    return value


def field_type(path: str) -> Any:
    """The declared type of a profile field (`render.batch_size`, `models`)."""
    stage, _, name = path.rpartition(".")
    owner = stages()[stage] if stage else Profile
    return typing.get_type_hints(owner)[name]


def _optional(kind: Any) -> bool:
    return type(None) in typing.get_args(kind)


def kfp_type(parameter: Parameter) -> type:
    """The parameter's type in the pipeline signature (what KFP's compiler accepts)."""
    if not parameter.source:
        default = parameter.default
        return str if isinstance(default, Required) else type(default)
    kind = field_type(parameter.source)
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    base = typing.get_origin(kind) or kind
    if _optional(kind):
        base = typing.get_origin(args[0]) or args[0]
    if base in (tuple, list):
        return list
    if base is dict:
        return dict
    return base


def encode(parameter: Parameter, value: Any) -> Any:
    """A profile value as the pipeline parameter's value."""
    if value is None:
        if parameter.none is NOT_NULL:
            raise ValueError(f"{parameter.name}: the profile holds None and it has no stand-in")
        return parameter.none
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def arguments(pipeline: str, profile: Profile) -> dict[str, Any]:
    """The pipeline's parameters that come from a profile, with the profile's values (the
    compiled defaults are `arguments(pipeline, PROFILES["paper"])`). A parameter that sets
    several fields of the profile needs them to agree (one seed for the whole run), except the
    fan-out `num_shards`, which replaces each stage's own shard count."""
    found = {}
    for parameter in parameters(pipeline):
        if not parameter.source:
            continue
        value = _profile_value(profile, parameter.source)
        if parameter.source in parameter.feeds:
            for other in parameter.feeds:
                if _profile_value(profile, other) != value:
                    raise ValueError(
                        f"profile {profile.name}: {other} differs from {parameter.source}; the "
                        f"pipelines set both from one parameter, {parameter.name}"
                    )
        found[parameter.name] = encode(parameter, value)
    return found


def defaults(pipeline: str, profile: Profile = PROFILES["paper"]) -> dict[str, Any]:
    """Every parameter's default (REQUIRED where it has none): the profile's or the run-level."""
    given = arguments(pipeline, profile)
    return {p.name: given.get(p.name, p.default) for p in parameters(pipeline)}


def fed(stage: str) -> dict[str, Parameter]:
    """The fields of one stage's configuration that parameters set: field -> its parameter
    (of whichever pipeline has the stage)."""
    found = {}
    for pipeline in PARAMETERS.values():
        for parameter in pipeline:
            for path in parameter.feeds:
                owner, _, name = path.partition(".")
                if owner == stage:
                    found[name] = parameter
    return found


def inputs(stage: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration inputs of a stage's component call: field name -> the pipeline's
    parameter (`params`: the pipeline's parameters, by name)."""
    return {name: params[parameter.name] for name, parameter in fed(stage).items()}


def values(stage: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration fields of `stage` from a component's inputs `given` (field -> value):
    the stage's fed fields, with stand-ins back to None, lists back to tuples and dict numbers
    back to whole numbers. Every fed field must be given (a KeyError is a component that misses
    one: a bug)."""
    hints = typing.get_type_hints(stages()[stage])
    found = {}
    for name, parameter in fed(stage).items():
        value = given[name]
        if parameter.none is not NOT_NULL and value == parameter.none:
            value = None
        elif isinstance(value, list) and (typing.get_origin(hints[name]) or hints[name]) is tuple:
            value = tuple(value)
        elif isinstance(value, dict):
            value = _whole_numbers(value)
        found[name] = value
    return found


def rebuild(stage: str, **fields: Any) -> Any:
    """The configuration a component makes from its inputs, each named by its field:
    `rebuild("score", blind=blind, limit=limit, ...)` is the ScoreConfig the run's parameters
    mean. The names must be exactly the stage's fed fields (`fed(stage)`): a component that
    misses one or passes another is refused here, and tests/pipelines/test_plumbing.py checks
    each component's call against its signature."""
    expected = set(fed(stage))
    if set(fields) != expected:
        missing, extra = sorted(expected - set(fields)), sorted(set(fields) - expected)
        raise TypeError(f"rebuild({stage!r}): missing {missing}, not its fields {extra}")
    return stages()[stage](**values(stage, fields))


def _whole_numbers(value: Any) -> Any:
    """A dict parameter as it was given: KFP carries dicts as protobuf Structs, whose numbers
    are all doubles, so a setting given as 32 arrives as 32.0 (and an integer setting would
    then be refused, or reach a model as a float); integral floats become ints again."""
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def configured(pipeline: str) -> list[str]:
    """The stages whose configuration `pipeline`'s parameters set, in the Profile's order."""
    touched = {path.partition(".")[0] for p in parameters(pipeline) for path in p.feeds}
    return [stage for stage in stages() if stage in touched]


def stage_config(stage: str, given: Mapping[str, Any]) -> Any:
    """The configuration of `stage` a component makes from the pipeline's parameters `given`."""
    return stages()[stage](**values(stage, inputs(stage, given)))


def configs(pipeline: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The stage configurations one run of `pipeline` would make from its parameters, as its
    components make them (stage -> the configuration `rebuild` makes)."""
    return {stage: stage_config(stage, given) for stage in configured(pipeline)}
