"""`autocomp resume RUN_ID`: run again what a lost node (a preempted, drained or reclaimed pod:
an Argo *error*, which KFP's OnFailure retry policy never retries) left failed, through the KFP
API's run retry, and only that: every step resumes from what it committed to the store.

The API: `POST /apis/v2beta1/runs/{run_id}:retry` (backend/api/v2beta1/run.proto `RetryRun`, in
every release from 2.0.0 on; server/run_server.go:621 at 2.0.0 and 2.5.0, :624 at 2.15.0). The
server checks the caller may `retry` runs in the run's namespace (run_server.go retryRun ->
canAccessRun), then resource_manager.go RetryRun (:849 at 2.5.0): the run's workflow must be
Failed or Error (common/util/workflow.go:195 GenerateRetryExecution, "Workflow must be
Failed/Error to retry"), its node status not offloaded (workflow.go:767 CanRetry), its manifest
kept; it deletes the failed pods and resubmits the same Workflow with the failed nodes reset, so
the succeeded ones are not run again. Where the server cannot retry (no such endpoint, an
offloaded or missing workflow), a new run of the same pipeline version with the same parameters
(hence the same store prefix) takes its place, and resumes from the same committed work.

Refused, with nothing sent after the checks: a run that succeeded or is still going, one in
another namespace than the one given, one made by another version of the pipeline than the
local dist/ package (its committed work would not be this package's)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.pipelines.plumbing import PIPELINES

RETRYABLE = ("FAILED", "CANCELED")  # Argo Failed/Error (a terminated run is Failed too)
# What the server answers where it cannot retry but a new run can take the run's place: no
# retry endpoint (404/501), and RetryRun's own refusals of a workflow it cannot resubmit.
CANNOT_RETRY = ("offloaded node status", "Workflow manifest cannot be empty", "Not Implemented")


def _get(client: Any, run_id: str) -> Any:
    from kfp_server_api.exceptions import ApiException

    from autocomp.pipelines.cluster.client import api_message

    try:
        return client._run_api.run_service_get_run(run_id=run_id)
    except ApiException as exc:
        if exc.status == 404:
            raise UsageError("run_id", run_id, "no such run on this KFP API") from None
        raise UsageError("run_id", run_id, f"the KFP API refused it ({api_message(exc)})") from None


def _pipeline_of(client: Any, run: Any, dist: Path) -> tuple[str, Path, str, str]:
    """(pipeline, package, pipeline id, version id) of the local dist/ package the run was made
    from; refused when the run is of another version or of no autocomp pipeline."""
    from autocomp.pipelines.cluster.uploads import _find_version

    reference = run.pipeline_version_reference
    pid = getattr(reference, "pipeline_id", None)
    vid = getattr(reference, "pipeline_version_id", None) or run.pipeline_version_id
    for name in PIPELINES:
        package = dist / f"{name}.yaml"
        if not package.is_file():
            continue
        found_pid, found = _find_version(client, name, package)
        found_vid = found.pipeline_version_id if found is not None else "not uploaded"
        if found_pid is not None and found_pid == pid and found_vid == vid:
            return name, package, found_pid, found_vid
        if found_pid is not None and found_pid == pid:
            raise UsageError("run_id", run.run_id, f"was made by another version of {name} "
                             f"({vid}) than {package} ({found_vid}); resume it with the dist/ "
                             "that made it, or submit a new run")  # fmt: skip
    raise UsageError("run_id", run.run_id, f"was made from no pipeline version in {dist} "
                     "(`autocomp upload` the dist/ that made it)")  # fmt: skip


def resume(
    run_id: str,
    dist: str | Path = "dist",
    note: Callable[[str], None] | None = None,
    **where: Any,
) -> tuple[str, str]:
    """Retry run `run_id` (or, where the server cannot, start a new run in its place); returns
    ("retried", run_id) or ("new run", the new run's id). `where`: endpoint_from's arguments."""
    from kfp_server_api.exceptions import ApiException

    from autocomp.pipelines.cluster.client import api_errors, api_message, connect, endpoint_from

    endpoint = endpoint_from(**where)
    client = connect(endpoint)
    with api_errors(endpoint.host):
        run = _get(client, run_id)
        state = str(run.state or "RUNTIME_STATE_UNSPECIFIED")
        if state == "SUCCEEDED":
            raise UsageError("run_id", run_id, "succeeded: there is nothing to resume")
        if state not in RETRYABLE:
            raise UsageError("run_id", run_id, f"is {state}: resume a run once it has failed")
        experiment = client._experiment_api.experiment_service_get_experiment(
            experiment_id=run.experiment_id
        )
        namespace = getattr(experiment, "namespace", None) or ""
        if endpoint.namespace and namespace and namespace != endpoint.namespace:
            raise UsageError("run_id", run_id, f"belongs to namespace {namespace}, not "
                             f"{endpoint.namespace}; give --namespace {namespace}")  # fmt: skip
        pipeline, _, pid, vid = _pipeline_of(client, run, Path(dist))
        try:
            client._run_api.run_service_retry_run(run_id=run_id)
            return "retried", run_id
        except ApiException as exc:
            why = api_message(exc)
            if exc.status not in (404, 501) and not any(c in why for c in CANNOT_RETRY):
                raise
        if note is not None:
            note(f"the server cannot retry {run_id} ({why}): a new run of {pipeline} with its "
                 "parameters takes its place and resumes from the same store")  # fmt: skip
        params = dict(getattr(run.runtime_config, "parameters", None) or {})
        made = client.run_pipeline(experiment_id=run.experiment_id,
                                   job_name=f"{run.display_name}-resumed", params=params,
                                   pipeline_id=pid, version_id=vid)  # fmt: skip
        return "new run", made.run_id
