"""generate_benchmark: sample -> caption -> ParallelFor(shards){render -> validate} -> collect
(tables) -> curate -> negatives -> publish (paper Section 3). Images go from each render shard
to its validate step and to publish only (definitions.artifacts). Parameters and their defaults
(the `paper` profile: the paper's models and settings, A.6) come from the plumbing table. A run
publishes under `<name>-<run id>` (plan.published_name): pass that name to evaluate_models."""

from __future__ import annotations

from typing import Any

from autocomp.pipelines.definitions.builder import Build
from autocomp.pipelines.plumbing import inputs


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
        plan = b.step(c.shard_plan, "shard_plan", num_shards=p["num_shards"])
        with dsl.ParallelFor(items=plan.output, name="shards") as shard:
            rendered = b.step(
                c.render,
                "render",
                captions=captions.outputs["captions"],
                shard=shard,
                draw=p["draw"],
                **inputs("render", p),
            )
            checked = b.step(
                c.validate,
                "validate",
                table=rendered.outputs["table"],
                images=rendered.outputs["images"],
                shard=shard,
                **inputs("validate", p),
            )
        tables = b.step(
            c.collect,
            "collect",
            display="collect-render-tables",
            parts=dsl.Collected(rendered.outputs["table"]),
        )
        verdicts = b.step(
            c.collect,
            "collect",
            display="collect-verdicts",
            parts=dsl.Collected(checked.outputs["verdicts"]),
        )
        curated = b.step(
            c.curate,
            "curate",
            render=tables.outputs["merged"],
            verdicts=verdicts.outputs["merged"],
            captions=captions.outputs["captions"],
            **inputs("curate", p),
        )
        benchmark = b.step(
            c.negatives, "negatives", curated=curated.outputs["curated"], **inputs("negatives", p)
        )
        published = b.step(
            c.publish,
            "publish",
            benchmark=benchmark.outputs["benchmark"],
            images=dsl.Collected(rendered.outputs["images"]),
            concepts=concepts.outputs["concepts"],
            curated=curated.outputs["curated"],
            store=p["store"],
            name=p["name"],
            run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            unique=p["unique_name"],
        )
        return published.output

    return generate_benchmark
