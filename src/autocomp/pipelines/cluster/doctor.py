"""`autocomp doctor`: a preflight a user runs before the first run on a cluster. One line per
check, PASS / FAIL / SKIP, each FAIL with its fix:

- the KFP API answers, and its version is at least the minimum (client.MIN_KFP);
- both pipelines are uploaded in the version of the local dist/ (what submit/schedule will run);
- the store is reachable and writable (a small probe folder, doctor/probe, is written);
- with the `kubernetes` client and a kubeconfig: the Secrets and the model-cache volume exist in
  the namespace, and for every resource class the requested models need, a GPU node with enough
  GPUs of enough memory exists. Without them, the same items are named for the user to check.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from autocomp.pipelines.cluster.client import DISPLAY_NAMES, MIN_KFP, Endpoint
from autocomp.pipelines.cluster.resources import (
    GPU_MEMORY_LABEL,
    HF_SECRET,
    HF_SECRET_KEYS,
    MODEL_CACHE_PVC,
    SECRET,
    SECRET_KEYS,
    ScoreClass,
)
from autocomp.pipelines.plumbing import DEFAULT_STORE


class Report:
    def __init__(self) -> None:
        self.failed = 0

    def line(self, status: str, what: str, detail: str) -> None:
        self.failed += status == "FAIL"
        print(f"{status:4} {what}: {detail}")


def kfp_version(tag: str | None) -> tuple[int, ...] | None:
    """(major, minor) of a KFP tag such as `2.14.3` or `v2.15.0-rc.1`; None if it has none."""
    found = re.match(r"v?(\d+)\.(\d+)", tag or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def healthz(client: Any) -> dict[str, Any]:
    """The server's version and mode. The v2beta1 healthz answer has no version (its client
    model keeps only multi_user); the v1beta1 one, which every KFP 2 server still serves, has
    `tag_name`. Sent through the client's own API client, so token, cookies and CA apply."""
    api = client._healthz_api.api_client  # kfp.Client exposes no v1beta1 healthz call
    return api.call_api(
        "/apis/v1beta1/healthz",
        "GET",
        response_type="object",
        auth_settings=["Bearer"],
        _return_http_data_only=True,
    )


def check_kfp(report: Report, endpoint: Endpoint, dist: str | Path) -> None:
    from autocomp.errors import UsageError
    from autocomp.pipelines.cluster.client import (
        connect,
        load_package,
        pinned_version,
        version_name,
    )

    try:
        client = connect(endpoint)
        health = healthz(client)
    except (UsageError, Exception) as exc:  # noqa: BLE001  (any failure is the check's answer)
        report.line("FAIL", "kfp", f"{endpoint.host} does not answer ({str(exc)[:160]})")
        return
    tag = health.get("tag_name")
    version = kfp_version(tag)
    minimum = ".".join(map(str, MIN_KFP))
    if version is None or version < MIN_KFP:
        report.line("FAIL", "kfp", f"version {tag!r}; autocomp needs KFP {minimum} or later")
    else:
        mode = "multi-user" if health.get("multi_user") else "single-user"
        report.line("PASS", "kfp", f"{endpoint.host} answers, version {tag} ({mode})")
    for pipeline in DISPLAY_NAMES:
        package = Path(dist) / f"{pipeline}.yaml"
        try:
            load_package(pipeline, package)
            pinned_version(client, pipeline, package)
        except UsageError as exc:
            report.line("FAIL", f"pipeline {pipeline}", str(exc))
            continue
        report.line("PASS", f"pipeline {pipeline}", f"version {version_name(package)} uploaded")


def check_store(report: Report, store: str | None) -> None:
    import tempfile

    if not store:
        report.line("SKIP", "store", f"no --store given (the pipelines default to {DEFAULT_STORE})")
        return
    from autocomp.store.storage import open_store

    try:
        quick = {"retries": 1} if str(store).startswith("s3://") else {}  # say it, don't wait
        target = open_store(store, **quick)
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "probe.txt").write_text("autocomp doctor\n")
            target.put("doctor/probe", folder, {"stage": "doctor"})
        if target.manifest("doctor/probe") is None:
            raise OSError("the probe written is not readable back")
    except Exception as exc:  # noqa: BLE001  (any failure is the check's answer)
        report.line("FAIL", "store", f"{store} is not writable ({type(exc).__name__}: "
                    f"{str(exc)[:160]}); check the endpoint, bucket and credentials")  # fmt: skip
        return
    report.line("PASS", "store", f"{store} is reachable and writable")


