"""Components of the generate_benchmark pipeline. Every output is a folder (Dataset artifact);
a render shard's tables and images are separate artifacts (autocomp.pipelines.artifacts), so
only validate and publish download images."""

from typing import List  # noqa: UP035  (KFP reads the annotation's name)

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from autocomp.pipelines.components import image


@dsl.component(base_image=image("core"), install_kfp_package=False)
def sample(
    specs: str, count: int, seed: int, store: str, reuse: str, concepts: Output[Dataset]
) -> None:
    import os

    from autocomp.config import SampleConfig
    from autocomp.protocol.stages import reuse_or_sample

    os.makedirs(concepts.path, exist_ok=True)
    config = SampleConfig(specs=specs, count=count, seed=seed)
    reuse_or_sample(config, store, reuse, os.path.join(concepts.path, "concepts.parquet"))


@dsl.component(base_image=image("caption"), install_kfp_package=False)
def caption(
    concepts: Input[Dataset],
    captioner: str,
    engine: str,
    seed: int,
    settings: dict,
    fallback: str,
    captions: Output[Dataset],
) -> None:
    import os

    from autocomp.config import CaptionConfig
    from autocomp.generation.caption import caption_stage
    from autocomp.process import ending

    config = CaptionConfig(
        captioner=captioner, engine=engine, seed=seed, fallback=fallback or None, settings=settings
    )
    caption_stage(os.path.join(concepts.path, "concepts.parquet"), captions.path, config)
    ending()  # the process ends next: skip its last full garbage collection


@dsl.component(base_image=image("core"), install_kfp_package=False)
def shard_plan(num_shards: int) -> List[int]:  # noqa: UP006
    from autocomp.store.shards import check_shard_args

    return check_shard_args(None, num_shards)


@dsl.component(base_image=image("gpu"), install_kfp_package=False)
def render(
    captions: Input[Dataset],
    renderer: str,
    seed: int,
    settings: dict,
    shard: int,
    num_shards: int,
    batch_size: int,
    table: Output[Dataset],
    images: Output[Dataset],
) -> None:
    import tempfile

    from autocomp.config import RenderConfig
    from autocomp.generation.render import render_stage
    from autocomp.pipelines.artifacts import split_render
    from autocomp.process import ending

    config = RenderConfig(
        renderer=renderer,
        seed=seed,
        num_shards=num_shards,
        batch_size=batch_size,
        settings=settings,
    )
    work = tempfile.mkdtemp(prefix="render-")
    render_stage(captions.path, work, config, shard)
    split_render(work, table.path, images.path)
    ending()  # the process ends next: skip its last full garbage collection


@dsl.component(base_image=image("gpu"), install_kfp_package=False)
def validate(
    table: Input[Dataset],
    images: Input[Dataset],
    detector: str,
    segmenter: str,
    vqa: str,
    settings: dict,
    masks: str,
    all_checks: bool,
    shard: int,
    num_shards: int,
    verdicts: Output[Dataset],
) -> None:
    import tempfile

    from autocomp.config import ValidateConfig
    from autocomp.generation.validate import validate_stage
    from autocomp.pipelines.artifacts import join
    from autocomp.process import ending

    config = ValidateConfig(
        detector=detector,
        segmenter=segmenter,
        vqa=vqa,
        num_shards=num_shards,
        masks=masks,
        all_checks=all_checks,
        settings=settings,
    )
    render = join([table.path, images.path], tempfile.mkdtemp(prefix="validate-"))
    validate_stage(render, verdicts.path, config, shard)
    ending()  # the process ends next: skip its last full garbage collection


@dsl.component(base_image=image("core"), install_kfp_package=False)
def collect(parts: Input[List[Dataset]], merged: Output[Dataset]) -> None:  # noqa: UP006
    from autocomp.store.shards import collect_stage

    collect_stage([p.path for p in parts], merged.path)


@dsl.component(base_image=image("core"), install_kfp_package=False)
def curate(
    render: Input[Dataset],
    verdicts: Input[Dataset],
    captions: Input[Dataset],
    keep_rejected: bool,
    curated: Output[Dataset],
) -> None:
    from autocomp.config import CurateConfig
    from autocomp.generation.curate import curate_stage

    config = CurateConfig(keep_rejected=keep_rejected)
    curate_stage(render.path, verdicts.path, curated.path, captions.path, config)


@dsl.component(base_image=image("core"), install_kfp_package=False)
def negatives(curated: Input[Dataset], protocol: str, benchmark: Output[Dataset]) -> None:
    import os

    from autocomp.config import NegativesConfig
    from autocomp.protocol.stages import negatives_stage

    os.makedirs(benchmark.path, exist_ok=True)
    negatives_stage(
        os.path.join(curated.path, "curated.parquet"),
        os.path.join(benchmark.path, "benchmark.parquet"),
        NegativesConfig(protocol=protocol, workers=1),
    )


@dsl.component(base_image=image("core"), install_kfp_package=False)
def publish(
    benchmark: Input[Dataset],
    images: Input[List[Dataset]],  # noqa: UP006  (every render shard's images)
    concepts: Input[Dataset],
    curated: Input[Dataset],
    store: str,
    name: str,
    run_id: str,
    unique: bool,
) -> str:
    import os
    import tempfile

    from autocomp.pipelines.artifacts import join
    from autocomp.pipelines.plan import published_name
    from autocomp.store.publish import publish_stage

    return publish_stage(
        os.path.join(benchmark.path, "benchmark.parquet"),
        join([p.path for p in images], tempfile.mkdtemp(prefix="images-")),
        tempfile.mkdtemp(prefix="publish-"),
        store,
        published_name(name, run_id, unique),
        os.path.join(concepts.path, "concepts.parquet"),
        os.path.join(curated.path, "survival.parquet"),
    )
