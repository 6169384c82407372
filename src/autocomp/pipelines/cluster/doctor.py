"""`autocomp doctor`: a preflight a user runs before the first run on a cluster. One line per
check, PASS / WARN / FAIL / SKIP, each FAIL with its fix:

- kfp: the API answers (in multi-user mode with a namespace), and its version: healthz
  `tag_name`, else KFP's install ConfigMap, else the stated `--kfp-version`;
- backend: each compiled package against that version (cluster.backends: refused, or what runs
  degraded), and each pipeline uploaded in the version of the local dist/;
- with the `kubernetes` client and a kubeconfig: the Secrets (whether autocomp-hf may be absent
  depends on the backend the package was compiled for), the image pull secrets, the model-cache
  claim (phase, storage class, access modes), GPU nodes for every GPU placement in the packages
  (per score class the models need: count, the real memory labels or autocomp's per-size labels
  with the `kubectl label` commands, taints, local disk for /scratch), and the store written and
  read back by a pod in the namespace with the steps' own Secret and image;
- images: every image the packages name, resolved at its registry.
Without a kubeconfig the cluster items are named for the user to check.

Over 450 lines because it is one preflight with one short check per cluster item (endpoint,
store, Secrets, model cache, GPUs and their placement, images), each printing its own PASS /
WARN / FAIL line."""

from __future__ import annotations

import contextlib
import re
import uuid
from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.pipelines.cluster import backends
from autocomp.pipelines.cluster.client import Endpoint
from autocomp.pipelines.cluster.images import key_of
from autocomp.pipelines.cluster.nodes import (  # noqa: F401  (doctor's names since before)
    _mib,
    fitting,
    placements,
    quantity,
)
from autocomp.pipelines.cluster.resources import (
    GPU_CARDS,
    GPU_MEMORY_LABEL,
    HF_SECRET,
    HF_SECRET_KEYS,
    MODEL_CACHE_PVC,
    SECRET,
    SECRET_KEYS,
    ScoreClass,
    node_tiers,
    tier_floor_mib,
    tier_label,
)
from autocomp.pipelines.plumbing import DEFAULT_STORE, PIPELINES

TEMPLATES = {SECRET: "secret.template.yaml", HF_SECRET: "hf-secret.template.yaml"}
# provisioners whose volumes attach to one node: no ReadWriteMany (EBS, PD, Azure Disk)
SINGLE_NODE = (
    "ebs.csi.aws.com",
    "kubernetes.io/aws-ebs",
    "pd.csi.storage.gke.io",
    "kubernetes.io/gce-pd",
    "disk.csi.azure.com",
    "kubernetes.io/azure-disk",
)


class Report:
    def __init__(self) -> None:
        self.failed = 0

    def line(self, status: str, what: str, detail: str) -> None:
        self.failed += status == "FAIL"
        print(f"{status:4} {what}: {detail}")


# ----------------------------------------------------------------------------- KFP


Packages = dict[str, tuple[Path, list[dict[str, Any]]]]  # pipeline -> (file, documents)