def nodes_for(classes: list[ScoreClass], nodes: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Class name -> the nodes that can run it (`nodes`: name, gpus allocatable, labels)."""
    fits: dict[str, list[str]] = {}
    for score in classes:
        fits[score.name] = [
            n["name"]
            for n in nodes
            if n["gpus"] >= score.gpus
            and (
                not score.gpus
                or int(n["labels"].get(GPU_MEMORY_LABEL, 0)) > score.gpu_gb * 1000 - 1
            )
        ]
    return fits


def needed_classes(models: list[str]) -> list[ScoreClass]:
    from autocomp.pipelines.definitions.plan import ALL, in_all, score_groups

    wanted = in_all()[0] if models == [ALL] else models
    return [c for c, members in score_groups().items() if c.gpus and set(members) & set(wanted)]


def check_cluster(report: Report, namespace: str, models: list[str]) -> None:
    needs = (f"Secrets {SECRET} (keys {', '.join(SECRET_KEYS)}) and {HF_SECRET} (key "
             f"{', '.join(HF_SECRET_KEYS)}), PVC {MODEL_CACHE_PVC}")  # fmt: skip
    try:
        from kubernetes import client, config

        # the library reads $KUBECONFIG once, at import; read it now
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG") or None)
    except Exception as exc:  # noqa: BLE001  (no client or no kubeconfig: say what to check)
        where = f"in namespace {namespace}, GPU nodes labelled {GPU_MEMORY_LABEL}"
        report.line("SKIP", "cluster", f"no kubeconfig ({type(exc).__name__}); check by hand: "
                    f"{needs} {where}")  # fmt: skip
        return
    core = client.CoreV1Api()
    templates = {SECRET: "secret.template.yaml", HF_SECRET: "hf-secret.template.yaml"}
    for secret, keys in ((SECRET, SECRET_KEYS), (HF_SECRET, HF_SECRET_KEYS)):
        try:
            data = core.read_namespaced_secret(secret, namespace).data or {}
        except client.ApiException as exc:
            report.line("FAIL", f"secret {secret}", f"not readable in {namespace} ({exc.reason}); "
                        f"see manifests/base/{templates[secret]}")  # fmt: skip
            continue
        missing = sorted(set(keys) - set(data))
        status = "FAIL" if missing else "PASS"
        report.line(status, f"secret {secret}", f"missing keys {missing}" if missing else "present")
    try:
        core.read_namespaced_persistent_volume_claim(MODEL_CACHE_PVC, namespace)
        report.line("PASS", f"pvc {MODEL_CACHE_PVC}", "present")
    except client.ApiException as exc:
        report.line("FAIL", f"pvc {MODEL_CACHE_PVC}", f"{exc.reason}; apply manifests/base")
    nodes = [
        {
            "name": n.metadata.name,
            "gpus": int((n.status.allocatable or {}).get("nvidia.com/gpu", 0)),
            "labels": n.metadata.labels or {},
        }
        for n in core.list_node().items
    ]
    for name, fitting in nodes_for(needed_classes(models), nodes).items():
        if fitting:
            report.line("PASS", f"gpu class {name}", f"nodes {', '.join(fitting[:3])}")
        else:
            report.line("FAIL", f"gpu class {name}", f"no node has these GPUs (label "
                        f"{GPU_MEMORY_LABEL}); leave its models out or add such nodes")  # fmt: skip


def doctor(endpoint: Endpoint, store: str | None, dist: str | Path, models: list[str]) -> bool:
    """Run every check, print one line each; True when nothing failed."""
    report = Report()
    check_kfp(report, endpoint, dist)
    check_store(report, store)
    check_cluster(report, endpoint.namespace or "kubeflow", models)
    print(
        "doctor: " + (f"{report.failed} check(s) failed" if report.failed else "all checks passed")
    )
    return report.failed == 0
