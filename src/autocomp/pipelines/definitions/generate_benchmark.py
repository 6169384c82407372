"""generate_benchmark: sample -> caption -> shard_plan -> ParallelFor(shards){render ->
validate} -> curate -> negatives -> publish (paper Section 3). Images, shard tables and the
candidate table go through the store by key (definitions.artifacts); the artifacts between the
steps are tables and small manifests, and curate gathers the shards from the store after the
loop (no `dsl.Collected`: KFP 2.2+ runs it). Parameters and their defaults (the `paper` profile:
the paper's models and settings, A.6) come from the plumbing table. A run publishes under
`<name>-<run id>` (plan.published_name): pass that name to evaluate_models."""

from __future__ import annotations

from typing import Any

from autocomp.pipelines import plumbing
from autocomp.pipelines.definitions.builder import Build
from autocomp.pipelines.plumbing import inputs

GENERATION_ROLES = ("captioner", "renderer", "detector", "segmenter", "vqa")


def build(cluster: bool = True) -> Any:
    """The pipeline; cluster=False for the local run (see builder.Build)."""
    from kfp import dsl

    from autocomp.pipelines.definitions.components import generation as c

    b = Build(cluster)

    @b.pipeline(
        "generate_benchmark",
        "Generate, validate and publish an autocomp compositional benchmark.",
        returns=str,
    )
    def generate_benchmark(p: Any) -> Any:
        concepts = b.step(
            c.sample, "sample", **inputs("sample", p), store=p["store"], reuse=p["reuse_concepts"],
            draw=p["draw"],
        )  # fmt: skip
        captions = b.step(
            c.caption, "caption", concepts=concepts.outputs["concepts"], **inputs("caption", p),
            draw=p["draw"],
        )  # fmt: skip
        planned = {prm.name: p[prm.name] for stage in ("render", "validate")
                   for prm in plumbing.fed(stage).values()}  # fmt: skip
        plan = b.step(
            c.shard_plan,
            "shard_plan",
            captions=captions.outputs["captions"],
            store=p["store"],
            draw=p["draw"],
            **planned,
        )
        work = plan.outputs["work"]
        with dsl.ParallelFor(items=plan.outputs["Output"], name="shards") as shard:
            rendered = b.step(
                c.render,
                "render",
                captions=captions.outputs["captions"],
                work=work,
                shard=shard,
                draw=p["draw"],
                **inputs("render", p),
            )
            checked = b.step(
                c.validate,
                "validate",
                table=rendered.outputs["table"],
                work=work,
                shard=shard,
                **inputs("validate", p),
            )
        curated = b.step(
            c.curate,
            "curate",
            work=work,
            captions=captions.outputs["captions"],
            **inputs("curate", p),
        ).after(checked)  # every shard, gathered from the store
        benchmark = b.step(
            c.negatives,
            "negatives",
            curated=curated.outputs["curated"],
            work=work,
            **inputs("negatives", p),
        )
        published = b.step(
            c.publish,
            "publish",
            benchmark=benchmark.outputs["benchmark"],
            work=work,
            concepts=concepts.outputs["concepts"],
            curated=curated.outputs["curated"],
            name=p["name"],
            run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            unique=p["unique_name"],
            **{role: p[role] for role in GENERATION_ROLES},  # named in the benchmark's card
        )
        return published.output

    return generate_benchmark
