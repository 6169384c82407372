"""Components of the generate_benchmark pipeline. Every output is a folder (Dataset artifact);
a render shard's tables and images are separate artifacts (definitions.artifacts), so only
validate and publish download images."""

from typing import List  # noqa: UP035  (KFP reads the annotation's name)

from kfp.dsl import Dataset, Input, Output

from autocomp.pipelines.definitions.components import component


@component("core")
def sample(
    specs: str,
    count: int,
    seed: int,
    store: str,
    reuse: str,
    concepts: Output[Dataset],
    draw: str = "",
) -> None:
    """Sample the run's concepts, or reuse the concept set of a published benchmark.

    Args:
        specs: family:N pairs, comma-separated (e.g. color:2,position:3)
        count: concepts per family:N
        seed: the sampling seed
        store: the store that holds `reuse`
        reuse: a published benchmark whose concepts to reuse (empty: sample anew)
        draw: folded into the seed when given (a recurring run's run id: plan.draw_seed)

    Returns:
        concepts: concepts.parquet, one row per concept with its Minimal caption
    """
    import os

    from autocomp.config import SampleConfig
    from autocomp.pipelines.definitions.plan import drawn
    from autocomp.pipelines.plumbing import values
    from autocomp.protocol.stages import reuse_or_sample

    config = drawn(SampleConfig(**values("sample", locals())), draw)
    os.makedirs(concepts.path, exist_ok=True)
    reuse_or_sample(config, store, reuse, os.path.join(concepts.path, "concepts.parquet"))


@component("caption")
def caption(
    concepts: Input[Dataset],
    captioner: str,
    engine: str,
    seed: int,
    batch_size: int,
    fallback: str,
    settings: dict,
    captions: Output[Dataset],
    draw: str = "",
) -> None:
    """Write each concept's Contextual caption with an LLM (checked, 3 tries, paper protocol).

    Args:
        concepts: the sampled concepts
        captioner: the captioning LLM (generation registry)
        engine: vllm or transformers
        seed: the sampling seed of the captioner
        batch_size: concepts per batch
        fallback: minimal (keep the Minimal caption, marked) or empty (drop the concept)
        settings: captioner settings
        draw: folded into the seed when given (plan.draw_seed)

    Returns:
        captions: the caption shards and every attempt
    """
    import os

    from autocomp.config import CaptionConfig
    from autocomp.generation.caption import caption_stage
    from autocomp.pipelines.definitions.plan import drawn
    from autocomp.pipelines.plumbing import values
    from autocomp.process import ending

    config = drawn(CaptionConfig(**values("caption", locals())), draw)
    caption_stage(os.path.join(concepts.path, "concepts.parquet"), captions.path, config)
    ending()  # the process ends next: skip its last full garbage collection


@component("core")
def shard_plan(num_shards: int) -> List[int]:  # noqa: UP006
    """The render/validate shards of the run.

    Args:
        num_shards: how many shards (one GPU pod each)

    Returns:
        Output: the shard numbers, 0 to num_shards - 1
    """
    from autocomp.store.shards import check_shard_args

    return check_shard_args(None, num_shards)


@component("gpu")
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
    draw: str = "",
) -> None:
    """Render one shard's images, one seed per concept shared by both conditions.

    Args:
        captions: the captions
        renderer: the text-to-image model (generation registry)
        seed: the run's seed (each concept's image seed derives from it)
        settings: renderer settings
        shard: this shard's number
        num_shards: the run's shards
        batch_size: images per batch
        draw: folded into the seed when given (plan.draw_seed)

    Returns:
        table: the shard's render table
        images: the shard's images (images/...)
    """
    import tempfile

    from autocomp.config import RenderConfig
    from autocomp.generation.render import render_stage
    from autocomp.pipelines.definitions.artifacts import split_render
    from autocomp.pipelines.definitions.plan import drawn
    from autocomp.pipelines.plumbing import values
    from autocomp.process import ending

    config = drawn(RenderConfig(**values("render", locals())), draw)
    work = tempfile.mkdtemp(prefix="render-")
    render_stage(captions.path, work, config, shard)
    split_render(work, table.path, images.path)
    ending()  # the process ends next: skip its last full garbage collection


