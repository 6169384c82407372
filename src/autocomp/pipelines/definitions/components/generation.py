"""Components of the generate_benchmark pipeline. Every output is a folder (Dataset artifact)
holding a table or a small manifest: images, the candidate table and the published benchmark
live in the store (definitions.artifacts), so no step downloads data it does not read."""

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

    from autocomp.pipelines.cluster.plan import drawn
    from autocomp.pipelines.plumbing import rebuild
    from autocomp.protocol.stages import reuse_or_sample

    config = drawn(rebuild("sample", specs=specs, count=count, seed=seed), draw)
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

    from autocomp.generation.caption import caption_stage
    from autocomp.pipelines.cluster.plan import drawn
    from autocomp.pipelines.plumbing import rebuild
    from autocomp.process import ending

    config = rebuild(
        "caption", captioner=captioner, engine=engine, seed=seed, batch_size=batch_size,
        fallback=fallback, settings=settings,
    )  # fmt: skip
    config = drawn(config, draw)
    caption_stage(os.path.join(concepts.path, "concepts.parquet"), captions.path, config)
    ending()  # the process ends next: skip its last full garbage collection


@component("core")
def shard_plan(
    captions: Input[Dataset],
    store: str,
    num_shards: int,
    renderer: str,
    seed: int,
    render_settings: dict,
    render_batch_size: int,
    detector: str,
    segmenter: str,
    vqa: str,
    validate_settings: dict,
    validate_batch_size: int,
    masks: str,
    all_checks: bool,
    work: Output[Dataset],
    draw: str = "",
) -> List[int]:  # noqa: UP006
    """The render/validate shards of the run, and where their work lives in the store.

    Args:
        captions: the captions (their content keys the work)
        store: the store
        num_shards: how many shards (one GPU pod each)
        renderer: the text-to-image model
        seed: the run's seed
        render_settings: renderer settings
        render_batch_size: images per render batch
        detector: the open-vocabulary detector
        segmenter: the segmenter
        vqa: the VQA judge
        validate_settings: detector and segmenter settings, by role
        validate_batch_size: images per validate batch
        masks: sam2 or boxes
        all_checks: run every check on every sample
        draw: folded into the render seed when given (plan.draw_seed), so each draw's work
            has its own key

    Returns:
        work: location.json: the store and the keys of the run's render and validate work
        Output: the shard numbers, 0 to num_shards - 1
    """
    from autocomp.pipelines.cluster.plan import drawn
    from autocomp.pipelines.definitions.artifacts import plan_work
    from autocomp.pipelines.plumbing import rebuild
    from autocomp.store.shards import check_shard_args

    render = rebuild(
        "render", renderer=renderer, seed=seed, settings=render_settings,
        batch_size=render_batch_size, num_shards=num_shards,
    )  # fmt: skip
    validate = rebuild(
        "validate", detector=detector, segmenter=segmenter, vqa=vqa, settings=validate_settings,
        batch_size=validate_batch_size, masks=masks, all_checks=all_checks, num_shards=num_shards,
    )  # fmt: skip
    plan_work(captions.path, store, drawn(render, draw), validate, work.path)
    return check_shard_args(None, num_shards)


@component("gpu")
def render(
    captions: Input[Dataset],
    work: Input[Dataset],
    renderer: str,
    seed: int,
    settings: dict,
    shard: int,
    num_shards: int,
    batch_size: int,
    table: Output[Dataset],
    draw: str = "",
) -> None:
    """Render one shard's images into the store, one seed per concept shared by both
    conditions.

    Args:
        captions: the captions
        work: where the run's work lives in the store (shard_plan)
        renderer: the text-to-image model (generation registry)
        seed: the run's seed (each concept's image seed derives from it)
        settings: renderer settings
        shard: this shard's number
        num_shards: the run's shards
        batch_size: images per batch
        draw: folded into the seed when given (plan.draw_seed)

    Returns:
        table: the shard's render table (its images are in the store)
    """
    from autocomp.pipelines.cluster.plan import drawn
    from autocomp.pipelines.definitions.artifacts import render_shard
    from autocomp.pipelines.plumbing import rebuild
    from autocomp.process import ending

    config = rebuild(
        "render", renderer=renderer, seed=seed, settings=settings, batch_size=batch_size,
        num_shards=num_shards,
    )  # fmt: skip
    config = drawn(config, draw)
    render_shard(captions.path, work.path, config, shard, table.path)
    ending()  # the process ends next: skip its last full garbage collection


