"""generate_benchmark: sample -> caption -> ParallelFor(shards){render -> validate} -> collect
(tables) -> curate -> negatives -> publish (paper Section 3). Images go from each render shard
to its validate step and to publish only (autocomp.pipelines.artifacts). Parameter defaults
are the `paper` profile (autocomp.config), the paper's models and settings (A.6). A run
publishes under `<name>-<run id>` (plan.published_name): pass that name to evaluate_models."""

from kfp import dsl

from autocomp.config import PROFILES, generate_arguments
from autocomp.pipelines.components import generation as c
from autocomp.pipelines.resources import DEFAULT_STORE, configure

PAPER = generate_arguments(PROFILES["paper"])


def build(cluster: bool = True):  # noqa: ANN201  (a kfp pipeline)
    """The pipeline; cluster=False for the local run (see resources.configure)."""

    def step(task, name):  # noqa: ANN001, ANN202
        return configure(task, name, cluster=cluster)

    @dsl.pipeline(
        name="autocomp-generate-benchmark",
        description="Generate, validate and publish an autocomp compositional benchmark.",
    )
    def generate_benchmark(
        name: str,
        store: str = DEFAULT_STORE,
        specs: str = PAPER["specs"],
        count: int = PAPER["count"],
        seed: int = PAPER["seed"],
        reuse_concepts: str = "",
        captioner: str = PAPER["captioner"],
        caption_engine: str = PAPER["caption_engine"],
        caption_settings: dict = PAPER["caption_settings"],
        caption_fallback: str = PAPER["caption_fallback"],
        renderer: str = PAPER["renderer"],
        render_settings: dict = PAPER["render_settings"],
        render_batch_size: int = PAPER["render_batch_size"],
        detector: str = PAPER["detector"],
        segmenter: str = PAPER["segmenter"],
        vqa: str = PAPER["vqa"],
        validate_settings: dict = PAPER["validate_settings"],
        masks: str = PAPER["masks"],
        all_checks: bool = PAPER["all_checks"],
        keep_rejected: bool = PAPER["keep_rejected"],
        protocol: str = PAPER["protocol"],
        num_shards: int = PAPER["num_shards"],
        unique_name: bool = True,
    ) -> str:
        concepts = step(
            c.sample(specs=specs, count=count, seed=seed, store=store, reuse=reuse_concepts),
            "sample",
        )
        captions = step(
            c.caption(
                concepts=concepts.outputs["concepts"],
                captioner=captioner,
                engine=caption_engine,
                seed=seed,
                settings=caption_settings,
                fallback=caption_fallback,
            ),
            "caption",
        )
        plan = step(c.shard_plan(num_shards=num_shards), "shard_plan")
        with dsl.ParallelFor(items=plan.output, name="shards") as shard:
            rendered = step(
                c.render(
                    captions=captions.outputs["captions"],
                    renderer=renderer,
                    seed=seed,
                    settings=render_settings,
                    shard=shard,
                    num_shards=num_shards,
                    batch_size=render_batch_size,
                ),
                "render",
            )
            checked = step(
                c.validate(
                    table=rendered.outputs["table"],
                    images=rendered.outputs["images"],
                    detector=detector,
                    segmenter=segmenter,
                    vqa=vqa,
                    settings=validate_settings,
                    masks=masks,
                    all_checks=all_checks,
                    shard=shard,
                    num_shards=num_shards,
                ),
                "validate",
            )
        tables = step(c.collect(parts=dsl.Collected(rendered.outputs["table"])), "collect")
        tables.set_display_name("collect-render-tables")
        verdicts = step(c.collect(parts=dsl.Collected(checked.outputs["verdicts"])), "collect")
        verdicts.set_display_name("collect-verdicts")
        curated = step(
            c.curate(
                render=tables.outputs["merged"],
                verdicts=verdicts.outputs["merged"],
                captions=captions.outputs["captions"],
                keep_rejected=keep_rejected,
            ),
            "curate",
        )
        benchmark = step(
            c.negatives(curated=curated.outputs["curated"], protocol=protocol), "negatives"
        )
        published = step(
            c.publish(
                benchmark=benchmark.outputs["benchmark"],
                images=dsl.Collected(rendered.outputs["images"]),
                concepts=concepts.outputs["concepts"],
                curated=curated.outputs["curated"],
                store=store,
                name=name,
                run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                unique=unique_name,
            ),
            "publish",
        )
        return published.output

    return generate_benchmark


generate_benchmark = build()
