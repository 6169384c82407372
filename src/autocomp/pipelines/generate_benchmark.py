"""generate_benchmark: sample -> caption -> ParallelFor(shards){render -> validate} -> collect ->
curate -> negatives -> publish (paper Section 3). Defaults are the paper's models (A.6)."""

from kfp import dsl

from autocomp.pipelines.components import generation as c
from autocomp.pipelines.resources import configure


def build(retries: bool = True):  # noqa: ANN201  (a kfp pipeline)
    """The pipeline; retries=False for the local run (kfp.local honours retry policies)."""

    def step(task, name, gpus=None):  # noqa: ANN001, ANN202
        return configure(task, name, gpus, retries)

    @dsl.pipeline(
        name="autocomp-generate-benchmark",
        description="Generate, validate and publish an autocomp compositional benchmark.",
    )
    def generate_benchmark(
        name: str,
        store: str = "s3://autocomp/runs",
        specs: str = "color:2,color:3,shape_color:2,shape_color:3,position:2,position:3,"
        "relative_size:2,relative_size:3",
        count: int = 1000,
        seed: int = 0,
        reuse_concepts: str = "",
        captioner: str = "gemma-3-12b-it",
        caption_engine: str = "vllm",
        caption_settings: dict = {},  # noqa: B006  (a KFP default, never mutated)
        caption_fallback: str = "",
        renderer: str = "sd3.5-large",
        render_settings: dict = {},  # noqa: B006
        render_batch_size: int = 16,
        detector: str = "grounding-dino-tiny",
        segmenter: str = "sam2.1-hiera-large",
        vqa: str = "gemma-3-12b-it",
        validate_settings: dict = {},  # noqa: B006
        masks: str = "sam2",
        all_checks: bool = False,
        keep_rejected: bool = False,
        protocol: str = "paper",
        num_shards: int = 16,
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
        images = step(c.collect(parts=dsl.Collected(rendered.outputs["images"])), "collect")
        images.set_display_name("collect-images")
        verdicts = step(c.collect(parts=dsl.Collected(checked.outputs["verdicts"])), "collect")
        verdicts.set_display_name("collect-verdicts")
        curated = step(
            c.curate(
                images=images.outputs["merged"],
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
                images=images.outputs["merged"],
                concepts=concepts.outputs["concepts"],
                curated=curated.outputs["curated"],
                store=store,
                name=name,
            ),
            "publish",
        )
        return published.output

    return generate_benchmark


generate_benchmark = build()
