"""Recurring runs by name, through KFP's RecurringRunService (REST v2beta1; kubeflow/pipelines
backend/api/v2beta1/recurring_run.proto, served by backend/src/apiserver/server/job_server.go at
2.15.0): ListRecurringRuns with a `display_name` filter (:362; within a namespace, :181
listJobs), EnableRecurringRun `:enable` (:387), DisableRecurringRun `:disable` (:398) and
DeleteRecurringRun (:410). The same calls exist from 2.3.0 (the v2beta1 API ships with 2.0).

KFP keeps no name unique (`display_name`: "Not unique", recurring_run.proto) and has no update
call: `autocomp schedule` makes its names unique itself (`upsert`): a schedule that is already
there as asked is left alone, one that differs is replaced (the new one created first, then the
old one deleted, so a refused create leaves the old one running), never a second one."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autocomp.errors import UsageError


@dataclass(frozen=True)
class Recurring:
    """One recurring run as `autocomp schedule list` shows it."""

    id: str
    name: str
    status: str  # ENABLED or DISABLED (recurring_run.proto Status)
    schedule: str  # its cron, or `every <N>s` for a periodic one
    pipeline_id: str
    version_id: str
    params: dict[str, Any]
    max_concurrency: str
    no_catchup: bool


def _field(obj: Any, name: str) -> Any:
    """A field of a kfp_server_api model or of a plain dict alike."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _schedule(trigger: Any) -> str:
    cron = _field(_field(trigger, "cron_schedule"), "cron")
    if cron:
        return str(cron)
    interval = _field(_field(trigger, "periodic_schedule"), "interval_second")
    return f"every {interval}s" if interval else "-"


def _recurring(run: Any) -> Recurring:
    reference = _field(run, "pipeline_version_reference")
    return Recurring(
        id=str(_field(run, "recurring_run_id")),
        name=str(_field(run, "display_name")),
        status=str(_field(run, "status") or "STATUS_UNSPECIFIED"),
        schedule=_schedule(_field(run, "trigger")),
        pipeline_id=str(_field(reference, "pipeline_id") or _field(run, "pipeline_id") or ""),
        version_id=str(_field(reference, "pipeline_version_id") or ""),
        params=dict(_field(_field(run, "runtime_config"), "parameters") or {}),
        max_concurrency=str(_field(run, "max_concurrency")),
        no_catchup=bool(_field(run, "no_catchup")),
    )


def listed(client: Any, name: str | None = None, namespace: str | None = None) -> list[Recurring]:
    """Every recurring run (of `name` only, when given) the caller sees in `namespace` (all of
    them in single-user mode: the server ignores the namespace there), page by page."""
    flt = None
    if name is not None:
        predicate = {"operation": "EQUALS", "key": "display_name", "string_value": name}
        flt = json.dumps({"predicates": [predicate]})
    found: list[Recurring] = []
    token = ""
    while True:
        page = client.list_recurring_runs(
            page_token=token, page_size=100, namespace=namespace, filter=flt
        )
        found += [_recurring(r) for r in (page.recurring_runs or [])]
        token = page.next_page_token or ""
        if not token:
            return [r for r in found if name is None or r.name == name]


def named(client: Any, name: str, namespace: str | None) -> list[Recurring]:
    """The recurring runs called `name`; a usage error when there is none (nothing changes)."""
    found = listed(client, name, namespace)
    if not found:
        raise UsageError("name", name, "no recurring run has that name here; "
                         "`autocomp schedule list` shows them")  # fmt: skip
    return found


# what a verb does to one recurring run, by the kfp.Client method that does it
ACTIONS: dict[str, tuple[str, str]] = {
    "pause": ("disable_recurring_run", "paused"),
    "resume": ("enable_recurring_run", "resumed"),
    "delete": ("delete_recurring_run", "deleted"),
}


def manage(client: Any, action: str, name: str, namespace: str | None) -> list[Recurring]:
    """Pause, resume or delete every recurring run called `name`; returns those it changed."""
    method, _ = ACTIONS[action]
    found = named(client, name, namespace)
    for run in found:
        getattr(client, method)(run.id)
    return found


def same(run: Recurring, wanted: Recurring) -> bool:
    """Whether an existing recurring run is already what a schedule asks for."""
    keys = ("schedule", "pipeline_id", "version_id", "max_concurrency", "no_catchup")
    return all(getattr(run, k) == getattr(wanted, k) for k in keys) and run.params == (
        wanted.params
    )


def upsert(
    client: Any,
    wanted: Recurring,
    namespace: str | None,
    create: Callable[[], str],
) -> tuple[str, str]:
    """(id, what was done): `exists` when a recurring run of that name is already `wanted`
    (nothing sent), else `created`, or `replaced <old ids>` (created, then the old deleted)."""
    existing = listed(client, wanted.name, namespace)
    kept = next((run for run in existing if same(run, wanted)), None)
    if kept is not None and len(existing) == 1:
        return kept.id, "exists"
    made = create()
    for run in existing:
        client.delete_recurring_run(run.id)
    if not existing:
        return made, "created"
    return made, "replaced " + ", ".join(run.id for run in existing)
