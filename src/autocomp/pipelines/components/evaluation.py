"""Components of the evaluate_models pipeline."""

from typing import List  # noqa: UP035  (KFP reads the annotation's name)

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from autocomp.pipelines.components import image


@dsl.component(base_image=image("core"), install_kfp_package=False)
def fetch(store: str, name: str, benchmark: Output[Dataset]) -> None:
    import os
    import tempfile

    from autocomp.store.publish import fetch_benchmark

    os.makedirs(benchmark.path, exist_ok=True)
    fetch_benchmark(
        store,
        name,
        tempfile.mkdtemp(prefix="fetch-"),
        os.path.join(benchmark.path, "benchmark.parquet"),
    )


@dsl.component(base_image=image("core"), install_kfp_package=False)
def select_models(requested: List[str], gpus: int) -> List[str]:  # noqa: UP006
    from autocomp.scoring.registry import models_for

    return models_for(requested, gpus)


@dsl.component(base_image=image("gpu"), install_kfp_package=False)
def score(
    benchmark: Input[Dataset], model: str, store: str, name: str, scores: Output[Dataset]
) -> None:
    import os

    from autocomp.scoring.stage import score_model

    score_model(model, os.path.join(benchmark.path, "benchmark.parquet"), scores.path, store, name)


@dsl.component(base_image=image("core"), install_kfp_package=False)
def collect_scores(parts: Input[List[Dataset]], results: Output[Dataset]) -> None:  # noqa: UP006
    from autocomp.scoring.stage import collect_runs

    collect_runs([p.path for p in parts], results.path)


@dsl.component(base_image=image("core"), install_kfp_package=False)
def report(store: str, name: str, seed: int, report: Output[Dataset]) -> str:
    from autocomp.analysis.report import report_from_store

    done = report_from_store(store, name, report.path, seed)
    return str(done["html"])
