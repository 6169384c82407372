"""The capacity plan: what every step of the three pipelines needs at a given scale, and the
one place the compiled resources' numbers come from.

`plan(profile, count, models)` gives, per step: pods, GPUs (count and the memory each must
have), expected GPU-hours with the source of every rate (paper Table 22 on A100s, our
measurements, or a labelled estimate), the bytes the step reads and writes, the peak disk and
memory of one pod, its expected wall time and the timeout it gets; and the run's total storage.
`autocomp plan` prints it. `resources(step)` / `score_resources(class)`: what the compiled
pipelines request, the plan at DESIGN (the paper profile, DESIGN_COUNT concepts per family:N,
every model); tests/pipelines/test_capacity.py compiles them and fails when any step's disk,
memory or timeout is below the plan.

The byte model: an image is at most its raw RGB size (a PNG of a photo-like image is smaller);
a candidate caption takes 7.6 bytes of zstd Parquet (measured: the paper-scale candidate table,
114 MB for 14,961,307 captions, docs/performance.md); a table row takes at most ROW_BYTES on
disk and ROW_MEMORY in Python. Every other figure is derived from the profile and the code's own
bounds (publish's parts in flight, a score step's read-ahead), named where it is used. Rows are
an upper bound: every sample survives validation when the profile keeps rejected samples, else
the paper's 47 % (Table 22's note; VQA losses are not subtracted).

Over 450 lines because it is one model of the whole run: every step's needs (and the engine
that runs its model) sit beside the rates and the byte model they share.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from autocomp.pipelines.cluster.gpus import GPU_TIERS_GB, SCORE_HOST

GB, GIB, MB, HOUR = 1e9, 2**30, 1e6, 3600.0
DESIGN_COUNT = 100_000  # concepts per family:N the compiled pipelines are sized for
DESIGN_PROFILE = "paper"

PAPER = "paper Table 22 (A100)"
SURVIVAL = 0.47  # paper Table 22: ~47 % of images pass the object/background checks
CAPTION_BYTES = 114e6 / 14_961_307  # measured, zstd Parquet (docs/performance.md)
TOKENS_PER_CAPTION = 20  # measured: Color N=3 candidates cut to 16-24 tokens (performance.md)
ROW_BYTES = 1_000  # a table row on disk (concepts, captions, render, verdicts), upper bound
ROW_MEMORY = 2_000  # a table row as a Python dict, upper bound
PROCESS = 1.5 * GB  # an interpreter with pyarrow and the model libraries imported
GPU_HOST = 64 * GB  # host memory of a generation GPU pod (weights pass through it)
TRANSFER = 100 * MB  # bytes/s one pod moves to or from the store (assumed; S3 on a cluster)
A100_FLOPS = 312e12 * 0.30  # bf16 peak at an assumed 30 % utilisation
TIMEOUT_SAFETY, TIMEOUT_FLOOR = 2.0, HOUR  # timeout: 2 x the expected wall + 1 h, at least 1 h
FINETUNE_STEP_S = 2.0  # assumed: one optimizer step of a ViT-B/16 at batch 2048-4096 + K=3
MAX_WALL = 24 * HOUR  # the wall-time target of one score pod: a model is cut into ranges to meet it
IMAGES_PER_CONCEPT = 2  # our concept is rendered twice (Minimal and Contextual)
FOOTER_READ = 64 << 10  # pyarrow's first read of a Parquet footer: at least this is read
FOOTER_BYTES = 50_000  # a published part's schema and provenance, in its footer (measured)
CHUNK_META = 100  # a column chunk's entry in the footer, about (37 columns a row group)
STATS_LIMIT = 4096  # parquet-cpp's max statistics size: a smaller image is its column's min/max
ID_BYTES = 16  # a row's id columns (sample_id, concept_id, condition), zstd Parquet, about


@dataclass(frozen=True)
class Rate:
    value: float
    unit: str
    source: str


# GPU work per unit, A100-equivalent: what Table 22 measured for 100k concepts on 16 A100s
RATES = {
    "caption": Rate(0.2 * 16 * HOUR / 100_000, "GPU-s/concept", f"{PAPER}: 100k prompts 0.2 h"),
    "render": Rate(8.5 * 16 * HOUR / 100_000, "GPU-s/image", f"{PAPER}: 100k images 8.5 h"),
    "detect": Rate(0.8 * 16 * HOUR / 100_000, "GPU-s/image", f"{PAPER}: Grounded-SAM-2 0.8 h"),
    "vqa": Rate(0.1 * 16 * HOUR / 47_000, "GPU-s/image", f"{PAPER}: VQA on ~47k images 0.1 h"),
    "negatives": Rate(1 / 461_014, "CPU-s/caption", "measured: 1 worker, docs/performance.md"),
}
# The engines of the generation steps that have one model library (the caption step's is the
# profile's `caption.engine`: vllm or transformers; generation/caption.py)
RENDER_ENGINE = "diffusers"  # generation/render.py
VALIDATE_ENGINE = "transformers"  # Grounding DINO, SAM2 and the VQA judge (generation/detection.py)
# this machine's tiny chain (benchmarks/scale_simulation.py, docs/performance.md): the rates the
# simulation's sizes were chosen from; not GPU rates
MEASURED_TINY = {
    "caption": Rate(0.5, "s/concept", "measured: tiny-llm, 8 tokens, 2 shared CPU cores"),
    "render": Rate(0.25, "s/image", "measured: tiny-sd3 32 px 1 step, 2 shared CPU cores"),
    "validate": Rate(0.15, "s/image", "measured: tiny detectors, boxes, 2 shared CPU cores"),
}


@dataclass
class Step:
    """One step's plan (bytes for one pod unless said otherwise)."""

    step: str
    pods: int
    engine: str = ""  # what runs its model (a caption engine, diffusers, a scoring backend)
    gpus: int = 0
    gpu_gb: int = 0
    gpu_hours: float | None = None
    rate: str = ""  # where the GPU-hours come from
    measured: str = ""  # our measured rate, where there is one
    read: float = 0.0  # all pods
    written: float = 0.0  # all pods
    disk: float = 0.0
    memory: float = PROCESS
    wall_s: float = 0.0  # one pod's expected work
    note: str = ""
    pod_walls: list[float] = field(default_factory=list)  # each pod's work, where pods differ

    @property
    def timeout_s(self) -> int:
        return int(max(TIMEOUT_FLOOR, TIMEOUT_SAFETY * self.wall_s + HOUR))


