"""A GPU pool and the wall-clock of each pipeline on it, from the capacity plan's step graph.

A pool is `16xA100-80GB` or a mix, `8xA100-80GB,32xL4`; each card's memory and speed are data
(CARDS: memory as sold, speed relative to an A100 from the vendors' dense BF16 tensor figures, an
estimate of the ratio of real throughputs). The plan's GPU work is in A100-seconds per pod.

Each pipeline is its step graph: generate_benchmark and finetune_models are chains (each step
starts when the one before ends), evaluate_models runs its score classes side by side (every
score pod of every class shares the pool), then the report. Within a step (or the score
classes together) pods are placed longest first, each on the GPUs that fit it (memory at least
its class's) that free up first; a pod on several GPUs runs at the slowest one's speed. The
pipeline's wall is the finish of its last step; its critical path names the steps (and, for
the evaluation, the pod) that set it.

`smallest_pool` scales a pool's mix until every pipeline meets a wall-time target.
`score_ranges` and `score_parallelism`: the part ranges per model and each score class's loop
parallelism that evaluate_models is compiled with (the capacity plan at its design scale).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from autocomp.errors import UsageError


@dataclass(frozen=True)
class Card:
    memory_gb: int
    speed: float  # dense BF16 tensor throughput / an A100's (312 TFLOPS)


# vendors' datasheets: dense BF16 tensor TFLOPS (A100 312, H100 SXM 989, H200 989, L40S 362,
# L4 121, A10G 70, T4 65 FP16); memory as GPU feature discovery labels it, rounded to sold sizes
CARDS = {
    "A100-80GB": Card(80, 1.0),
    "A100-40GB": Card(40, 1.0),
    "H100-80GB": Card(80, 989 / 312),
    "H200-141GB": Card(141, 989 / 312),
    "L40S-48GB": Card(48, 362 / 312),
    "L4-24GB": Card(24, 121 / 312),
    "A10G-24GB": Card(24, 70 / 312),
    "T4-16GB": Card(16, 65 / 312),
}
ALIASES = {name.split("-")[0]: name for name in CARDS if name.split("-")[0] != "A100"}
PAPER_POOL = "16xA100-80GB"  # Table 22's cluster


def parse_pool(text: str) -> dict[str, int]:
    """`NxCARD[,NxCARD...]` -> card -> count. An unknown card lists the known ones."""
    pool: dict[str, int] = {}
    for item in (p.strip() for p in text.split(",")):
        count, _, card = item.partition("x")
        card = ALIASES.get(card, card)
        if not count.isdigit() or int(count) < 1 or not card:
            fix = "give NxCARD[,NxCARD...], e.g. 16xA100-80GB or 8xA100-80GB,32xL4"
            raise UsageError("gpus", item, fix)
        if card not in CARDS:
            known = ", ".join(CARDS)
            raise UsageError("gpus", card, f"unknown card; known cards: {known}")
        pool[card] = pool.get(card, 0) + int(count)
    return pool


def pool_text(pool: dict[str, int]) -> str:
    return ",".join(f"{n}x{card}" for card, n in pool.items())


@dataclass(frozen=True)
class Pod:
    """One pod to place: its step, GPUs (count, memory each) and A100-seconds of work."""

    step: str
    gpus: int
    gpu_gb: int
    work_s: float
    label: str = ""


@dataclass
class Wall:
    """A pipeline's wall-clock on a pool: per step (start, end) and the pod that ended last."""

    pipeline: str
    steps: dict[str, tuple[float, float]] = field(default_factory=dict)
    last_pod: str = ""

    @property
    def total_s(self) -> float:
        return max((end for _, end in self.steps.values()), default=0.0)

    def critical_path(self) -> list[str]:
        """The steps the wall waits on, in order (each pipeline is a chain: every step that
        takes time), with the pod that ended last among the score classes."""
        path = [name for name, (start, end) in self.steps.items() if end > start]
        return [f"{p} (last: {self.last_pod})" if p == "score classes" and self.last_pod else p
                for p in path]  # fmt: skip


def place(pods: Sequence[Pod], pool: dict[str, int], start: float) -> tuple[float, str]:
    """Place `pods` longest first on `pool` (all free at `start`); return the finish of the
    last pod and its label. A pod no card of the pool fits is a usage error naming it."""
    gpus = [[start, CARDS[card].speed, CARDS[card].memory_gb] for card, n in pool.items()
            for _ in range(n)]  # fmt: skip
    end, last = start, ""
    for pod in sorted(pods, key=lambda p: -p.work_s):
        fit = [g for g in gpus if g[2] >= pod.gpu_gb]
        if len(fit) < pod.gpus:
            fits = [c for c, card in CARDS.items() if card.memory_gb >= pod.gpu_gb]
            raise UsageError(
                "gpus", pool_text(pool), f"has no {pod.gpus} GPU(s) of {pod.gpu_gb} GB or more "
                f"for {pod.step}; add cards of {', '.join(fits)}",
            )  # fmt: skip
        chosen = sorted(fit, key=lambda g: (g[0], -g[1]))[: pod.gpus]
        begin = max(g[0] for g in chosen)
        finish = begin + pod.work_s / min(g[1] for g in chosen)
        for g in chosen:
            g[0] = finish
        if finish > end:
            end, last = finish, pod.label or pod.step
    return end, last


