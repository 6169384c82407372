"""evaluate_models: fetch a published benchmark, score every requested model (one fan-out per
GPU count in the registry, so a 72B model gets its GPUs and a CLIP model one), publish each run
to the store, then report. A model added to the registry needs no change here (recompile)."""

from kfp import dsl

from autocomp.config import PROFILES, evaluate_arguments
from autocomp.pipelines.components import evaluation as c
from autocomp.pipelines.resources import DEFAULT_STORE, configure
from autocomp.scoring.registry import gpu_groups

PAPER = evaluate_arguments(PROFILES["paper"])


def build(retries: bool = True):  # noqa: ANN201  (a kfp pipeline)
    """The pipeline; retries=False for the local run (kfp.local honours retry policies)."""

    def step(task, name, gpus=None):  # noqa: ANN001, ANN202
        return configure(task, name, gpus, retries)

    @dsl.pipeline(
        name="autocomp-evaluate-models",
        description="Score registered models on a published autocomp benchmark and report.",
    )
    def evaluate_models(
        name: str,
        store: str = DEFAULT_STORE,
        models: list = PAPER["models"],
        report_seed: int = PAPER["report_seed"],
    ) -> str:
        fetched = step(c.fetch(store=store, name=name), "fetch")
        collected = []
        for gpus in gpu_groups():
            chosen = step(c.select_models(requested=models, gpus=gpus), "select_models")
            chosen.set_display_name(f"models-{gpus}-gpu")
            with dsl.ParallelFor(items=chosen.output, name=f"score-{gpus}-gpu") as model:
                scored = step(
                    c.score(
                        benchmark=fetched.outputs["benchmark"], model=model, store=store, name=name
                    ),
                    "score",
                    gpus=gpus,
                )
            done = step(
                c.collect_scores(parts=dsl.Collected(scored.outputs["scores"])), "collect_scores"
            )
            done.set_display_name(f"collect-{gpus}-gpu")
            collected.append(done)
        final = step(c.report(store=store, name=name, seed=report_seed), "report").after(*collected)
        return final.outputs["Output"]

    return evaluate_models


evaluate_models = build()