@dataclass
class Plan:
    profile: str
    count: int
    concepts: dict[str, int]
    capped: dict[str, int]
    images: int
    rows: int
    captions: int
    image_bytes: float
    steps: list[Step] = field(default_factory=list)
    storage: dict[str, float] = field(default_factory=dict)

    def step(self, name: str) -> Step:
        return next(s for s in self.steps if s.step == name)


def _weights(gpu_memory_gb: float) -> float:
    """Disk for a model's weights when the model cache misses: its stated GPU memory (bf16
    weights plus activations: an upper bound of the files)."""
    return gpu_memory_gb * GB


def _concepts(profile: Any, count: int, per_cell: bool) -> tuple[dict[str, int], dict[str, int]]:
    """Concepts per family:N: `count` each (`per_cell`), or `count` of the paper's initial
    concepts in all (Table 22: one prompt and one image each, so count / IMAGES_PER_CONCEPT of
    ours) split over the profile's cells as evenly as they allow (_split)."""
    from autocomp.protocol.concepts import count_concepts
    from autocomp.protocol.family import load_family
    from autocomp.protocol.stages import parse_specs

    cells = {f"{name}:{n}": count_concepts(load_family(name), n)
             for name, n in parse_specs(profile.sample.specs)}  # fmt: skip
    if per_cell:
        return ({c: min(count, most) for c, most in cells.items()},
                {c: most for c, most in cells.items() if count > most})  # fmt: skip
    planned, capped = _split(math.ceil(count / IMAGES_PER_CONCEPT), cells), {}
    for cell, most in cells.items():
        if planned[cell] == most:
            capped[cell] = most
    return planned, capped


