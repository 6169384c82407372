"""Components of the finetune_models pipeline (thin wrappers around autocomp.finetune, with the
store I/O of definitions.finetune_data). The split and train steps take every fine-tuning
setting (FinetuneConfig's fields, recorded in their outputs); the run's settings are resolved
when it is compiled or submitted. The benchmarks are read from the store, never passed as
artifacts."""

from typing import List  # noqa: UP035  (KFP reads the annotation's name)

from kfp.dsl import Dataset, Input, Model, Output

from autocomp.pipelines.definitions.components import component


@component("core")
def split(
    store: str,
    name: str,
    split_seed: int,
    family: str,
    n: int,
    condition: str,
    heldout_fraction: float,
    validation_fraction: float,
    k: int,
    peak_lr: float,
    betas: list,
    weight_decay: float,
    warmup_steps: int,
    steps: int,
    batch_cosine: int,
    batch_sigmoid: int,
    micro_batch: int,
    eval_every: int,
    patience: int,
    seeds: list,
    mixed_precision: bool,
    splits: Output[Dataset],
) -> None:
    """Split the benchmark's concepts (train / validation / held-out) and write the evaluation
    benchmark (every row not trained or validated on) into the store. The split reads five
    settings (family to validation_fraction); it takes every one because it names the run's
    work, `work/finetune/<digest of benchmark, every setting, split seed>`, under which the
    train state, curves and score runs live (finetune_data.split_to_store), and records them
    in split.parquet: runs with other settings never share results, and KFP caches the step
    per settings.

    Args:
        store: the store
        name: the published benchmark's name
        split_seed: seed of the concept split
        family: the training partition's family (paper: color)
        n: its N (paper: 2)
        condition: its condition (paper: minimal)
        heldout_fraction: source concepts held out for evaluation
        validation_fraction: training concepts kept for early stopping
        k: hard negatives per positive
        peak_lr: AdamW's peak learning rate
        betas: AdamW's betas
        weight_decay: AdamW's weight decay (weight matrices only)
        warmup_steps: linear warm-up steps
        steps: optimizer steps
        batch_cosine: positives per step, CLIP family
        batch_sigmoid: positives per step, SigLIP family
        micro_batch: positives encoded at once with gradients
        eval_every: steps between validation evaluations
        patience: evaluations without improvement before stopping
        seeds: the run's training seeds
        mixed_precision: bf16 autocast on a GPU

    Returns:
        splits: split.parquet, evaluation-rows.parquet and location.json (the evaluation
            benchmark in the store)
    """
    from autocomp.pipelines.definitions.finetune_data import split_to_store
    from autocomp.pipelines.plumbing import rebuild

    config = rebuild(
        "finetune", family=family, n=n, condition=condition, heldout_fraction=heldout_fraction,
        validation_fraction=validation_fraction, k=k, peak_lr=peak_lr, betas=betas,
        weight_decay=weight_decay, warmup_steps=warmup_steps, steps=steps,
        batch_cosine=batch_cosine, batch_sigmoid=batch_sigmoid, micro_batch=micro_batch,
        eval_every=eval_every, patience=patience, seeds=seeds, mixed_precision=mixed_precision,
    )  # fmt: skip
    split_to_store(store, name, config, split_seed, splits.path)


@component("core")
def plan(models: List[str], negatives: List[str], seeds: List[int]) -> List[str]:  # noqa: UP006
    """The training runs: one per model x negatives kind x seed.

    Args:
        models: the models to fine-tune
        negatives: the hard-negative kinds (swap, confusion)
        seeds: the training seeds

    Returns:
        Output: one run name per model x kind x seed
    """
    from autocomp.finetune.stage import plan_runs

    return plan_runs(models, negatives, seeds)