def check_kfp(report: Report, endpoint: Endpoint, packages: Packages) -> Any:
    """The API, its version, each package against it, each pipeline uploaded; the client."""
    from autocomp.pipelines.cluster.client import connect, pinned_version, server_version
    from autocomp.pipelines.cluster.packages import version_name

    try:
        client = connect(endpoint)
    except UsageError as exc:
        report.line("FAIL", "kfp", f"{endpoint.host}: {exc.fix}")
        return None
    version, source = server_version(client)
    mode = "multi-user" if client.autocomp_health.get("multi_user") else "single-user"
    if version is None:
        report.line("FAIL", "kfp", f"{endpoint.host} answers ({mode}) but its version is unknown "
                    f"({source}); give it with --kfp-version")  # fmt: skip
    else:
        report.line("PASS", "kfp", f"{endpoint.host} answers, KFP {backends.shown(version)} "
                    f"({source}), {mode}")  # fmt: skip
    for pipeline, (package, docs) in packages.items():
        if version is not None:
            refusals, degraded = backends.check_server(docs[0], version)
            if refusals:
                report.line("FAIL", f"backend {pipeline}", "; ".join(refusals))
            if degraded:
                runs = "would run" if refusals else "runs"
                report.line(
                    "WARN", f"backend {pipeline}", f"{runs} degraded: " + "; ".join(degraded)
                )
            if not refusals and not degraded:
                report.line("PASS", f"backend {pipeline}", "runs as compiled")
        try:
            pinned_version(client, pipeline, package)
        except UsageError as exc:
            report.line("FAIL", f"pipeline {pipeline}", str(exc))
            continue
        except Exception as exc:  # noqa: BLE001  (an API refusal is the check's answer)
            from autocomp.pipelines.cluster.client import api_message

            report.line("FAIL", f"pipeline {pipeline}", f"the KFP API refused ({api_message(exc)})")
            continue
        report.line("PASS", f"pipeline {pipeline}", f"version {version_name(package)} uploaded")
    return client


# ----------------------------------------------------------------------------- the store


PROBE_PASSED = "put, get, list and delete of one object under its prefix allowed"


def check_store(report: Report, store: str | None, where: str = "from this machine") -> bool:
    """Put, get, list and delete one object under the store's prefix (store/probe.py): every
    request a step makes; a refused one is named with the policy statement that allows it."""
    if not store:
        report.line("SKIP", "store", f"no --store given (the pipelines default to {DEFAULT_STORE})")
        return True
    from autocomp.store.probe import probe_store

    quick = {"retries": 1} if str(store).startswith("s3://") else {}  # say it, don't wait
    result = probe_store(store, **quick)
    if not result.ok:
        done = f" (passed: {', '.join(result.passed)})" if result.passed else ""
        report.line("FAIL", "store", f"{store} {where}: {result.failure}{done}")
        return False
    report.line("PASS", "store", f"{store} is reachable {where}: {PROBE_PASSED}")
    return True


def probe_pod(store: str, image: str, pull_secrets: list[str]) -> dict[str, Any]:
    """A pod that runs `autocomp doctor --store-only` as a step would: the step's image, its S3
    Secret as env, uid 1000, no Istio sidecar (it would keep the pod from ending)."""
    from autocomp.pipelines.cluster.resources import SCRATCH_PATH

    env = [{"name": var, "valueFrom": {"secretKeyRef": {"name": SECRET, "key": key}}}
           for key, var in SECRET_KEYS.items()]  # fmt: skip
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"autocomp-doctor-{uuid.uuid4().hex[:8]}",
                     "labels": {"app.kubernetes.io/part-of": "autocomp",
                                "sidecar.istio.io/inject": "false"},
                     "annotations": {"sidecar.istio.io/inject": "false"}},
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": 300,
            # Pod Security restricted (tests/pipelines/test_pod_security.py)
            "securityContext": {"runAsUser": 1000, "runAsNonRoot": True,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "probe", "image": image,
                "securityContext": {"allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]}},
                "command": ["autocomp", "doctor", "--store-only", "--store", store],
                "env": [*env, {"name": "TMPDIR", "value": SCRATCH_PATH}],
                "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                              "limits": {"cpu": "1", "memory": "1Gi"}},
                "volumeMounts": [{"name": "scratch", "mountPath": SCRATCH_PATH}],
            }],
            "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
        },
    }  # fmt: skip
    if pull_secrets:
        pod["spec"]["imagePullSecrets"] = [{"name": s} for s in pull_secrets]
    return pod


