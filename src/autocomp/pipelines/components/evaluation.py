"""Components of the evaluate_models pipeline."""

from typing import List, NamedTuple  # noqa: UP035  (KFP reads the annotation's name)

from kfp import dsl
from kfp.dsl import HTML, Dataset, Input, Metrics, Output

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
def select_models(
    requested: List[str],  # noqa: UP006
    members: List[str],  # noqa: UP006
    everything: List[str],  # noqa: UP006
    known: List[str],  # noqa: UP006
    left_out: dict,
) -> NamedTuple("Selected", [("models", List[str]), ("count", int)]):  # noqa: UP006
    from collections import namedtuple

    from autocomp.pipelines.plan import ALL, select

    if requested == [ALL]:
        for model, why in left_out.items():
            print(f"not in 'all': {model}: {why}")
    chosen = select(requested, members, everything, known)
    return namedtuple("Selected", ["models", "count"])(chosen, len(chosen))


@dsl.component(base_image=image("gpu"), install_kfp_package=False)
def score(
    benchmark: Input[Dataset],
    model: str,
    store: str,
    name: str,
    registry: str,
    scores: Output[Dataset],
) -> None:
    import os
    import tempfile

    from autocomp.process import ending
    from autocomp.scoring import score as score_models
    from autocomp.scoring.registry import REGISTRY_ENV
    from autocomp.store.catalog.benchmarks import open_benchmark

    path = os.path.join(tempfile.mkdtemp(prefix="registry-"), "registry.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(registry)  # the compiling machine's entry, not the image's
    os.environ[REGISTRY_ENV] = path
    table = open_benchmark(os.path.join(benchmark.path, "benchmark.parquet"))
    results = f"results/{name}" if store else None  # each run published as results/<name>/<model>
    score_models([model], table, scores.path, store=store or None, results=results)
    ending()  # the process ends next: skip its last full garbage collection


@dsl.component(base_image=image("core"), install_kfp_package=False)
def collect_scores(parts: Input[List[Dataset]], results: Output[Dataset]) -> None:  # noqa: UP006
    from autocomp.store.catalog.runs import collect_runs

    collect_runs([p.path for p in parts], results.path)


@dsl.component(base_image=image("core"), install_kfp_package=False)
def report(
    store: str,
    name: str,
    seed: int,
    tables: Output[Dataset],
    page: Output[HTML],
    accuracy: Output[Metrics],
) -> None:
    from autocomp.pipelines.report_outputs import write_report_outputs

    write_report_outputs(store, name, seed, tables.path, page.path, accuracy.log_metric)
