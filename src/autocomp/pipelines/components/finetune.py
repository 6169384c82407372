"""Components of the finetune_models pipeline (thin wrappers around autocomp.finetune)."""

from typing import List  # noqa: UP035  (KFP reads the annotation's name)

from kfp import dsl
from kfp.dsl import Dataset, Input, Model, Output

from autocomp.pipelines.components import image


@dsl.component(base_image=image("core"), install_kfp_package=False)
def split(
    benchmark: Input[Dataset], profile: str, split_seed: int, splits: Output[Dataset]
) -> None:
    import os

    from autocomp.finetune.config import profile as config_of
    from autocomp.finetune.stage import split as split_stage

    split_stage(
        os.path.join(benchmark.path, "benchmark.parquet"),
        splits.path,
        config_of(profile),
        split_seed,
    )


@dsl.component(base_image=image("core"), install_kfp_package=False)
def plan(models: List[str], negatives: List[str], seeds: List[int]) -> List[str]:  # noqa: UP006
    from autocomp.finetune.stage import plan_runs

    return plan_runs(models, negatives, seeds)


@dsl.component(base_image=image("gpu"), install_kfp_package=False)
def train(
    benchmark: Input[Dataset],
    splits: Input[Dataset],
    run: str,
    profile: str,
    checkpoint: Output[Model],
) -> None:
    import os

    from autocomp.finetune.config import profile as config_of
    from autocomp.finetune.stage import parse_run
    from autocomp.finetune.stage import train as train_stage
    from autocomp.process import ending

    model, kind, seed = parse_run(run)
    train_stage(
        model,
        os.path.join(benchmark.path, "benchmark.parquet"),
        os.path.join(splits.path, "split.parquet"),
        kind,
        seed,
        checkpoint.path,
        config_of(profile),
    )
    ending()  # the process ends next: skip its last full garbage collection


@dsl.component(base_image=image("gpu"), install_kfp_package=False)
def score_finetuned(
    checkpoint: Input[Model], splits: Input[Dataset], scores: Output[Dataset]
) -> None:
    import os

    from autocomp.finetune.stage import score_checkpoint
    from autocomp.process import ending

    score_checkpoint(checkpoint.path, os.path.join(splits.path, "evaluation.parquet"), scores.path)
    ending()  # the process ends next: skip its last full garbage collection


@dsl.component(base_image=image("gpu"), install_kfp_package=False)
def score_pretrained(model: str, splits: Input[Dataset], scores: Output[Dataset]) -> None:
    import os

    from autocomp.finetune.stage import score_checkpoint
    from autocomp.process import ending

    score_checkpoint(model, os.path.join(splits.path, "evaluation.parquet"), scores.path)
    ending()  # the process ends next: skip its last full garbage collection


@dsl.component(base_image=image("core"), install_kfp_package=False)
def report(
    finetuned: Input[List[Dataset]],  # noqa: UP006
    pretrained: Input[List[Dataset]],  # noqa: UP006
    checkpoints: Input[List[Model]],  # noqa: UP006
    splits: Input[Dataset],
    store: str,
    name: str,
    seed: int,
    report: Output[Dataset],
) -> str:
    import os

    from autocomp.analysis.finetune import publish_report

    return publish_report(
        [p.path for p in [*finetuned, *pretrained]],
        [c.path for c in checkpoints],
        os.path.join(splits.path, "evaluation.parquet"),
        report.path,
        store,
        name,
        seed,
    )