def check_store_in_cluster(report: Report, kube: Any, namespace: str, store: str,
                           image: str, pull_secrets: list[str]) -> None:  # fmt: skip
    from autocomp.pipelines.cluster.kube import KubeError

    where = f"from a pod in {namespace} with the steps' Secret {SECRET} and image"
    try:
        done = kube.run_pod(namespace, probe_pod(store, image, pull_secrets))
    except KubeError as exc:
        report.line("FAIL", "store", f"no probe pod could start in {namespace} ({exc.reason}); "
                    "doctor needs to create pods there")  # fmt: skip
        return
    if done["phase"] == "Succeeded":
        report.line("PASS", "store", f"{store} is reachable {where}: {PROBE_PASSED}")
        return
    last = [line for line in (done["log"] or "").splitlines() if line.strip()]
    why = done["waiting"] or (last[-1] if last else f"phase {done['phase']}")
    report.line("FAIL", "store", f"{store} failed {where}: {why}")


# ----------------------------------------------------------------------------- the cluster


def package_needs(packages: Packages) -> dict[str, Any]:
    """What the packages ask of the namespace: the HF Secret (required where the backend could
    not mark it optional), image pull secrets, the images."""
    from autocomp.pipelines.cluster.images import references
    from autocomp.pipelines.cluster.packages import executors_config

    hf_required, pulls, images = False, set(), set()
    for _, docs in packages.values():
        images |= set(references(docs[0]))
        for config in executors_config(docs).values():
            for wiring in config.get("secretAsEnv", []):
                if wiring.get("secretName") == HF_SECRET and not wiring.get("optional"):
                    hf_required = True
            pulls |= {p["secretName"] for p in config.get("imagePullSecret", [])}
    return {"hf_required": hf_required, "pull_secrets": sorted(pulls), "images": sorted(images)}


def check_secrets(report: Report, kube: Any, namespace: str, needs: dict[str, Any]) -> None:
    from autocomp.pipelines.cluster.kube import KubeError

    for secret, keys in ((SECRET, SECRET_KEYS), (HF_SECRET, HF_SECRET_KEYS)):
        try:
            data = kube.secret(namespace, secret)
        except KubeError as exc:
            if secret == HF_SECRET and not needs["hf_required"]:
                report.line(
                    "WARN",
                    f"secret {secret}",
                    f"absent in {namespace} (optional: runs "
                    "of ungated models start; gated ones fail without a token)",
                )
                continue
            extra = (" (the package's backend cannot mark it optional: create it, an empty "
                     "token is fine)") if secret == HF_SECRET else ""  # fmt: skip
            report.line("FAIL", f"secret {secret}", f"not readable in {namespace} ({exc.reason})"
                        f"{extra}; see manifests/base/{TEMPLATES[secret]}")  # fmt: skip
            continue
        missing = sorted(set(keys) - set(data))
        empty = sorted(k for k in keys if k in data and not data[k] and secret == SECRET)
        if missing or empty:
            report.line("FAIL", f"secret {secret}", f"missing keys {missing}" if missing
                        else f"empty keys {empty}")  # fmt: skip
        else:
            report.line("PASS", f"secret {secret}", "present")
    for name in needs["pull_secrets"]:
        try:
            kind = kube.secret_type(namespace, name)
        except KubeError as exc:
            report.line(
                "FAIL",
                f"pull secret {name}",
                f"not readable in {namespace} "
                f"({exc.reason}); kubectl create secret docker-registry {name} ...",
            )
            continue
        ok = kind == "kubernetes.io/dockerconfigjson"
        report.line(
            "PASS" if ok else "FAIL",
            f"pull secret {name}",
            "present" if ok else f"type {kind}, not kubernetes.io/dockerconfigjson",
        )