CHAINS = {  # the steps of each pipeline in order; "score-*" stands for every score class
    "generate_benchmark": ("sample", "caption", "shard_plan", "render", "validate", "curate",
                           "negatives", "publish"),
    "evaluate_models": ("select_models", "score-*", "collect_scores", "report"),
    "finetune_models": ("finetune_split", "finetune_plan", "finetune_train", "finetune_score",
                        "finetune_report"),
}  # fmt: skip
CHAINS["generate_and_evaluate"] = (*CHAINS["generate_benchmark"], *CHAINS["evaluate_models"])
# a pipeline that nests others runs their steps one pipeline after the other: its wall is shown,
# but --max-wall holds each pipeline it nests (a weekly loop may take longer than a day)
COMPOSED = frozenset({"generate_and_evaluate"})


def held(found: dict[str, Wall]) -> dict[str, Wall]:
    """The walls --max-wall holds: every pipeline's but the composed ones'."""
    return {p: w for p, w in found.items() if p not in COMPOSED}


def _pods(step: object) -> list[Pod]:
    name, walls = step.step, step.pod_walls or [step.wall_s] * step.pods  # type: ignore[attr-defined]
    return [Pod(name, step.gpus, step.gpu_gb, w, f"{name} pod {i + 1}")  # type: ignore[attr-defined]
            for i, w in enumerate(walls)]  # fmt: skip


def walls(made: object, pool: dict[str, int]) -> dict[str, Wall]:
    """Each pipeline's wall-clock on `pool` (made: a capacity.Plan)."""
    by_name = {s.step: s for s in made.steps}  # type: ignore[attr-defined]
    found = {}
    for pipeline, chain in CHAINS.items():
        wall, at = Wall(pipeline), 0.0
        for name in chain:
            if name == "score-*":
                steps = [s for n, s in by_name.items() if n.startswith("score-")]
            else:
                steps = [by_name[name]] if name in by_name else []
            if not steps:
                continue
            gpu = [p for s in steps if s.gpus for p in _pods(s)]
            end, last = place(gpu, pool, at) if gpu else (at, "")
            cpu = max((s.wall_s for s in steps if not s.gpus), default=0.0)
            end = max(end, at + cpu)
            wall.steps["score classes" if name == "score-*" else name] = (at, end)
            if name == "score-*":
                wall.last_pod = last
            at = end
        found[pipeline] = wall
    return found


def smallest_pool(made: object, pool: dict[str, int], max_wall: float) -> dict[str, int] | None:
    """The pool's mix scaled by the least whole factor (1 first) at which every pipeline ends
    within `max_wall` seconds; None when no size would (a pod alone is longer)."""
    for factor in _factors():
        scaled = {card: n * factor for card, n in pool.items()}
        found = held(walls(made, scaled))
        if all(w.total_s <= max_wall for w in found.values()):
            return scaled
        bigger = walls(made, {card: n * factor * 2 for card, n in pool.items()})
        if all(math.isclose(bigger[p].total_s, found[p].total_s) for p in found):
            return None  # more GPUs no longer help: a pod alone is longer than max_wall
    return None


def _factors() -> list[int]:
    return list(range(1, 9)) + [12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512, 1024]


# ----------------------------------------------------------- what evaluate_models is compiled with


def score_ranges(models: list[str], max_wall: float = 24 * 3600.0) -> dict[str, int]:
    """Part ranges per model at DESIGN (what evaluate_models is compiled with)."""
    from autocomp.pipelines.cluster.capacity import HOUR, _score_gpu_hours, design, ranges_for
    from autocomp.scoring.registry import get_model

    made = design()
    found = {}
    for model in models:
        entry = get_model(model)
        wall = _score_gpu_hours(made, entry.gpu_memory_gb) * HOUR / max(1, entry.gpus)
        found[model] = ranges_for(wall, max_wall)
    return found


def score_parallelism(score: Any) -> int:
    """A score class's loop parallelism: every range pod the plan at DESIGN gives the class may
    run at once (the cluster's GPUs, not the loop, hold back the rest), at least the class's
    own floor (gpus.SCORE_PARALLELISM)."""
    from autocomp.pipelines.cluster.capacity import design

    found = [s.pods for s in design().steps if s.step == f"score-{score.name}"]
    return max([score.parallelism, *found])
