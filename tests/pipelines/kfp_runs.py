"""What runs a KFP stand-in's run here: the uploaded package's own compiled YAML under kfp.local
(each component a subprocess of this Python: the lightweight-component command KFP's pods run),
the part of a cluster no test can start (Argo and its pods) stood in for by this machine.

What the cluster does before a pod runs, done here the same way:
- the run id reaches the steps: the API server and the ScheduledWorkflow controller replace
  `{{workflow.uid}}` in the whole workflow (template/v2_template.go ReplaceUID; crd/controller/
  scheduledworkflow/util/scheduled_workflow.go:183 at 2.15.0), and from 2.14 the driver
  resolves `{{$.pipeline_job_uuid}}` (backend/src/v2/driver/resolve.go:424 at 2.15.0);
- the platform's volumes: each executor's emptyDir and PVC mount paths (the kubernetes platform
  spec, the package's second document) become folders under the run's root, and the step
  environment values under them point there (a pod sees its volume at the mount path).
Images, resources and placement have no effect here (kfp.local ignores them); retries are taken
out (Argo's backoff is minutes; a step that fails here fails as it would after its retries).

`execute(docs, params, run_id, root)` -> (state, the failed task chain innermost first)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

RUN_ID_PLACEHOLDERS = ("{{workflow.uid}}", "{{$.pipeline_job_uuid}}")


def _mounts(docs: list[dict]) -> list[str]:
    if len(docs) < 2:
        return []
    executors = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    found = set()
    for config in executors.values():
        for key in ("emptyDirMounts", "pvcMount"):
            found |= {m["mountPath"] for m in config.get(key, [])}
    return sorted(found, key=len, reverse=True)


def _without_retries(node: object) -> None:
    if isinstance(node, dict):
        node.pop("retryPolicy", None)
        for value in node.values():
            _without_retries(value)
    elif isinstance(node, list):
        for value in node:
            _without_retries(value)


def localized(docs: list[dict], run_id: str, root: Path) -> str:
    """The pipeline spec as this machine runs it: the run id in place of its placeholders and
    the executors' mount paths under `root`."""
    spec = yaml.safe_load(yaml.safe_dump(docs[0]))
    mounts = _mounts(docs)
    _without_retries(spec)
    for executor in spec["deploymentSpec"]["executors"].values():
        for env in executor.get("container", {}).get("env", []):
            for mount in mounts:
                if env["value"] == mount or env["value"].startswith(mount + "/"):
                    local = root / "volumes" / mount.strip("/")
                    env["value"] = str(local) + env["value"][len(mount) :]
                    local.mkdir(parents=True, exist_ok=True)
                    break
    text = yaml.safe_dump(spec)
    for placeholder in RUN_ID_PLACEHOLDERS:
        text = text.replace(placeholder, run_id)
    return text


def execute(docs: list[dict], params: dict, run_id: str, root: Path) -> tuple[str, list[str]]:
    """Run the package with `params` to its end: ("SUCCEEDED", []) or ("FAILED", the failed
    task chain from kfp.local's "Inner task failed: 'a' inside 'b'", innermost first)."""
    from kfp import components, local

    root.mkdir(parents=True, exist_ok=True)
    # the run's own cache: a retried run (the same root) finds its succeeded steps there and
    # runs the failed ones, as KFP's RetryRun resets only the failed nodes (backend/src/common/
    # util/workflow.go:195 GenerateRetryExecution, cited in cluster/resume.py); steps compiled
    # with caching off run again here (cheap and stateless: select_models, collect, report)
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root / "kfp"),
               enable_caching=True, cache_root=str(root / "cache"))  # fmt: skip
    pipeline = components.load_component_from_text(localized(docs, run_id, root))
    try:
        pipeline(**params)
    except RuntimeError as exc:
        plain = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
        chain = plain.partition("Inner task failed:")[2]
        return "FAILED", re.findall(r"'([^']+)'", chain)
    return "SUCCEEDED", []