def check_model_cache(report: Report, kube: Any, namespace: str, gpu_nodes: int) -> None:
    from autocomp.pipelines.cluster.kube import KubeError

    what = f"pvc {MODEL_CACHE_PVC}"
    try:
        claim = kube.claim(namespace, MODEL_CACHE_PVC)
    except KubeError as exc:
        report.line("FAIL", what, f"{exc.reason} in {namespace}; apply manifests/base")
        return
    try:
        klass = kube.storage_class(claim["class"])
    except KubeError:
        klass = None
    shown = (
        f"{claim['phase']}, class {claim['class'] or '(default)'}"
        f"{' (' + klass['provisioner'] + ')' if klass else ''}, "
        f"{'/'.join(claim['access_modes'])}, {claim['capacity'] or claim['requested']}"
    )
    rwx = "ReadWriteMany" in claim["access_modes"]
    if klass and rwx and klass["provisioner"] in SINGLE_NODE:
        report.line("FAIL", what, f"{shown}: {klass['provisioner']} volumes attach to one node "
                    "and cannot be ReadWriteMany; use a class that can (manifests/components/"
                    "model-cache-*, docs/cluster.md)")  # fmt: skip
    elif not rwx and gpu_nodes > 1:
        report.line("FAIL", what, f"{shown}: pods on {gpu_nodes} GPU nodes mount it, a "
                    "ReadWriteOnce volume only on one; use a ReadWriteMany class")  # fmt: skip
    elif claim["phase"] == "Bound":
        report.line("PASS", what, shown)
    elif claim["phase"] == "Pending" and klass and klass["binding"] == "WaitForFirstConsumer":
        report.line("WARN", what, f"{shown}: bound when the first pod mounts it (run the "
                    "warm-up Job: dist/jobs/model-cache-warmup.yaml)")  # fmt: skip
    else:
        report.line("FAIL", what, f"{shown}: no volume for it; `kubectl -n {namespace} describe "
                    f"pvc {MODEL_CACHE_PVC}` says why")  # fmt: skip


def label_commands(place: dict[str, Any], nodes: list[dict[str, Any]]) -> list[str]:
    """`kubectl label` commands for GPU nodes that qualify by their memory label but lack
    autocomp's per-size labels (the node-selector placement of backends before 2.14)."""
    commands = []
    for node in nodes:
        memory = node["labels"].get(GPU_MEMORY_LABEL)
        if node["gpus"] < place["gpus"] or not _mib(memory):
            continue
        wanted = [f"{tier_label(t)}=true" for t in node_tiers(_mib(memory))
                  if node["labels"].get(tier_label(t)) != "true"]  # fmt: skip
        if wanted and any(k in [w.split("=")[0] for w in wanted] for k in place["labels"]):
            commands.append(f"kubectl label node {node['name']} {' '.join(wanted)}")
    return commands


def check_gpus(report: Report, nodes: list[dict[str, Any]], places: list[dict[str, Any]]) -> None:
    cards = ", ".join(f"{name} {mib}" for name, (_, mib) in GPU_CARDS.items())
    for place in places:
        size = _shown_requirement(place)
        what = f"gpu {place['gpus']}x ({size})"
        steps = ", ".join(sorted(set(place["steps"])))
        fit = [n["name"] for n in nodes if fitting(place, n) is None]
        if fit:
            report.line("PASS", what, f"{steps} on {', '.join(fit[:4])}")
            continue
        why = "; ".join(f"{n['name']}: {fitting(place, n)}" for n in nodes if n["gpus"])[:400]
        fix = label_commands(place, nodes) if place["labels"] else []
        unlabelled = [n["name"] for n in nodes if n["gpus"] and GPU_MEMORY_LABEL not in n["labels"]]
        hint = (
            f"; label them: {'; '.join(fix)}"
            if fix
            else f"; nodes without {GPU_MEMORY_LABEL} (no GPU feature discovery): kubectl label "
            f"node {unlabelled[0]} {GPU_MEMORY_LABEL}=<MiB: {cards}>"
            if unlabelled
            else ""
        )
        report.line("FAIL", what, f"no node runs {steps} ({why or 'no GPU nodes'}){hint}")


def _shown_requirement(place: dict[str, Any]) -> str:
    if place["floor"] and not place["labels"]:
        return f"{GPU_MEMORY_LABEL} >= {place['floor']}"
    if place["floor"] or not place.get("expressions"):
        return ", ".join(
            f"{k}={v}" if not place["floor"] else k for k, v in place["labels"].items()
        )
    parts = [f"{k}={v}" for k, v in place["labels"].items()]
    for e in place["expressions"]:
        values = e.get("values") or []
        more = f" +{len(values) - 1}" if len(values) > 1 else ""
        shown = f"> {values[0]}" if e["operator"] in ("Gt", "Lt") else f"in {values[0]}{more}"
        parts.append(f"{e['key']} {shown}")
    return ", ".join(parts)