@component("gpu")
def train(
    name: str,
    splits: Input[Dataset],
    run: str,
    family: str,
    n: int,
    condition: str,
    heldout_fraction: float,
    validation_fraction: float,
    k: int,
    peak_lr: float,
    betas: list,
    weight_decay: float,
    warmup_steps: int,
    steps: int,
    batch_cosine: int,
    batch_sigmoid: int,
    micro_batch: int,
    eval_every: int,
    patience: int,
    seeds: list,
    mixed_precision: bool,
    checkpoint: Output[Model],
) -> None:
    """Fine-tune one model with one kind of hard negatives and one seed, its state committed to
    the store at every evaluation (a preempted step resumes from the last).

    Args:
        name: the published benchmark's name
        splits: the concept split
        run: the run (model, negatives kind and seed), as plan names it
        family: the training partition's family (paper: color)
        n: its N (paper: 2)
        condition: its condition (paper: minimal)
        heldout_fraction: source concepts held out for evaluation
        validation_fraction: training concepts kept for early stopping
        k: hard negatives per positive
        peak_lr: AdamW's peak learning rate
        betas: AdamW's betas
        weight_decay: AdamW's weight decay (weight matrices only)
        warmup_steps: linear warm-up steps
        steps: optimizer steps
        batch_cosine: positives per step, CLIP family
        batch_sigmoid: positives per step, SigLIP family
        micro_batch: positives encoded at once with gradients
        eval_every: steps between validation evaluations
        patience: evaluations without improvement before stopping
        seeds: the run's training seeds
        mixed_precision: bf16 autocast on a GPU

    Returns:
        checkpoint: the fine-tuned checkpoint (open_clip local-dir) and its registry entry
    """
    from autocomp.pipelines.definitions.finetune_data import train_resumable
    from autocomp.pipelines.plumbing import rebuild
    from autocomp.process import ending

    config = rebuild(
        "finetune", family=family, n=n, condition=condition, heldout_fraction=heldout_fraction,
        validation_fraction=validation_fraction, k=k, peak_lr=peak_lr, betas=betas,
        weight_decay=weight_decay, warmup_steps=warmup_steps, steps=steps,
        batch_cosine=batch_cosine, batch_sigmoid=batch_sigmoid, micro_batch=micro_batch,
        eval_every=eval_every, patience=patience, seeds=seeds, mixed_precision=mixed_precision,
    )  # fmt: skip
    train_resumable(name, splits.path, run, config, checkpoint.path)
    ending()  # the process ends next: skip its last full garbage collection


@component("gpu")
def score_finetuned(
    checkpoint: Input[Model], splits: Input[Dataset], run: str, scores: Output[Dataset]
) -> None:
    """Score a fine-tuned checkpoint on the evaluation benchmark (read from the store) and
    publish the run to the store.

    Args:
        checkpoint: the checkpoint
        splits: the split (its evaluation benchmark)
        run: the training run, as plan names it

    Returns:
        scores: the score run, marked for Table 8
    """
    from autocomp.pipelines.definitions.finetune_data import run_slug, score_to_store
    from autocomp.process import ending

    score_to_store(checkpoint.path, splits.path, scores.path, run_slug(run))
    ending()  # the process ends next: skip its last full garbage collection


@component("gpu")
def score_pretrained(model: str, splits: Input[Dataset], scores: Output[Dataset]) -> None:
    """Score a model before fine-tuning on the evaluation benchmark (Table 8's baseline, read
    from the store) and publish the run to the store.

    Args:
        model: the model's registered name
        splits: the split (its evaluation benchmark)

    Returns:
        scores: the score run, marked pretrained
    """
    from autocomp.pipelines.definitions.finetune_data import score_to_store
    from autocomp.process import ending

    score_to_store(model, splits.path, scores.path, f"{model}-pretrained")
    ending()  # the process ends next: skip its last full garbage collection


@component("core")
def report(
    runs: List[str],  # noqa: UP006
    models: List[str],  # noqa: UP006
    splits: Input[Dataset],
    store: str,
    name: str,
    seed: int,
    report: Output[Dataset],
) -> str:
    """Table 8 (the fine-tuning gains with their intervals) and the whole report, published to
    the store as finetune/<name>/report-<hash>; the score runs and training curves are read
    from the store.

    Args:
        runs: the training runs (plan's names)
        models: the pretrained models scored
        splits: the split (its evaluation benchmark)
        store: the store
        name: the benchmark's name
        seed: the bootstrap seed

    Returns:
        report: table8 and finetune_deltas (Parquet, CSV), report.html, full/index.html
        Output: the Table 8 page's path
    """
    import os
    import tempfile

    from autocomp.analysis.finetune import publish_report
    from autocomp.pipelines.definitions.finetune_data import gather_results, run_slug

    slugs = [run_slug(r) for r in runs] + [f"{m}-pretrained" for m in models]
    found = gather_results(splits.path, slugs, tempfile.mkdtemp(prefix="finetune-"))
    return publish_report(
        found["runs"],
        found["checkpoints"],
        os.path.join(splits.path, "evaluation-rows.parquet"),
        report.path,
        store,
        name,
        seed,
    )
