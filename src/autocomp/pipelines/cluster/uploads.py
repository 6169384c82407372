"""Uploaded pipelines and their versions on a KFP API: create a pipeline or add a version,
and find the uploaded version whose content is a local package (cluster.packages.version_name:
`<package version>-<12 hex of the YAML's SHA-256>`). KFP names a new pipeline's first version
after the pipeline; its content name goes in the pipeline's description, `... [version
<name>]`, so that one is recognised too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.pipelines.cluster.packages import version_name
from autocomp.pipelines.plumbing import DISPLAY_NAMES


def _versions(client: Any, pipeline_id: str) -> list[Any]:
    found: list[Any] = []
    token = ""
    while True:
        response = client.list_pipeline_versions(
            pipeline_id=pipeline_id, page_token=token, page_size=100, sort_by="created_at desc"
        )
        found.extend(response.pipeline_versions or [])
        token = getattr(response, "next_page_token", None) or ""
        if not token:
            return found


def _find_version(client: Any, pipeline: str, package: Path) -> tuple[str | None, Any]:
    """(pipeline id or None, the uploaded version with this package's content or None)."""
    name = DISPLAY_NAMES[pipeline]
    version = version_name(package)
    pipeline_id = client.get_pipeline_id(name)
    if pipeline_id is None:
        return None, None
    first = f"[version {version}]" in (client.get_pipeline(pipeline_id).description or "")
    for v in _versions(client, pipeline_id):
        if v.display_name == version or (first and v.display_name == name):
            return pipeline_id, v
    return pipeline_id, None


def upload(client: Any, pipeline: str, package: Path) -> dict[str, str]:
    """Create the pipeline (first upload) or add a version; returns ids and what was done."""
    name = DISPLAY_NAMES[pipeline]
    version = version_name(package)
    pipeline_id, found = _find_version(client, pipeline, package)
    if pipeline_id is None:
        created = client.upload_pipeline(
            str(package), pipeline_name=name, description=f"autocomp {pipeline} [version {version}]"
        )
        latest = _versions(client, created.pipeline_id)
        return {
            "pipeline_id": created.pipeline_id,
            "version_id": latest[0].pipeline_version_id,
            "version": version,
            "action": "created",
        }
    if found is not None:
        return {
            "pipeline_id": pipeline_id,
            "version_id": found.pipeline_version_id,
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


def pinned_version(client: Any, pipeline: str, package: Path) -> tuple[str, str]:
    """(pipeline id, version id) of the uploaded version whose content is `package`."""
    pipeline_id, found = _find_version(client, pipeline, package)
    if pipeline_id is None:
        raise UsageError("pipeline", pipeline, "is not uploaded there; run `autocomp upload`")
    if found is None:
        raise UsageError(
            "package",
            str(package),
            f"its version {version_name(package)} is not uploaded there (the server has other "
            "versions); run `autocomp upload` first, or point --dist at the uploaded package",
        )
    return pipeline_id, found.pipeline_version_id