def _split(total: int, cells: dict[str, int]) -> dict[str, int]:
    """`total` concepts over `cells` (cell -> its distinct concepts) as evenly as they allow,
    smallest cells first: a cell holding fewer than its share gives what it lacks to the rest."""
    planned, left = {}, total
    for i, (cell, most) in enumerate(sorted(cells.items(), key=lambda kv: kv[1])):
        planned[cell] = min(most, left // (len(cells) - i))
        left -= planned[cell]
    return {cell: planned[cell] for cell in cells}


@functools.lru_cache(maxsize=64)
def _candidates(spec: str) -> int:
    """Candidates per benchmark row (the positive and its Confusion set; Swap is inside it)."""
    from autocomp.protocol.family import load_family
    from autocomp.protocol.negatives import expected_counts

    name, n = spec.split(":")
    relation = load_family(name).kind == "relation"
    return 1 + expected_counts(relation, int(n))[1]


def _image_bytes(profile: Any) -> float:
    from autocomp.generation.registry import get_generation_model

    settings = {**get_generation_model("renderer", profile.render.renderer).settings,
                **profile.render.settings}  # fmt: skip
    return settings.get("height", 1024) * settings.get("width", 1024) * 3 + 4_096


def plan(
    profile_name: str = DESIGN_PROFILE,
    count: int | None = None,
    models: Any = ("all",),
    per_cell: bool = True,
    max_wall: float = MAX_WALL,
    specs: str | None = None,
) -> Plan:
    """The plan of a run of `profile_name` at `count` concepts per family:N (default: the
    profile's; not `per_cell`: `count` of the paper's initial concepts in all) scoring `models`
    (names, or ["all"]), each model cut into the part ranges that bring a score pod under
    `max_wall` seconds; `specs`: the run's family:N pairs, when not the profile's."""
    import dataclasses

    from autocomp.config import get_profile

    profile = get_profile(profile_name)
    if specs:
        profile = dataclasses.replace(
            profile, sample=dataclasses.replace(profile.sample, specs=specs)
        )
    per_cell = per_cell or count is None
    count = count or profile.sample.count
    concepts, capped = _concepts(profile, count, per_cell)
    survival = 1.0 if profile.curate.keep_rejected else SURVIVAL
    images = 2 * sum(concepts.values())
    rows = math.ceil(images * survival)
    captions = math.ceil(sum(2 * c * survival * _candidates(s) for s, c in concepts.items()))
    made = Plan(
        profile.name, count, concepts, capped, images, rows, captions, _image_bytes(profile)
    )
    _generation(made, profile)
    _evaluation(made, profile, models, max_wall)
    _finetune(made, profile)
    table = captions * CAPTION_BYTES
    made.storage = {
        "work/render (images, shard tables)": images * (made.image_bytes + ROW_BYTES),
        "work/validate (verdicts)": images * 4 * ROW_BYTES,
        "work/tables (candidate table)": table,
        "benchmarks (published: images embedded)": rows * made.image_bytes + table,
        "results (every model's run)": sum(
            s.written for s in made.steps if s.step.startswith("score-")
        ),  # fmt: skip
    }
    return made


def _generation(made: Plan, profile: Any) -> None:
    from autocomp.generation.registry import get_generation_model
    from autocomp.scoring.registry import get_model

    c, i, k = sum(made.concepts.values()), made.images, profile.num_shards
    img, table = made.image_bytes, made.captions * CAPTION_BYTES
    captioner = get_generation_model("captioner", profile.caption.captioner).gpu_memory_gb
    renderer = get_generation_model("renderer", profile.render.renderer).gpu_memory_gb
    checks = [get_generation_model("detector", profile.validate.detector).gpu_memory_gb,
              get_generation_model("segmenter", profile.validate.segmenter).gpu_memory_gb,
              get_model(profile.validate.vqa).gpu_memory_gb]  # fmt: skip
    per_check = RATES["detect"].value + SURVIVAL * RATES["vqa"].value
    made.steps += [
        Step("sample", 1, written=c * ROW_BYTES, memory=PROCESS + c * ROW_MEMORY,
             note="the concept table in memory"),
        Step("caption", 1, engine=profile.caption.engine, gpus=1, gpu_gb=_tier(captioner),
             gpu_hours=c * RATES["caption"].value / HOUR, rate=RATES["caption"].source,
             measured=_measured(MEASURED_TINY["caption"]), read=c * ROW_BYTES,
             written=4 * c * ROW_BYTES, disk=_weights(captioner) + 4 * c * ROW_BYTES,
             memory=GPU_HOST + 4 * c * ROW_MEMORY, wall_s=c * RATES["caption"].value,
             note="one pod captions every concept (its tables and attempts in memory)"),
        Step("shard_plan", 1, read=c * ROW_BYTES, note="keys the run's work: reads the captions"),
        Step("render", k, engine=RENDER_ENGINE, gpus=1, gpu_gb=_tier(renderer),
             gpu_hours=i * RATES["render"].value / HOUR, rate=RATES["render"].source,
             measured=_measured(MEASURED_TINY["render"]), read=k * c * ROW_BYTES,
             written=i * (img + ROW_BYTES), disk=_weights(renderer) + i / k * ROW_BYTES,
             memory=GPU_HOST + i * ROW_MEMORY + profile.render.batch_size * 3 * img,
             wall_s=i / k * RATES["render"].value,
             note="images to the store as they are made; every pod lists all samples"),
        Step("validate", k, engine=VALIDATE_ENGINE, gpus=1, gpu_gb=_tier(max(checks)),
             gpu_hours=i * per_check / HOUR,
             rate=f"{RATES['detect'].source}; {RATES['vqa'].source}",
             measured=_measured(MEASURED_TINY["validate"]), read=i * (img + ROW_BYTES),
             written=i * 4 * ROW_BYTES, disk=sum(map(_weights, checks)) + i / k * 5 * ROW_BYTES,
             memory=GPU_HOST + i / k * ROW_MEMORY + profile.validate.batch_size * 4 * img,
             wall_s=i / k * per_check,
             note="reads only its shard's images; verdicts committed every 16 batches"),
        Step("curate", 1, read=i * 5 * ROW_BYTES + c * ROW_BYTES, written=made.rows * ROW_BYTES,
             disk=i * 5 * ROW_BYTES + made.rows * ROW_BYTES,
             memory=PROCESS + i * 5 * ROW_MEMORY + c * ROW_MEMORY,
             note="every shard's render and verdict tables in memory"),
        Step("negatives", 1, read=made.rows * ROW_BYTES, written=table,
             disk=made.rows * ROW_BYTES + table, memory=PROCESS + 0.5 * GB,
             wall_s=made.captions * RATES["negatives"].value,
             measured=_measured(RATES["negatives"]),
             note="streams batches; its table is written here, then to the store"),
        Step("publish", 1, read=made.rows * img + table, written=made.rows * img + table,
             disk=_publish_parts(made), memory=PROCESS + 4 * 16 * 2 * img + made.rows * 100,
             wall_s=2 * (made.rows * img + table) / TRANSFER,
             note="store to store: parts uploaded as they are written"),
    ]  # fmt: skip


def _publish_parts(made: Plan) -> float:
    """Parts publish holds on disk: the one being written and the writer's slots (2 per
    upload)."""
    from autocomp.store.publish import ROWS_PER_SHARD, UPLOADS

    per_row = made.image_bytes + made.captions / max(1, made.rows) * CAPTION_BYTES
    return (1 + 2 * UPLOADS) * ROWS_PER_SHARD * per_row


def _stream_memory(made: Plan) -> float:
    """What a step streaming the benchmark from the store holds: the read-ahead (2 batches)
    and the batch being used, STREAM_ROWS rows each (images encoded and decoded), the range
    reader's block, and the done-set of a resumed run (one id per row)."""
    from autocomp.store.catalog.benchmarks import STREAM_ROWS
    from autocomp.store.transfer import READ_AHEAD

    return 3 * STREAM_ROWS * 2 * made.image_bytes + READ_AHEAD + made.rows * 64


def _score_gpu_hours(made: Plan, gpu_memory_gb: float) -> float:
    """Estimate: 2 x parameters x tokens FLOPs per candidate caption at A100_FLOPS, the
    parameters bounded by the model's stated memory (bf16: 2 bytes each)."""
    params = gpu_memory_gb * GB / 2
    return made.captions * 2 * params * TOKENS_PER_CAPTION / A100_FLOPS / HOUR


SCORE_RATE = ("estimate: 2 x params x 20 tokens per caption at 30 % of an A100 (not measured: "
              "no GPU was lent; benchmarks/gpu.sh measures it)")  # fmt: skip
PREDICTION_BYTES = 8 * 150  # one item's predictions (sets x protocols x score types), on disk


def footer_bytes(rows: int, image_bytes: float, columns: int = 37) -> float:
    """A published part's footer: schema and provenance, each column chunk's entry, and the
    images' min/max statistics when an image is under parquet-cpp's statistics limit (178 KB
    for 200 rows of 32 px images, measured; about 90 KB at 1024 px)."""
    from autocomp.store.publish import ROWS_PER_GROUP

    groups = math.ceil(rows / ROWS_PER_GROUP)
    stats = 2 * image_bytes if image_bytes < STATS_LIMIT else 0
    return max(FOOTER_READ, FOOTER_BYTES + groups * (columns * CHUNK_META + stats))


def score_read(
    benchmark: float, parts: int, rows: int, counted: float, ranges: int, footer: float
) -> float:
    """Bytes the score pods of one model read from the store between them, the model cut into
    `ranges` ranges: each part of the benchmark verified (read whole) then streamed by the pod
    that scores its rows (2 x the benchmark); each pod glances at every part first (its footer
    and id columns: the duplicate check; in ranges, the candidate lists too: the part plan); a
    part two ranges share is verified by both and streamed past the first range's end (to the
    part's end, half a part on average, or one read-ahead block). tests/scoring/
    test_range_reads.py holds it against the bytes counted with 1 and 4 ranges."""
    from autocomp.store.transfer import READ_AHEAD

    part = benchmark / max(1, parts)
    glance = parts * footer + rows * ID_BYTES + (counted if ranges > 1 else 0)
    shared = (ranges - 1) * (part + min(part / 2, READ_AHEAD))
    return 2 * benchmark + ranges * glance + shared


def ranges_for(wall_s: float, max_wall: float = MAX_WALL) -> int:
    """The fewest part ranges (score pods) that bring each pod of a `wall_s` model under it."""
    return max(1, math.ceil(wall_s / max_wall))


def _evaluation(made: Plan, profile: Any, models: Any, max_wall: float = MAX_WALL) -> None:
    from autocomp.pipelines.cluster.plan import in_all, score_groups, select
    from autocomp.scoring.registry import get_model
    from autocomp.store.publish import ROWS_PER_SHARD

    groups = score_groups()
    everything, _ = in_all()
    known = [m for members in groups.values() for m in members]
    chosen = select(list(models), known, everything, known)
    benchmark = made.rows * made.image_bytes + made.captions * CAPTION_BYTES
    run = made.captions * 40 + made.rows * PREDICTION_BYTES  # one model's scores, predictions
    counted = made.captions * CAPTION_BYTES  # the candidate lists every range pod reads
    parts = math.ceil(made.rows / ROWS_PER_SHARD)  # the published benchmark's Parquet parts
    footer = footer_bytes(ROWS_PER_SHARD, made.image_bytes)
    for score, members in groups.items():
        mine = [m for m in members if m in chosen]
        if not mine:
            continue
        hours = [_score_gpu_hours(made, get_model(m).gpu_memory_gb) for m in mine]
        walls = [h * HOUR / max(1, score.gpus) for h in hours]  # one pod scoring a model
        ranges = [ranges_for(w, max_wall) for w in walls]
        part = 2 * profile.score.max_candidates * 200  # one part's scores and predictions
        made.steps.append(Step(
            f"score-{score.name}", sum(ranges), engine=backends_of(mine),
            gpus=score.gpus, gpu_gb=score.gpu_gb,
            gpu_hours=sum(hours), rate=SCORE_RATE,
            read=sum(score_read(benchmark, parts, made.rows, counted, k, footer) for k in ranges),
            written=len(mine) * run,
            disk=_weights(max(get_model(m).gpu_memory_gb for m in mine)) + part,
            memory=score_host(score) + _stream_memory(made),
            wall_s=max(w / k for w, k in zip(walls, ranges)),
            pod_walls=[w / k for w, k in zip(walls, ranges) for _ in range(k)],
            note=f"{', '.join(mine[:2])}{' ...' if len(mine) > 2 else ''}: "
            f"{max(ranges)} range(s) a model at most; each pod streams its range, commits "
            "each part",
        ))  # fmt: skip
    predictions = len(chosen) * made.rows * PREDICTION_BYTES
    table = made.captions * CAPTION_BYTES
    made.steps += [
        Step("select_models", 1),
        Step("collect_scores", 1, read=len(chosen) * 10_000 + predictions + len(chosen) * counted,
             note="merges each ranged model: its candidate lists (the part plan) and predictions "
             "(the summary), one part at a time; the parts are copied inside the store"),
        Step("report", 1, read=table + predictions, disk=table + predictions,
             memory=PROCESS + 2 * predictions + made.rows * ROW_MEMORY,
             note="the benchmark's table (no images) and every run's predictions"),
    ]  # fmt: skip


def score_host(score: Any) -> float:
    """Host memory of a score pod: a share of its GPU memory (weights pass through it), at
    least 16 GB (gpus.SCORE_HOST)."""
    share = SCORE_HOST["memory_per_gpu_memory"] * score.gpus * score.gpu_gb
    return max(SCORE_HOST["memory_gb_min"], share) * GB


def _finetune(made: Plan, profile: Any) -> None:
    from autocomp.scoring.registry import get_model

    config = profile.finetune
    spec = f"{config.family}:{config.n}"
    source = made.concepts.get(spec, 0) * (1.0 if profile.curate.keep_rejected else SURVIVAL)
    kept = source * (1 - config.heldout_fraction)  # train and validation rows, in memory
    runs = len(profile.finetune_models) * 2 * len(config.seeds)
    base = max((get_model(m).gpu_memory_gb for m in profile.finetune_models), default=1)
    benchmark = made.rows * made.image_bytes + made.captions * CAPTION_BYTES
    state = 4 * _weights(base)  # weights, the optimizer's moments, the best weights
    scored = runs + len(profile.finetune_models)
    predictions = scored * made.rows * PREDICTION_BYTES
    tuned = backends_of(profile.finetune_models)
    made.steps += [
        Step("finetune_split", 1, read=benchmark, written=benchmark, disk=_publish_parts(made),
             memory=PROCESS + _stream_memory(made) + made.rows * 100,
             wall_s=2 * benchmark / TRANSFER, note="the evaluation benchmark, store to store"),
        Step("finetune_plan", 1),
        Step("finetune_train", runs, engine=tuned, gpus=1, gpu_gb=_tier(base),
             gpu_hours=runs * config.steps * FINETUNE_STEP_S / HOUR,
             rate=f"estimate: {FINETUNE_STEP_S:.0f} s per optimizer step (not measured)",
             read=runs * benchmark, written=runs * 2 * state, disk=_weights(base) + 2 * state,
             memory=GPU_HOST + kept * made.image_bytes + _stream_memory(made),
             wall_s=config.steps * FINETUNE_STEP_S,
             note="the training partition's rows (images encoded) in memory; its state "
             "committed at every evaluation"),
        Step("finetune_score", scored, engine=tuned, gpus=1, gpu_gb=_tier(base),
             gpu_hours=scored * _score_gpu_hours(made, base), rate=SCORE_RATE,
             read=scored * benchmark, written=predictions, disk=_weights(base) + 1 * GB,
             memory=GPU_HOST + _stream_memory(made),
             wall_s=_score_gpu_hours(made, base) * HOUR, note="streams the evaluation benchmark"),
        Step("finetune_report", 1, read=predictions, disk=predictions + made.rows * ROW_BYTES,
             memory=PROCESS + 2 * predictions + made.rows * ROW_MEMORY),
    ]  # fmt: skip


def backends_of(models: Any) -> str:
    """What runs these models, as a step's engine: the engine each registry entry names
    (`engine:`), else its backend's default engine, else (a backend of one engine) the backend."""
    from autocomp.scoring.registry import get_model

    entries = [get_model(m) for m in models]
    return ", ".join(sorted({e.engine or e.kind.default_engine or e.backend for e in entries}))


def _tier(gpu_memory_gb: float) -> int:
    return next((t for t in GPU_TIERS_GB if t >= gpu_memory_gb), GPU_TIERS_GB[-1])


def _measured(rate: Rate) -> str:
    return f"{rate.value:g} {rate.unit} ({rate.source})"


# ----------------------------------------------------------------------------- compiled sizes


def _giB(value: float) -> str:
    return f"{max(1, math.ceil(value / GIB))}Gi"


def _gB(value: float) -> str:
    return f"{max(1, math.ceil(value / GB))}G"


_DESIGN: list[Plan] = []


def design() -> Plan:
    """The plan the compiled pipelines are sized for (computed once per process)."""
    if not _DESIGN:
        _DESIGN.append(plan(DESIGN_PROFILE, DESIGN_COUNT, ("all",)))
    return _DESIGN[0]


def resources(step: str) -> dict[str, Any]:
    """The memory, scratch disk and timeout a step is compiled with (the plan at DESIGN,
    rounded up); {} for a step the plan does not size."""
    found = [s for s in design().steps if s.step == step]
    if not found:
        return {}
    s = found[0]
    sized: dict[str, Any] = {"memory": _gB(max(s.memory, 1 * GB)), "timeout": s.timeout_s}
    if s.disk >= 1 * GB:
        sized["disk"] = _giB(s.disk)
    return sized


def score_resources(score: Any) -> dict[str, Any]:
    """A score class's memory, scratch disk and timeout at DESIGN; classes no model of DESIGN
    uses get the plan of a model filling the class."""
    name = f"score-{score.name}"
    found = [s for s in design().steps if s.step == name]
    if found:
        s = found[0]
        return {"memory": _gB(s.memory), "disk": _giB(s.disk), "timeout": s.timeout_s}
    made = design()
    hours = _score_gpu_hours(made, score.gpus * score.gpu_gb)
    return {"memory": _gB(score_host(score) + _stream_memory(made)),
            "disk": _giB(_weights(score.gpus * score.gpu_gb) + 1 * GB),
            "timeout": int(max(TIMEOUT_FLOOR, TIMEOUT_SAFETY * hours * HOUR / max(1, score.gpus)
                               + HOUR))}  # fmt: skip