@component("gpu")
def validate(
    table: Input[Dataset],
    images: Input[Dataset],
    detector: str,
    segmenter: str,
    vqa: str,
    settings: dict,
    batch_size: int,
    masks: str,
    all_checks: bool,
    shard: int,
    num_shards: int,
    verdicts: Output[Dataset],
) -> None:
    """Check one shard's images: objects, background and attributes (detector, segmenter and a
    VQA judge).

    Args:
        table: the shard's render table
        images: the shard's images
        detector: the open-vocabulary detector (generation registry)
        segmenter: the segmenter (generation registry)
        vqa: the VQA judge (a generative model of the scoring registry)
        settings: detector and segmenter settings, by role
        batch_size: images per batch
        masks: sam2 (segment each box) or boxes
        all_checks: run every check on every sample (not only until the first failure)
        shard: this shard's number
        num_shards: the run's shards

    Returns:
        verdicts: one row per sample and check
    """
    import tempfile

    from autocomp.config import ValidateConfig
    from autocomp.generation.validate import validate_stage
    from autocomp.pipelines.definitions.artifacts import join
    from autocomp.pipelines.plumbing import values
    from autocomp.process import ending

    config = ValidateConfig(**values("validate", locals()))
    render = join([table.path, images.path], tempfile.mkdtemp(prefix="validate-"))
    validate_stage(render, verdicts.path, config, shard)
    ending()  # the process ends next: skip its last full garbage collection


@component("core")
def collect(parts: Input[List[Dataset]], merged: Output[Dataset]) -> None:  # noqa: UP006
    """Gather every shard's tables into one folder.

    Args:
        parts: one folder per shard

    Returns:
        merged: every shard's files
    """
    from autocomp.store.shards import collect_stage

    collect_stage([p.path for p in parts], merged.path)


@component("core")
def curate(
    render: Input[Dataset],
    verdicts: Input[Dataset],
    captions: Input[Dataset],
    keep_rejected: bool,
    curated: Output[Dataset],
) -> None:
    """Keep the samples that passed validation (B_min, B_ctx, B_paired) and count survival.

    Args:
        render: every shard's render tables
        verdicts: every shard's verdicts
        captions: the captions (their status: accepted, fallback)
        keep_rejected: keep rejected samples too, marked

    Returns:
        curated: curated.parquet and survival.parquet (the paper's Table 3)
    """
    from autocomp.config import CurateConfig
    from autocomp.generation.curate import curate_stage
    from autocomp.pipelines.plumbing import values

    config = CurateConfig(**values("curate", locals()))
    curate_stage(render.path, verdicts.path, curated.path, captions.path, config)


@component("core")
def negatives(
    curated: Input[Dataset], protocol: str, batch_size: int, benchmark: Output[Dataset]
) -> None:
    """Build the Swap and Confusion candidate sets of every curated sample.

    Args:
        curated: the curated samples
        protocol: paper (keep same-scene candidates, flagged) or strict (drop them)
        batch_size: rows per batch

    Returns:
        benchmark: benchmark.parquet, the candidate sets
    """
    import os

    from autocomp.config import NegativesConfig
    from autocomp.pipelines.plumbing import values
    from autocomp.protocol.stages import negatives_stage

    config = NegativesConfig(**values("negatives", locals()), workers=1)  # in process
    os.makedirs(benchmark.path, exist_ok=True)
    negatives_stage(
        os.path.join(curated.path, "curated.parquet"),
        os.path.join(benchmark.path, "benchmark.parquet"),
        config,
    )


@component("core")
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
    """Publish the benchmark to the store: Parquet shards with the images embedded (readable
    by `datasets`), the concept set, the survival table and a dataset card.

    Args:
        benchmark: the candidate sets
        images: every render shard's images
        concepts: the concept set
        curated: the curated samples and the survival table
        store: the store
        name: the benchmark's name
        run_id: the KFP run's id
        unique: publish under <name>-<first 8 hex of the run id> (else under name)

    Returns:
        Output: the name the benchmark was published under
    """
    import os
    import tempfile

    from autocomp.pipelines.definitions.artifacts import join
    from autocomp.pipelines.definitions.plan import published_name
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
