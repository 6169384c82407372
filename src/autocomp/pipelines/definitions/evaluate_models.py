"""evaluate_models: score every requested model on a published benchmark, then report. Each
score step streams the benchmark's Parquet parts from the store as it goes (nothing is fetched
first) and commits its parts to the store as it writes them, so a retried or resubmitted step
resumes where the last one stopped; each class's collect step reads the published runs from
the store (no `dsl.Collected`).

Models are grouped into resource classes (GPU count x GPU memory, from the registry, and the
engine where it lives in an image of its own: see gpus.score_class; a class's score steps run in
its image, vLLM's in the caption image); each class is one sub-pipeline whose score steps run under
`dsl.If(count > 0)`, so a class with no requested model schedules no pod at all (a run of
`models=["clip-vit-b-16"]` never waits for a 4-GPU node). What each class holds and what "all"
means are decided at compile time, so a model added to the registry needs no change here:
recompile (and its score steps receive the compiling machine's registry entry). The score
settings (blind modes, choice options, limit, batch size) are parameters of the pipeline, from
the plumbing table, and reach every score step as its ScoreConfig.

Data-parallel scoring: each class's loop runs over (model, part range) items (select_models:
`<model>@<k>-of-<K>`, or the model alone for K = 1), K per model from the capacity plan at
compile time (pool.score_ranges: the ranges that bring one pod's expected wall under
MAX_WALL) unless the run's `score_ranges` says otherwise, the loop's parallelism the class's
range pods in the same plan (pool.score_parallelism); each range is one pod that commits
its parts, and the class's collect step merges a model's ranges into its published run
(scoring.ranges). One flat ParallelFor over a list parameter, no nested loop and no
`dsl.Collected`: every supported backend runs it (docs/cluster.md).
"""

from __future__ import annotations

import inspect
from typing import Any, List  # noqa: UP035  (KFP reads the annotation's name)

from autocomp.pipelines import plumbing
from autocomp.pipelines.cluster.plan import in_all, registry_text, score_groups
from autocomp.pipelines.cluster.pool import score_parallelism, score_ranges
from autocomp.pipelines.cluster.resources import ScoreClass
from autocomp.pipelines.definitions.builder import Build, graph


def score_group(b: Build, score: ScoreClass, members: list[str]) -> Any:
    """The sub-pipeline of one resource class: score each chosen model, then collect."""
    from kfp import dsl

    from autocomp.pipelines.definitions.components import evaluation as c

    registry = registry_text(members)
    settings = plumbing.fed("score")  # the score configuration's fields, from the run
    kinds = {"models": List[str], "count": int, "items": List[str],  # noqa: UP006
             "store": str, "name": str,
             **{f: plumbing.kfp_type(p) for f, p in settings.items()}}  # fmt: skip
    parameters = [
        inspect.Parameter(key, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=kind)
        for key, kind in kinds.items()
    ]
    helps = {field: parameter.help for field, parameter in settings.items()}

    def group(p: Any) -> None:
        with dsl.If(p["count"] > 0, name=f"any-{score.name}"):
            with dsl.ParallelFor(  # one pod per model, or per range of a model's parts
                items=p["items"], parallelism=score_parallelism(score), name=f"models-{score.name}"
            ) as item:
                # a component of its own per class: its executor label (exec-score-<class>)
                # then carries the class's resources and node affinity unambiguously (KFP
                # numbers the labels of one shared component by set order, which varies with
                # the hash seed, and one class's Kubernetes settings could land on another's)
                scored = b.step(
                    c.score,
                    "score",
                    score=score,
                    component_name=f"score-{score.name}",
                    image=score.image,  # its engine's image (vLLM: the caption image)
                    display=f"score-{score.name}",
                    model=item,
                    store=p["store"],
                    name=p["name"],
                    registry=registry,
                    **{key: p[key] for key in settings},
                )
            b.step(
                c.collect_scores,
                "collect_scores",
                display=f"collect-{score.name}",
                store=p["store"],
                name=p["name"],
                models=p["models"],
                registry=registry,
                **{key: p[key] for key in settings},
            ).after(scored)  # every model of the class (its ranges merged), from the store

    description = f"score models of class {score.name}"
    return graph(f"class-{score.name}", description, parameters, None, helps, group)


def build(cluster: bool = True) -> Any:
    """The pipeline; cluster=False for the local run (see builder.Build)."""
    from kfp import dsl

    from autocomp.pipelines.definitions.components import evaluation as c

    b = Build(cluster)
    groups = {score: (members, score_group(b, score, members))
              for score, members in score_groups().items()}  # fmt: skip
    everything, left_out = in_all()
    known = [name for members, _ in groups.values() for name in members]
    planned = score_ranges(known)  # part ranges per model: the capacity plan's, at compile time

    @b.pipeline(
        "evaluate_models",
        "Score registered models on a published autocomp benchmark and report.",
        returns=dsl.HTML,
    )
    def evaluate_models(p: Any) -> Any:
        scored = []
        for score, (members, group) in groups.items():
            chosen = b.step(
                c.select_models,
                "select_models",
                display=f"models-{score.name}",
                requested=p["models"],
                members=members,
                everything=everything,
                known=known,
                left_out=left_out,
                planned=planned,
                score_ranges=p["score_ranges"],
            )
            scored.append(
                group(
                    models=chosen.outputs["models"],
                    count=chosen.outputs["count"],
                    items=chosen.outputs["items"],
                    store=p["store"],
                    name=p["name"],
                    **plumbing.inputs("score", p),
                )
            )
        final = b.step(c.report, "report", store=p["store"], name=p["name"], seed=p["report_seed"])
        return final.after(*scored).outputs["page"]

    return evaluate_models
