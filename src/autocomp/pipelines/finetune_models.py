"""finetune_models: fetch a published benchmark -> concept split -> ParallelFor(model x negative
kind x seed){train (GPU) -> score the evaluation benchmark (GPU)} and ParallelFor(model){score
the pretrained model} -> Table 8 report (paper Section 5, A.9). Defaults: the paper's recipe."""

import builtins
import os
from pathlib import Path
from typing import Any

from kfp import dsl

from autocomp.finetune.config import NEGATIVE_KINDS, PROFILES
from autocomp.pipelines.components import evaluation as ev
from autocomp.pipelines.components import finetune as c
from autocomp.pipelines.resources import configure

PAPER_MODELS = ["clip-vit-b-16", "siglip-b-16-224"]  # CLIP ViT-B/16 and SigLIP ViT-B/16 (A.9)
TINY_MODELS = ["tiny-clip", "tiny-siglip"]


def build(cluster: bool = True):  # noqa: ANN201  (a kfp pipeline)
    """The pipeline; cluster=False for the local run (see resources.configure)."""

    def step(task, name):  # noqa: ANN001, ANN202
        return configure(task, name, cluster=cluster)

    @dsl.pipeline(
        name="autocomp-finetune-models",
        description="Fine-tune contrastive models with Swap or Confusion hard negatives on a "
        "published autocomp benchmark and report the gains (Table 8).",
    )
    def finetune_models(
        name: str,
        store: str = "s3://autocomp/runs",
        models: list = PAPER_MODELS,  # noqa: B006  (a KFP default, never mutated)
        negatives: list = list(NEGATIVE_KINDS),  # noqa: B006, B008
        seeds: list = list(PROFILES["paper"].seeds),  # noqa: B006, B008
        profile: str = "paper",
        split_seed: int = 0,
        report_seed: int = 0,
    ) -> str:
        fetched = step(ev.fetch(store=store, name=name), "fetch")
        benchmark = fetched.outputs["benchmark"]
        splits = step(
            c.split(benchmark=benchmark, profile=profile, split_seed=split_seed), "finetune_split"
        )
        runs = step(c.plan(models=models, negatives=negatives, seeds=seeds), "finetune_plan")
        with dsl.ParallelFor(items=runs.output, name="train-runs") as run:
            trained = step(
                c.train(
                    benchmark=benchmark, splits=splits.outputs["splits"], run=run, profile=profile
                ),
                "finetune_train",
            )
            scored = step(
                c.score_finetuned(
                    checkpoint=trained.outputs["checkpoint"], splits=splits.outputs["splits"]
                ),
                "finetune_score",
            )
        with dsl.ParallelFor(items=models, name="pretrained") as model:
            base = step(
                c.score_pretrained(model=model, splits=splits.outputs["splits"]), "finetune_score"
            )
        final = step(
            c.report(
                finetuned=dsl.Collected(scored.outputs["scores"]),
                pretrained=dsl.Collected(base.outputs["scores"]),
                checkpoints=dsl.Collected(trained.outputs["checkpoint"]),
                splits=splits.outputs["splits"],
                store=store,
                name=name,
                seed=report_seed,
            ),
            "finetune_report",
        )
        return final.outputs["Output"]

    return finetune_models


finetune_models = build()


def run_local(
    out: str | Path,
    name: str = "finetune",
    profile: str = "tiny",
    models: list[str] | None = None,
    seeds: list[int] | None = None,
    store: str | None = None,
    specs: str = "color:2,shape_color:2",
    count: int = 10,
) -> dict[str, Any]:
    """finetune_models under kfp.local. Without a benchmark `name` in the store, the tiny
    generate_benchmark pipeline makes and publishes one first (the local default)."""
    from kfp import local

    from autocomp.store.storage import open_store

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if profile == "tiny":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("AUTOCOMP_CACHE", str(out / "cache"))
    store = store or str(out / "store")
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(out / "kfp"))
    print_function = builtins.print  # kfp.local's indented_print can leave print patched
    try:
        if open_store(store).manifest(f"benchmarks/{name}") is None:
            from autocomp.pipelines import generate_benchmark as generate_module
            from autocomp.pipelines.local import local_arguments

            arguments, _ = local_arguments(profile, specs=specs, count=count, seed=0, num_shards=1)
            generate = generate_module.build(cluster=False)
            generate(name=name, store=store, unique_name=False, **arguments)
        pipeline = build(cluster=False)
        done = pipeline(
            name=name,
            store=store,
            models=models or (TINY_MODELS if profile == "tiny" else PAPER_MODELS),
            seeds=seeds or list(PROFILES[profile].seeds),
            profile=profile,
        )
    finally:
        builtins.print = print_function
    return {"report": done.output, "store": store}
