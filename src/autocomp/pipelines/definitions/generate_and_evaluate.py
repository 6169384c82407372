"""generate_and_evaluate: generate_benchmark, then evaluate_models on the benchmark it has just
published, as one pipeline (the whole loop of a recurring run: each scheduled draw ends with
scores and a report in the store).

Both pipelines are nested as they are (a pipeline used as a component compiles into a sub-DAG
of the same spec: kfp `sdk/python/test_data/pipelines/pipeline_in_pipeline.py` at 2.3.0; the
2.15.0 backend's compiled-workflow tests run it, `test_data/compiled-workflows/
pipeline_in_pipeline.yaml`), so one run id, one cache and one failure state cover both: a
failed score step fails the run inside evaluate_models, and the benchmark generate_benchmark
published stays in the store.

evaluate_models does not read generate_benchmark's output: a sub-DAG's output parameter is
resolved by the driver only from 2.4.0 (`resolveUpstreamParameters`, backend/src/v2/driver/
driver.go:1368 at 2.4.0, #11196); 2.3.0 fails such a task with "cannot find output parameter
key" (driver.go:1156 at 2.3.0, #10039). A top-level `benchmark_name` step computes the name by
the publish step's own rule (plan.published_name, from the same name, run id and
unique_name) and evaluate_models runs after generate_benchmark: the same name on every
supported backend. Every other parameter is the nested pipelines' own (plumbing.CHAINED),
`store` shared."""

from __future__ import annotations

from typing import Any

from autocomp.pipelines import plumbing
from autocomp.pipelines.definitions.builder import Build


def build(cluster: bool = True) -> Any:
    """The pipeline; cluster=False for the local run (see builder.Build)."""
    from kfp import dsl

    from autocomp.pipelines.definitions import evaluate_models, generate_benchmark
    from autocomp.pipelines.definitions.components import generation as c

    generate = generate_benchmark.build(cluster)
    evaluate = evaluate_models.build(cluster)
    b = Build(cluster)

    @b.pipeline(
        "generate_and_evaluate",
        "Generate and publish an autocomp benchmark, then score registered models on it and "
        "report (the whole loop of a recurring run).",
        returns=dsl.HTML,
    )
    def generate_and_evaluate(p: Any) -> Any:
        own = {x.name: p[x.name] for x in plumbing.parameters("generate_benchmark")}
        published = generate(**own)
        published.set_display_name("generate_benchmark")
        named = b.step(
            c.benchmark_name,
            "benchmark_name",
            name=p["name"],
            run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            unique=p["unique_name"],
        )
        given = {x.name: p[x.name] for x in plumbing.parameters("evaluate_models")
                 if x.name not in plumbing.CHAIN_FED}  # fmt: skip
        scored = evaluate(name=named.output, **given).after(published)
        scored.set_display_name("evaluate_models")
        return scored.output

    return generate_and_evaluate
