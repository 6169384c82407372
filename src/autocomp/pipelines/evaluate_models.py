"""evaluate_models: fetch a published benchmark, score every requested model, then report.

Models are grouped into resource classes (GPU count x GPU memory, from the registry: see
resources.score_class); each class is one sub-pipeline whose score steps run under
`dsl.If(count > 0)`, so a class with no requested model schedules no pod at all (a run of
`models=["clip-vit-b-16"]` never waits for a 4-GPU node). What each class holds and what "all"
means are decided at compile time, so a model added to the registry needs no change here:
recompile (and its score steps receive the compiling machine's registry entry).
"""

import copy
from typing import List  # noqa: UP035  (KFP reads the annotation's name)

from kfp import dsl
from kfp.dsl import Dataset, Input

from autocomp.config import PROFILES, evaluate_arguments
from autocomp.pipelines.components import evaluation as c
from autocomp.pipelines.plan import in_all, registry_text, score_groups
from autocomp.pipelines.resources import DEFAULT_STORE, ScoreClass, configure

PAPER = evaluate_arguments(PROFILES["paper"])


def score_group(score: ScoreClass, members: list[str], cluster: bool = True):  # noqa: ANN201
    """The sub-pipeline of one resource class: score each chosen model, then collect."""
    registry = registry_text(members)
    # a component of its own per class: its executor label (exec-score-<class>) then carries the
    # class's resources and node affinity unambiguously (KFP numbers the labels of one shared
    # component by set order, which varies with the hash seed, and the Kubernetes settings of one
    # class could land on another's executor)
    scorer = copy.deepcopy(c.score)
    scorer.component_spec.name = f"score-{score.name}"

    @dsl.pipeline(name=f"class-{score.name}", description=f"score models of class {score.name}")
    def group(
        benchmark: Input[Dataset],
        models: List[str],  # noqa: UP006
        count: int,
        store: str,
        name: str,
    ) -> None:
        with dsl.If(count > 0, name=f"any-{score.name}"):
            with dsl.ParallelFor(
                items=models, parallelism=score.parallelism, name=f"models-{score.name}"
            ) as model:
                scored = configure(
                    scorer(
                        benchmark=benchmark, model=model, store=store, name=name, registry=registry
                    ),
                    "score",
                    score=score,
                    cluster=cluster,
                )
                scored.set_display_name(f"score-{score.name}")
            done = configure(
                c.collect_scores(parts=dsl.Collected(scored.outputs["scores"])),
                "collect_scores",
                cluster=cluster,
            )
            done.set_display_name(f"collect-{score.name}")

    return group


def build(cluster: bool = True):  # noqa: ANN201  (a kfp pipeline)
    """The pipeline; cluster=False for the local run (see resources.configure)."""
    groups = {score: (members, score_group(score, members, cluster))
              for score, members in score_groups().items()}  # fmt: skip
    everything, left_out = in_all()
    known = [name for members, _ in groups.values() for name in members]

    def step(task, name):  # noqa: ANN001, ANN202
        return configure(task, name, cluster=cluster)

    @dsl.pipeline(
        name="autocomp-evaluate-models",
        description="Score registered models on a published autocomp benchmark and report.",
    )
    def evaluate_models(
        name: str,
        store: str = DEFAULT_STORE,
        models: list = PAPER["models"],
        report_seed: int = PAPER["report_seed"],
    ) -> dsl.HTML:
        fetched = step(c.fetch(store=store, name=name), "fetch")
        scored = []
        for score, (members, group) in groups.items():
            chosen = step(
                c.select_models(
                    requested=models,
                    members=members,
                    everything=everything,
                    known=known,
                    left_out=left_out,
                ),
                "select_models",
            )
            chosen.set_display_name(f"models-{score.name}")
            scored.append(
                group(
                    benchmark=fetched.outputs["benchmark"],
                    models=chosen.outputs["models"],
                    count=chosen.outputs["count"],
                    store=store,
                    name=name,
                )
            )
        final = step(c.report(store=store, name=name, seed=report_seed), "report").after(*scored)
        return final.outputs["page"]

    return evaluate_models


evaluate_models = build()
