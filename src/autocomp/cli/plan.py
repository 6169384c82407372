"""`autocomp plan`: the capacity plan of a run (autocomp.pipelines.cluster.capacity): per step,
pods, GPUs, expected GPU-hours with their sources, bytes read and written, peak disk and memory,
expected wall time and the compiled timeout; then the rates and the run's total storage."""

from __future__ import annotations

import argparse

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
    from autocomp.pipelines.cluster import capacity

    if args.count is not None and args.count < 1:
        raise UsageError("--count", args.count, "must be at least 1 (concepts per family:N)")
    made = capacity.plan(args.profile, args.count, args.models or ["all"])
    concepts = sum(made.concepts.values())
    print(
        f"plan: profile {made.profile}, {made.count:,} concepts per family:N -> {concepts:,} "
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
        rows.append([s.step, str(s.pods), gpus, hours, *sizes, wall, _hours(s.timeout_s)])
    headers = ["step", "pods", "GPUs per pod", "GPU-hours", "read", "written", "peak disk",
               "peak memory", "wall (pod)", "timeout"]  # fmt: skip
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
    print(
        f"\nThe compiled pipelines are sized for --profile {capacity.DESIGN_PROFILE} --count "
        f"{capacity.DESIGN_COUNT:,} --models all (capacity.DESIGN_COUNT); a larger run needs "
        "them recompiled with a larger design."
    )


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
        "--count", type=int, default=None, help="concepts per family:N (default: the profile's)"
    )
    p.add_argument(
        "--models",
        nargs="+",
        default=None,
        help="models scored: registered names, or all (default all)",
    )
    p.set_defaults(run=_plan)