def check_scheme(report: Report, nodes: list[dict[str, Any]], packages: Packages,
                 models: list[str]) -> None:  # fmt: skip
    """Which placement scheme this cluster's GPU nodes carry the labels of, against the one the
    packages were compiled with; the score classes the package could not place."""
    from autocomp.pipelines.cluster import placement

    fits = placement.detect(nodes)
    wanted = {c.name for c in needed_classes(models)}
    for pipeline, (_, docs) in packages.items():
        scheme, unplaced = placement.stamped(docs[0])
        if fits and scheme != "labels" and scheme not in fits:
            report.line("FAIL", f"placement {pipeline}", f"compiled for {scheme}, the GPU nodes "
                        f"carry {', '.join(fits)} labels; recompile with `autocomp compile "
                        f"--placement {fits[0]}`")  # fmt: skip
        elif fits:
            report.line("PASS", f"placement {pipeline}", f"{scheme} (the nodes carry "
                        f"{', '.join(fits)} labels)")  # fmt: skip
        for name in sorted(set(unplaced) & wanted):
            report.line("FAIL", f"gpu class {name}", f"no {scheme} card holds it: the models "
                        "of that class cannot run; leave them out or recompile with another "
                        "--placement")  # fmt: skip


def check_images(report: Report, images: list[str], auths: dict[str, dict[str, str]]) -> None:
    from autocomp.pipelines.cluster.registry import resolve

    for image in images:
        status, detail = resolve(image, auths)
        report.line(status, f"image {image}", detail)


