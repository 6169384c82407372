"""Talk to a Kubeflow Pipelines endpoint through kfp.Client (REST API v2beta1):
upload or version the compiled pipelines, create a recurring run, submit one run.

Versions are content-addressed: `<package version>-<first 12 hex of the YAML's SHA-256>`, so
uploading an unchanged pipeline is a no-op and any change becomes a new version. (KFP names a new
pipeline's first version after the pipeline; its content name goes in the pipeline's
description, `... [version <name>]`, so that one is recognised too.)
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from autocomp import __version__
from autocomp.errors import UsageError

DISPLAY_NAMES = {
    "generate_benchmark": "autocomp-generate-benchmark",
    "evaluate_models": "autocomp-evaluate-models",
    "finetune_models": "autocomp-finetune-models",
}


def connect(host: str) -> Any:
    import warnings

    import kfp

    try:
        with warnings.catch_warnings():  # "only works with KFP v2.0.0-beta.2 and later": known
            warnings.simplefilter("ignore", FutureWarning)
            return kfp.Client(host=host)
    except Exception as exc:  # the client raises plain exceptions for unreachable hosts
        raise UsageError(
            "--host", host, f"no KFP API answers there ({type(exc).__name__}: {str(exc)[:120]})"
        ) from exc


def version_name(package: Path) -> str:
    return f"{__version__}-{hashlib.sha256(package.read_bytes()).hexdigest()[:12]}"


def _versions(client: Any, pipeline_id: str) -> list[Any]:
    response = client.list_pipeline_versions(
        pipeline_id=pipeline_id, page_size=100, sort_by="created_at desc"
    )
    return list(response.pipeline_versions or [])


def upload(client: Any, pipeline: str, package: Path) -> dict[str, str]:
    """Create the pipeline (first upload) or add a version; returns ids and what was done."""
    name = DISPLAY_NAMES[pipeline]
    version = version_name(package)
    pipeline_id = client.get_pipeline_id(name)
    if pipeline_id is None:
        created = client.upload_pipeline(
            str(package), pipeline_name=name, description=f"autocomp {pipeline} [version {version}]"
        )
        pipeline_id = created.pipeline_id
        latest = _versions(client, pipeline_id)
        return {
            "pipeline_id": pipeline_id,
            "version_id": latest[0].pipeline_version_id,
            "version": latest[0].display_name,
            "action": "created",
        }
    first = f"[version {version}]" in (client.get_pipeline(pipeline_id).description or "")
    for v in _versions(client, pipeline_id):
        if v.display_name == version or (first and v.display_name == name):
            return {
                "pipeline_id": pipeline_id,
                "version_id": v.pipeline_version_id,
                "version": version,
                "action": "unchanged",
            }
    made = client.upload_pipeline_version(
        str(package), pipeline_version_name=version, pipeline_id=pipeline_id
    )
    return {
        "pipeline_id": pipeline_id,
        "version_id": made.pipeline_version_id,
        "version": version,
        "action": "versioned",
    }


def _latest(client: Any, pipeline: str) -> tuple[str, str]:
    pipeline_id = client.get_pipeline_id(DISPLAY_NAMES[pipeline])
    if pipeline_id is None:
        raise UsageError("--pipeline", pipeline, "is not uploaded there; run `autocomp upload`")
    versions = _versions(client, pipeline_id)
    return pipeline_id, versions[0].pipeline_version_id


def schedule(
    client: Any,
    pipeline: str,
    job_name: str,
    cron: str,
    params: dict[str, Any],
    experiment: str = "autocomp",
    max_concurrency: int = 1,
) -> str:
    """A recurring run of the latest uploaded version; returns its id."""
    fields = cron.split()
    if len(fields) != 6:
        raise UsageError(
            "--cron",
            cron,
            "KFP cron has 6 fields: second minute hour day month "
            "weekday (e.g. '0 0 3 * * 1' = Mondays 03:00)",
        )
    if max_concurrency < 1:
        raise UsageError("--max-concurrency", max_concurrency, "must be at least 1")
    pipeline_id, version_id = _latest(client, pipeline)
    experiment_id = client.create_experiment(experiment).experiment_id
    made = client.create_recurring_run(
        experiment_id=experiment_id,
        job_name=job_name,
        cron_expression=cron,
        max_concurrency=max_concurrency,
        params=params,
        pipeline_id=pipeline_id,
        version_id=version_id,
        enabled=True,
    )
    return made.recurring_run_id


def submit(
    client: Any, pipeline: str, job_name: str, params: dict[str, Any], experiment: str = "autocomp"
) -> str:
    """One run of the latest uploaded version; returns its id."""
    pipeline_id, version_id = _latest(client, pipeline)
    experiment_id = client.create_experiment(experiment).experiment_id
    run = client.run_pipeline(
        experiment_id=experiment_id,
        job_name=job_name,
        params=params,
        pipeline_id=pipeline_id,
        version_id=version_id,
    )
    return run.run_id
