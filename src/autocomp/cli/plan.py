"""`autocomp plan`: the capacity plan of a run (autocomp.pipelines.cluster.capacity): per step,
the engine that runs its model, pods, GPUs, expected GPU-hours with their sources, bytes read
and written, peak disk and memory, expected wall time and the compiled timeout; then the rates
and the run's total storage."""

from __future__ import annotations

import argparse
import math
from typing import Any

from autocomp.cli.table import format_table
from autocomp.errors import UsageError


def _size(value: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:,.1f} {unit}"
    return f"{value:,.0f} B" if value else "-"


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:,.1f} h" if seconds >= 360 else f"{seconds / 60:,.0f} min"


def _plan(args: argparse.Namespace) -> None:
    from autocomp.pipelines.cluster import capacity, pool

    if args.count is not None and args.count_per_cell is not None:
        raise UsageError("--count-per-cell", args.count_per_cell, "give --count or it, not both")
    for flag, value in (("--count", args.count), ("--count-per-cell", args.count_per_cell)):
        if value is not None and value < 1:
            raise UsageError(flag, value, "must be at least 1 (concepts)")
    if args.max_wall <= 0:
        raise UsageError("--max-wall", args.max_wall, "must be more than 0 (hours)")
    cards = pool.parse_pool(args.gpus or pool.PAPER_POOL)
    per_cell = args.count is None
    count = args.count if args.count is not None else args.count_per_cell
    max_wall = args.max_wall * 3600
    made = capacity.plan(args.profile, count, args.models or ["all"], per_cell, max_wall)
    found, enough = _pool_walls(made, cards, max_wall)  # bad input: one line, nothing printed
    concepts = sum(made.concepts.values())
    unit = "concepts per family:N" if per_cell else (
        "initial concepts in all (the paper's Table 22 unit: one prompt and one image each; "
        f"ours are rendered {capacity.IMAGES_PER_CONCEPT} times)")  # fmt: skip
    print(
        f"plan: profile {made.profile}, {made.count:,} {unit} -> {concepts:,} "
        f"concepts, {made.images:,} images, up to {made.rows:,} benchmark rows, "
        f"{made.captions:,} candidate captions"
    )
    for spec, total in made.capped.items():
        print(f"  {spec} holds only {total:,} distinct concepts: planned at {total:,}")
    rows: list[list[str]] = []
    sources: dict[str, str] = {}
    for s in made.steps:
        gpus = f"{s.gpus} x >={s.gpu_gb} GB" if s.gpus else "-"
        if s.gpu_hours is not None:
            mark = sources.setdefault(s.rate, f"[{len(sources) + 1}]")
            hours = f"{s.gpu_hours:,.1f} {mark}"
        else:
            hours = "-"
        sizes = [_size(v) for v in (s.read, s.written, s.disk, s.memory)]
        wall = _hours(s.wall_s) if s.wall_s else "-"
        rows.append([s.step, s.engine or "-", str(s.pods), gpus, hours, *sizes, wall,
                     _hours(s.timeout_s)])  # fmt: skip
    headers = ["step", "engine", "pods", "GPUs per pod", "GPU-hours", "read", "written",
               "peak disk", "peak memory", "wall (pod)", "timeout"]  # fmt: skip
    print()
    print(format_table(headers, rows))
    print("\nGPU-hours are A100-equivalent; disk and memory are one pod's peak; read and written "
          "are all pods'.")  # fmt: skip
    for source, mark in sources.items():
        print(f"{mark} {source}")
    measured = [(s.step, s.measured) for s in made.steps if s.measured]
    if measured:
        print("\nour measured rates (not GPU rates unless said so):")
        for step, text in measured:
            print(f"  {step}: {text}")
    print("\nstorage at the end of the run:")
    for area, size in made.storage.items():
        print(f"  {area}: {_size(size)}")
    print(f"  total: {_size(sum(made.storage.values()))}")
    _walls(made, cards, found, enough, max_wall, args.gpus is None)
    print(
        f"\nThe compiled pipelines are sized for --profile {capacity.DESIGN_PROFILE} "
        "--count-per-cell "
        f"{capacity.DESIGN_COUNT:,} --models all (capacity.DESIGN_COUNT); a larger run needs "
        "them recompiled with a larger design."
    )


TABLE22 = (  # paper Table 22 (16 x A100-80GB, 100,000 initial concepts): step, workload, hours
    ("caption", "Caption Gen (Gemma-3-12B-it)", "100,000 prompts", 0.2),
    ("render", "Image Gen (SD 3.5 Large)", "100,000 images", 8.5),
    ("validate", "Obj/BG Check + VQA (Grounded-SAM-2, Gemma)", "100,000 + ~47,000 images", 0.9),
)
PAPER_TOTAL_H = 9.6