@component("gpu")
def validate(
    table: Input[Dataset],
    work: Input[Dataset],
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
    """Check one shard's images (read from the store): objects, background and attributes
    (detector, segmenter and a VQA judge).

    Args:
        table: the shard's render table
        work: where the run's work lives in the store (shard_plan)
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
    from autocomp.pipelines.definitions.artifacts import validate_shard
    from autocomp.pipelines.plumbing import rebuild
    from autocomp.process import ending

    config = rebuild(
        "validate", detector=detector, segmenter=segmenter, vqa=vqa, settings=settings,
        batch_size=batch_size, masks=masks, all_checks=all_checks, num_shards=num_shards,
    )  # fmt: skip
    validate_shard(table.path, work.path, config, shard, verdicts.path)
    ending()  # the process ends next: skip its last full garbage collection


@component("core")
def curate(
    work: Input[Dataset],
    captions: Input[Dataset],
    keep_rejected: bool,
    curated: Output[Dataset],
) -> None:
    """Keep the samples that passed validation (B_min, B_ctx, B_paired) and count survival,
    from every shard's tables in the store.

    Args:
        work: where the run's shards are in the store (shard_plan)
        captions: the captions (their status: accepted, fallback)
        keep_rejected: keep rejected samples too, marked

    Returns:
        curated: curated.parquet and survival.parquet (the paper's Table 3)
    """
    import os
    import tempfile

    from autocomp.generation.curate import curate_stage
    from autocomp.pipelines.definitions.artifacts import gather_shards
    from autocomp.pipelines.plumbing import rebuild

    config = rebuild("curate", keep_rejected=keep_rejected)
    shards = tempfile.mkdtemp(prefix="shards-")
    render, verdicts = os.path.join(shards, "render"), os.path.join(shards, "verdicts")
    gather_shards(work.path, render, verdicts)
    curate_stage(render, verdicts, curated.path, captions.path, config)


@component("core")
def negatives(
    curated: Input[Dataset],
    work: Input[Dataset],
    protocol: str,
    batch_size: int,
    benchmark: Output[Dataset],
) -> None:
    """Build the Swap and Confusion candidate sets of every curated sample (the table goes to
    the store).

    Args:
        curated: the curated samples
        work: where the run's work lives in the store (shard_plan)
        protocol: paper (keep same-scene candidates, flagged) or strict (drop them)
        batch_size: rows per batch

    Returns:
        benchmark: location.json: where the candidate table is in the store
    """
    import os
    import tempfile

    from autocomp.config import with_overrides
    from autocomp.pipelines.definitions.artifacts import store_table
    from autocomp.pipelines.plumbing import rebuild
    from autocomp.protocol.stages import negatives_stage

    config = rebuild("negatives", protocol=protocol, batch_size=batch_size)
    config = with_overrides(config, workers=1)  # in process
    table = os.path.join(tempfile.mkdtemp(prefix="negatives-"), "benchmark.parquet")
    negatives_stage(os.path.join(curated.path, "curated.parquet"), table, config)
    store_table(table, work.path, benchmark.path)


@component("core")
def benchmark_name(name: str, run_id: str, unique: bool) -> str:
    """The name a generate_benchmark run of these parameters publishes under (the publish
    step's own rule, plan.published_name): what generate_and_evaluate scores.

    Args:
        name: the benchmark's name
        run_id: the KFP run's id
        unique: publish under <name>-<first 8 hex of the run id> (else under name)

    Returns:
        Output: the published name
    """
    from autocomp.pipelines.cluster.plan import published_name

    return published_name(name, run_id, unique)


@component("core")
def publish(
    benchmark: Input[Dataset],
    work: Input[Dataset],
    concepts: Input[Dataset],
    curated: Input[Dataset],
    name: str,
    run_id: str,
    unique: bool,
    captioner: str = "",
    renderer: str = "",
    detector: str = "",
    segmenter: str = "",
    vqa: str = "",
) -> str:
    """Publish the benchmark to the store, store to store: Parquet shards with the images
    embedded (readable by `datasets`), the concept set, the survival table and a dataset card
    that names the models that made it (and says when their weights are random).

    Args:
        benchmark: where the candidate table is in the store (negatives)
        work: where the run's images are in the store (shard_plan)
        concepts: the concept set
        curated: the curated samples and the survival table
        name: the benchmark's name
        run_id: the KFP run's id
        unique: publish under <name>-<first 8 hex of the run id> (else under name)
        captioner: the run's captioner (named in the card)
        renderer: the run's text-to-image model (named in the card)
        detector: the run's detector (named in the card)
        segmenter: the run's segmenter (named in the card)
        vqa: the run's VQA judge (named in the card)

    Returns:
        Output: the name the benchmark was published under
    """
    import os

    from autocomp.pipelines.cluster.plan import published_name
    from autocomp.pipelines.definitions.artifacts import publish_run

    return publish_run(
        benchmark.path,
        work.path,
        os.path.join(concepts.path, "concepts.parquet"),
        os.path.join(curated.path, "survival.parquet"),
        published_name(name, run_id, unique),
        {"captioner": captioner, "renderer": renderer, "detector": detector,
         "segmenter": segmenter, "vqa": vqa},
    )  # fmt: skip
