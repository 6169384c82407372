"""Components of the evaluate_models pipeline."""

from typing import List, NamedTuple  # noqa: UP035  (KFP reads the annotation's name)

from kfp.dsl import HTML, Dataset, Metrics, Output

from autocomp.pipelines.definitions.components import component


@component("core")
def select_models(
    requested: List[str],  # noqa: UP006
    members: List[str],  # noqa: UP006
    everything: List[str],  # noqa: UP006
    known: List[str],  # noqa: UP006
    left_out: dict,
    planned: dict,
    score_ranges: int,
) -> NamedTuple("Selected", [("models", List[str]), ("count", int), ("items", List[str])]):  # type: ignore[valid-type]  # noqa: UP006, E501  (KFP reads the functional form)
    """The requested models that belong to one resource class, and the score pods they need.

    Args:
        requested: the run's models parameter (names, or [all])
        members: the models of this class (decided at compile time)
        everything: what [all] means
        known: every model of every class
        left_out: models [all] leaves out, with why
        planned: part ranges per model, from the capacity plan at compile time
        score_ranges: part ranges per model (0: the planned ones)

    Returns:
        models: the chosen models of this class
        count: how many (0: the class schedules nothing)
        items: one per score pod: a model, or <model>@<k>-of-<K> (range k of its K ranges)
    """
    from collections import namedtuple

    from autocomp.pipelines.cluster.plan import ALL, select
    from autocomp.scoring.ranges import loop_items

    if requested == [ALL]:
        for model, why in left_out.items():
            print(f"not in 'all': {model}: {why}")
    chosen = select(requested, members, everything, known)
    items = [i for m in chosen for i in loop_items(m, score_ranges or planned.get(m, 1))]
    Selected = namedtuple("Selected", ["models", "count", "items"])  # noqa: PYI024
    return Selected(chosen, len(chosen), items)


@component("gpu")
def score(
    model: str,
    store: str,
    name: str,
    registry: str,
    blind: str,
    choice_negatives: int,
    choice_seed: int,
    limit: int,
    batch_size: int,
    max_candidates: int,
    scores: Output[Dataset],
) -> None:
    """Score one model (or one range of its parts) on the published benchmark, read from the
    store as it goes; commit each part to the store as it is written (a retried step resumes
    from them) and publish the run as results/<name>/<model> (a run already published there is
    fetched instead; a range publishes nothing: collect merges the ranges).

    Args:
        model: the model's registered name, or <model>@<k>-of-<K>: range k of K of its parts
        store: the store
        name: the benchmark's name
        registry: the model's registry entry, from the compiling machine
        blind: empty (with the image), likelihood or choice (paper A.8, generative models)
        choice_negatives: negatives shown per blind-choice item
        choice_seed: seed of the blind-choice options
        limit: score the first N items (0: every item)
        batch_size: candidate texts per forward pass (0: the backend's own)
        max_candidates: candidates per written part

    Returns:
        scores: <model>/ (run.json, scores, predictions, summary) and summary.parquet
    """
    import dataclasses
    import os
    import tempfile

    from autocomp.pipelines.plumbing import rebuild
    from autocomp.process import ending
    from autocomp.scoring import score as score_models
    from autocomp.scoring.ranges import split_item
    from autocomp.scoring.registry import get_model
    from autocomp.store.catalog.benchmarks import open_published

    config = rebuild(
        "score", blind=blind, choice_negatives=choice_negatives, choice_seed=choice_seed,
        limit=limit, batch_size=batch_size, max_candidates=max_candidates,
    )  # fmt: skip
    model, part_range = split_item(model)  # one pod of a model scored in ranges
    config = dataclasses.replace(config, part_range=part_range)
    path = os.path.join(tempfile.mkdtemp(prefix="registry-"), "registry.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(registry)  # the compiling machine's entry, not the image's
    entry = get_model(model, path)  # scored as this entry, whatever the image's registry says
    source = open_published(store, name)  # streamed from the store: nothing fetched first
    results = f"results/{name}"  # each run published as results/<name>/<model>
    score_models([entry], source, scores.path, config, store=store, results=results)
    ending()  # the process ends next: skip its last full garbage collection


@component("core")
def collect_scores(
    store: str,
    name: str,
    models: List[str],  # noqa: UP006
    registry: str,
    blind: str,
    choice_negatives: int,
    choice_seed: int,
    limit: int,
    batch_size: int,
    max_candidates: int,
    results: Output[Dataset],
) -> None:
    """Merge each model scored in part ranges into its published run, then one summary over
    the score runs of a resource class, read from the store.

    Args:
        store: the store
        name: the benchmark's name (its runs: results/<name>/<model>)
        models: the models of this class the run scored
        registry: the models' registry entries, from the compiling machine
        blind: the score steps' blind mode
        choice_negatives: the score steps' negatives per blind-choice item
        choice_seed: the score steps' blind-choice seed
        limit: the score steps' item limit (0: every item)
        batch_size: the score steps' batch size (0: the backend's own)
        max_candidates: the score steps' candidates per written part

    Returns:
        results: summary.parquet over every model
    """
    from autocomp.pipelines.definitions.artifacts import collect_results, merge_ranges, use_registry
    from autocomp.pipelines.plumbing import rebuild

    config = rebuild(
        "score",
        blind=blind,
        choice_negatives=choice_negatives,
        choice_seed=choice_seed,
        limit=limit,
        batch_size=batch_size,
        max_candidates=max_candidates,
    )  # fmt: skip  (what the score steps were given)
    use_registry(registry)
    merge_ranges(store, name, models, config)
    collect_results(store, name, models, results.path)


@component("core")
def report(
    store: str,
    name: str,
    seed: int,
    tables: Output[Dataset],
    page: Output[HTML],
    accuracy: Output[Metrics],
) -> None:
    """The report over every run published for the benchmark.

    Args:
        store: the store
        name: the benchmark's name
        seed: the bootstrap seed of the intervals

    Returns:
        tables: the report's tables (CSV, Parquet, LaTeX)
        page: the report (HTML, shown in the run's page)
        accuracy: one accuracy per model x family x N x condition x set
    """
    from autocomp.pipelines.definitions.report_outputs import write_report_outputs

    write_report_outputs(store, name, seed, tables.path, page.path, accuracy.log_metric)