def nodes_for(classes: list[ScoreClass], nodes: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Class name -> the nodes with the class's GPUs by the memory label (affinity placement)."""
    return {
        c.name: [
            n["name"]
            for n in nodes
            if n["gpus"] >= c.gpus
            and (not c.gpus or _mib(n["labels"].get(GPU_MEMORY_LABEL)) >= tier_floor_mib(c.gpu_gb))
        ]
        for c in classes
    }


def needed_classes(models: list[str]) -> list[ScoreClass]:
    from autocomp.pipelines.cluster.plan import ALL, in_all, score_groups

    wanted = in_all()[0] if models == [ALL] else models
    return [c for c, members in score_groups().items() if c.gpus and set(members) & set(wanted)]


def _docker_auths() -> dict[str, dict[str, str]]:
    import json

    from autocomp.pipelines.cluster.kube import docker_auths

    path = Path.home() / ".docker" / "config.json"
    try:
        return docker_auths(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def check_cluster(report: Report, namespace: str, packages: Packages,
                  models: list[str], store: str | None) -> None:  # fmt: skip
    from autocomp.pipelines.cluster import kube as kubeapi

    needs = package_needs(packages)
    auths = _docker_auths()
    try:
        kube = kubeapi.connect()
        nodes = kube.nodes()
    except (kubeapi.Unavailable, kubeapi.KubeError) as exc:
        report.line("SKIP", "cluster", f"{exc}; check by hand in namespace {namespace}: Secrets "
                    f"{SECRET} (keys {', '.join(SECRET_KEYS)}) and {HF_SECRET} (key "
                    f"{', '.join(HF_SECRET_KEYS)}), PVC {MODEL_CACHE_PVC}, GPU nodes labelled "
                    f"{GPU_MEMORY_LABEL}")  # fmt: skip
        check_store(report, store)
        check_images(report, needs["images"], auths)
        return
    check_secrets(report, kube, namespace, needs)
    check_model_cache(report, kube, namespace, sum(1 for n in nodes if n["gpus"]))
    check_scheme(report, nodes, packages, models)
    check_gpus(report, nodes, placements(packages, [c.name for c in needed_classes(models)]))
    for name in needs["pull_secrets"]:
        with contextlib.suppress(kubeapi.KubeError):  # check_secrets said it
            auths.update(kube.registry_auth(namespace, name))
    core = [i for i in needs["images"] if "autocomp-core" in i]
    if store and core:
        check_store_in_cluster(report, kube, namespace, store, core[0], needs["pull_secrets"])
    else:
        check_store(report, store)
    check_images(report, needs["images"], auths)


def load_packages(report: Report, dist: str | Path) -> Packages:
    from autocomp.pipelines.cluster.packages import load_documents

    found: Packages = {}
    for pipeline in PIPELINES:
        package = Path(dist) / f"{pipeline}.yaml"
        try:
            docs = load_documents(pipeline, package)
        except UsageError as exc:
            report.line("FAIL", f"package {pipeline}", str(exc))
            continue
        found[pipeline] = (package, docs)
    return found


def check_room(report: Report, packages: Packages, store: str | None,
               declared: str | None) -> None:  # fmt: skip
    """Whether a run of generate_benchmark with the package's defaults (and the store) fits
    the store (storecap.py): one line."""
    from autocomp.pipelines.cluster.storecap import check_package_room

    pipeline = "generate_benchmark"
    if pipeline not in packages:
        return
    params = {"store": store} if store else {}
    try:
        said = check_package_room(pipeline, params, packages[pipeline][1][0], declared)
    except UsageError as exc:
        report.line("FAIL", "capacity", str(exc))
        return
    report.line("PASS" if "room" in said else "SKIP", "capacity", said)


def step_engines(docs: list[dict[str, Any]], engines: dict[str, str]) -> list[str]:
    """`step engine` for each executor of a compiled package that runs a model: the engines
    `autocomp plan` names (capacity.py; `engines`: plan step -> engine), the caption step's
    from the package's own `caption_engine` default, with the image it runs in."""
    root = docs[0].get("root", {}).get("inputDefinitions", {}).get("parameters", {})
    caption = root.get("caption_engine", {}).get("defaultValue")
    executors = docs[0].get("deploymentSpec", {}).get("executors", {})
    found = []
    for label, executor in sorted(executors.items()):
        step = re.sub(r"-\d+$", "", label.removeprefix("exec-"))
        plan_step = next((c for c in (step, step.replace("-", "_"), f"finetune_{step}")
                          if c in engines), None)  # fmt: skip
        engine = caption if step == "caption" and caption else engines.get(plan_step or "")
        if not engine:
            continue
        kind = key_of(executor.get("container", {}).get("image", ""))  # caption-cpu: a variant
        found.append(f"{step} {engine}" + (f" (image {kind})" if kind else ""))
    return found


def check_engines(report: Report, packages: Packages, models: list[str]) -> None:
    """One line per package: the engine of each step that runs a model."""
    from autocomp.pipelines.cluster import capacity

    made = capacity.plan(capacity.DESIGN_PROFILE, models=models or ["all"])
    engines = {s.step: s.engine for s in made.steps if s.engine}
    for pipeline, (_, docs) in packages.items():
        steps = step_engines(docs, engines)
        if steps:
            report.line("INFO", f"engines {pipeline}", ", ".join(steps))


def doctor(endpoint: Endpoint, store: str | None, dist: str | Path, models: list[str],
           store_capacity: str | None = None) -> bool:  # fmt: skip
    """Run every check, print one line each; True when nothing failed. The models are checked
    first (an unknown name is a usage error, not a passed check)."""
    from autocomp.pipelines.cluster.plan import ALL
    from autocomp.scoring.registry import get_model

    for name in models:
        if name != ALL:
            get_model(name)
    report = Report()
    packages = load_packages(report, dist)
    check_kfp(report, endpoint, packages)
    check_cluster(report, endpoint.namespace or "kubeflow", packages, models, store)
    check_room(report, packages, store, store_capacity)
    check_engines(report, packages, models)
    print(
        "doctor: " + (f"{report.failed} check(s) failed" if report.failed else "all checks passed")
    )
    return report.failed == 0
