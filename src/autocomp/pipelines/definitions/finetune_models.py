"""finetune_models: a published benchmark (read from the store) -> concept split (its
evaluation benchmark written to the store) -> ParallelFor(model x negative kind x seed){train
(GPU, state committed to the store) -> score the evaluation benchmark (GPU)} and
ParallelFor(model){score the pretrained model} -> Table 8 report, which reads the published
runs and curves from the store (no `dsl.Collected`) (paper Section 5, A.9). Every fine-tuning
setting is a parameter (the plumbing table: FinetuneConfig's fields, the `paper` profile's values as
defaults), so a run's settings are fixed when it is compiled or submitted."""

from __future__ import annotations

from typing import Any

from autocomp.pipelines.definitions.builder import Build
from autocomp.pipelines.plumbing import inputs


def build(cluster: bool = True) -> Any:
    """The pipeline; cluster=False for the local run (see builder.Build)."""
    from kfp import dsl

    from autocomp.pipelines.definitions.components import finetune as c

    b = Build(cluster)

    @b.pipeline(
        "finetune_models",
        "Fine-tune contrastive models with Swap or Confusion hard negatives on a published "
        "autocomp benchmark and report the gains (Table 8).",
        returns=str,
    )
    def finetune_models(p: Any) -> Any:
        settings = inputs("finetune", p)
        splits = b.step(
            c.split,
            "finetune_split",
            store=p["store"],
            name=p["name"],
            split_seed=p["split_seed"],
            **settings,
        )
        runs = b.step(
            c.plan, "finetune_plan", models=p["models"], negatives=p["negatives"], seeds=p["seeds"]
        )
        with dsl.ParallelFor(items=runs.output, name="train-runs") as run:
            trained = b.step(
                c.train,
                "finetune_train",
                name=p["name"],
                splits=splits.outputs["splits"],
                run=run,
                **settings,
            )
            scored = b.step(
                c.score_finetuned,
                "finetune_score",
                checkpoint=trained.outputs["checkpoint"],
                splits=splits.outputs["splits"],
                run=run,
            )
        with dsl.ParallelFor(items=p["models"], name="pretrained") as model:
            base = b.step(
                c.score_pretrained,
                "finetune_score",
                model=model,
                splits=splits.outputs["splits"],
            )
        final = b.step(
            c.report,
            "finetune_report",
            runs=runs.output,
            models=p["models"],
            splits=splits.outputs["splits"],
            store=p["store"],
            name=p["name"],
            seed=p["report_seed"],
        ).after(scored, base)  # every run, read from the store
        return final.outputs["Output"]

    return finetune_models