def _pool_walls(made: Any, gpus: dict[str, int], max_wall: float) -> tuple[dict, dict | None]:
    """Each pipeline's wall on the pool, and the smallest pool of its cards that meets
    `max_wall` (None: the pool meets it). A pool without a card some step needs, or a
    `max_wall` that no pool meets, is a usage error (before anything is printed)."""
    from autocomp.pipelines.cluster import pool

    found = pool.walls(made, gpus)
    if max(w.total_s for w in pool.held(found).values()) <= max_wall:
        return found, None
    enough = pool.smallest_pool(made, gpus, max_wall)
    if enough is None:
        floors = pool.held(pool.walls(made, {c: n * 4096 for c, n in gpus.items()}))  # no end
        worst = max(floors.values(), key=lambda w: w.total_s)
        raise UsageError(
            "--max-wall", f"{max_wall / 3600:g}", f"no pool of {pool.pool_text(gpus)}'s cards "
            f"meets it: {worst.pipeline} takes {_hours(worst.total_s)} however many GPUs it "
            f"gets ({' -> '.join(worst.critical_path())}); give --max-wall "
            f"{math.ceil(worst.total_s / 3600)} or more",
        )  # fmt: skip
    return found, enough


def _walls(
    made: Any,
    gpus: dict[str, int],
    found: dict,
    enough: dict | None,
    max_wall: float,
    default: bool,
) -> None:
    """Each pipeline's wall-clock on the pool, its critical path, Table 22 beside ours, and the
    pool that meets the wall-time target."""
    from autocomp.pipelines.cluster import pool

    shown = pool.pool_text(gpus) + (" (the paper's; --gpus to give yours)" if default else "")
    print(f"\nwall-clock on {shown} (each step's pods on the GPUs that fit them):")
    for name, wall in found.items():
        print(f"  {name}: {_hours(wall.total_s)}; critical path: "
              f"{' -> '.join(wall.critical_path()) or '-'}")  # fmt: skip
    steps = found["generate_benchmark"].steps
    rows = [[task, work, f"~{hours} h", step, _workload(made, step),
             _hours(steps[step][1] - steps[step][0])]
            for step, task, work, hours in TABLE22]  # fmt: skip
    rows.append(["Total", "", f"~{PAPER_TOTAL_H} h", "generate_benchmark", "",
                 _hours(found["generate_benchmark"].total_s)])  # fmt: skip
    print("\npaper Table 22 (100,000 initial concepts, 16 x A100) beside this plan on the pool:")
    headers = ["paper step", "paper workload", "paper time", "our step", "our workload", "our time"]
    print(format_table(headers, rows))
    print("  (ours adds sample, curate, negatives and publish; caption runs in one pod)")
    slowest = max(found.values(), key=lambda w: w.total_s)
    if enough is None:
        print(f"\nevery pipeline ends within --max-wall {max_wall / 3600:g} h on this pool")
        return
    print(f"\n{slowest.pipeline} takes {_hours(slowest.total_s)}, more than --max-wall "
          f"{max_wall / 3600:g} h: the smallest pool of these cards that meets it is "
          f"{pool.pool_text(enough)}")  # fmt: skip


def _workload(made, step: str) -> str:  # noqa: ANN001
    concepts = sum(made.concepts.values())
    return {"caption": f"{concepts:,} prompts", "render": f"{made.images:,} images",
            "validate": f"{made.images:,} images"}[step]  # fmt: skip


def add_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register `autocomp plan`."""
    p = verbs.add_parser(
        "plan",
        help="the capacity plan of a run: pods, GPU-hours, bytes, disk, memory per step",
        description="Per step of the three pipelines: pods, GPU type and count, expected "
        "GPU-hours (each rate with its source), bytes read and written, peak disk and memory "
        "of one pod, its expected wall time and timeout; then the run's total storage. The "
        "compiled pipelines' resources come from the same plan.",
    )
    p.add_argument("--profile", default="paper", help="the profile (default paper)")
    p.add_argument(
        "--count",
        type=int,
        default=None,
        help="initial concepts in all, as the paper's Table 22 counts them (100,000: its run), "
        "split over the profile's family:N cells",
    )
    p.add_argument(
        "--count-per-cell",
        type=int,
        default=None,
        help="concepts per family:N instead (default: the profile's)",
    )
    p.add_argument(
        "--gpus",
        default=None,
        help="the GPU pool, NxCARD[,NxCARD...] (default 16xA100-80GB, the paper's): each "
        "pipeline's wall-clock on it",
    )
    p.add_argument(
        "--max-wall",
        type=float,
        default=24.0,
        help="hours a pipeline (and a score pod) may take (default 24): the score ranges per "
        "model, and the pool that meets it",
    )
    p.add_argument(
        "--models",
        nargs="+",
        default=None,
        help="models scored: registered names, or all (default all)",
    )
    p.set_defaults(run=_plan)
