"""Which Kubeflow Pipelines backends the compiled pipelines run on, and what each one does with
them: the support matrix as data, read in the backend's source at each release tag
(kubeflow/pipelines, argoproj/argo-workflows, kubeflow/manifests; docs/cluster.md prints it).

- RELEASES / KUBEFLOW: the backend releases read, and which one each Kubeflow release ships.
- FIELDS: every Kubernetes executor setting the pipelines may emit (kfp-kubernetes 2.17.3's
  JSON names) and the first backend whose `kubernetes_platform` proto knows it. 2.2-2.4.0 parse
  that JSON strictly in the driver and 2.14+ in the API server at run creation (an unknown field
  fails the step or refuses the run); 2.4.1-2.5 drop unknown fields silently. `compile --backend`
  therefore emits exactly the fields its backend knows (`adapt`).
- FEATURES: what the pipelines rely on, from which release, and what an older one does instead
  (refused, degraded, or worked around when compiling).
- TARGETS: the `--backend` values. Releases whose compiled YAML is identical share one; the
  compiled package records its range (`stamp`), which doctor, submit and schedule compare with
  the server's own version (`check_server`).

No kfp here (the CLI checks before kfp is imported). Longer than most modules because most of
it is data: the field and feature tables, each entry with the source it was read in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from autocomp.errors import UsageError

Version = tuple[int, int, int]
KFP = "kubeflow/pipelines"
MANIFESTS = "kubeflow/manifests"

# The backend release tags read (kubeflow/pipelines); NEWEST_READ: the newest of them.
RELEASES: tuple[Version, ...] = ((2, 2, 0), (2, 3, 0), (2, 4, 0), (2, 4, 1), (2, 5, 0),
                                 (2, 14, 0), (2, 14, 3), (2, 14, 4), (2, 15, 0), (2, 16, 0),
                                 (2, 16, 1), (2, 17, 0))  # fmt: skip
NEWEST_READ: Version = RELEASES[-1]
# Kubeflow release -> the KFP backend it installs (kubeflow/manifests at the tag:
# apps|applications/pipeline/upstream/base/*/kustomization.yaml `newTag`).
KUBEFLOW: dict[str, Version] = {
    "1.9.0": (2, 2, 0),
    "1.9.1": (2, 3, 0),
    "1.10.0": (2, 4, 1),
    "1.10.1": (2, 5, 0),
    "1.10.2": (2, 5, 0),
    "1.11.0": (2, 15, 0),
}


# one version as a user types it (`--backend`): 2.15.0, v2.14.3-rc.1, 2.5; nothing else (a list
# such as '2.5.0,2.15.0' would otherwise be read as its first item)
EXACT_VERSION = re.compile(r"v?\d{1,4}\.\d{1,4}(?:\.\d{1,4})?(?:-[0-9A-Za-z.-]+)?")


def parse_version(text: str | None) -> Version | None:
    """(major, minor, patch) of `2.15.0`, `v2.14.3-rc.1` or `2.5` (patch 0); None if none."""
    found = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", (text or "").strip())
    if not found:
        return None
    return int(found[1]), int(found[2]), int(found[3] or 0)


def shown(version: Version) -> str:
    return ".".join(map(str, version))


# ----------------------------------------------------------------------------- fields

_PROTO = "kubernetes_platform/proto/kubernetes_executor_config.proto"
# The proto each backend compiles against (go.mod): 2.2.0 -> module commit 8b2a099e8c9f,
# 2.3.0-2.4.x -> d911c8b73b49, 2.5.0 and later -> ./kubernetes_platform at the tag.
FIELDS: dict[str, Version] = {
    "secretAsEnv": (2, 2, 0),
    "secretAsEnv.secretName": (2, 2, 0),
    "secretAsEnv.keyToEnv": (2, 2, 0),
    "secretAsEnv.keyToEnv.secretKey": (2, 2, 0),
    "secretAsEnv.keyToEnv.envVar": (2, 2, 0),
    "secretAsEnv.secretNameParameter": (2, 5, 0),
    "secretAsEnv.optional": (2, 15, 0),
    "pvcMount": (2, 2, 0),
    "pvcMount.constant": (2, 2, 0),
    "pvcMount.mountPath": (2, 2, 0),
    "pvcMount.pvcNameParameter": (2, 5, 0),
    "emptyDirMounts": (2, 3, 0),
    "emptyDirMounts.volumeName": (2, 3, 0),
    "emptyDirMounts.mountPath": (2, 3, 0),
    "emptyDirMounts.medium": (2, 3, 0),
    "emptyDirMounts.sizeLimit": (2, 3, 0),
    "tolerations": (2, 2, 0),
    "tolerations.key": (2, 2, 0),
    "tolerations.operator": (2, 2, 0),
    "tolerations.value": (2, 2, 0),
    "tolerations.effect": (2, 2, 0),
    "tolerations.tolerationSeconds": (2, 2, 0),
    "nodeSelector": (2, 2, 0),
    "nodeSelector.labels": (2, 2, 0),
    "nodeAffinity": (2, 2, 0),  # known from 2.2.0, applied from 2.14.0 (FEATURES)
    "nodeAffinity.matchExpressions": (2, 2, 0),
    "nodeAffinity.matchExpressions.key": (2, 2, 0),
    "nodeAffinity.matchExpressions.operator": (2, 2, 0),
    "nodeAffinity.matchExpressions.values": (2, 2, 0),
    "nodeAffinity.weight": (2, 2, 0),
    "imagePullSecret": (2, 2, 0),
    "imagePullSecret.secretName": (2, 2, 0),
    "imagePullSecret.secretNameParameter": (2, 5, 0),
    "activeDeadlineSeconds": (2, 2, 0),
}


def accepted(path: str, version: Version) -> bool:
    """Whether `version`'s proto knows the platform field `path` (unknown paths: not)."""
    first = FIELDS.get(path)
    return first is not None and version >= first


def _keep(value: Any, path: str, version: Version) -> Any:
    """`value` with the fields `version` does not know left out; a field FIELDS lists no
    children of (a name parameter, the labels map) is kept whole."""
    if isinstance(value, list):
        return [_keep(v, path, version) for v in value]
    if not isinstance(value, dict) or not any(f.startswith(f"{path}.") for f in FIELDS):
        return value
    return {key: _keep(v, f"{path}.{key}", version)
            for key, v in value.items() if accepted(f"{path}.{key}", version)}  # fmt: skip


def emitted(config: dict[str, Any], path: str = "") -> set[str]:
    """Every field path of one executor's Kubernetes config, down to the fields FIELDS lists
    children of (what a test compares with FIELDS)."""
    found = set()
    for key, value in config.items():
        here = f"{path}.{key}" if path else key
        found.add(here)
        if not any(f.startswith(f"{here}.") for f in FIELDS):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict):
                found |= emitted(item, here)
    return found


# ----------------------------------------------------------------------------- features


@dataclass(frozen=True)
class Feature:
    """One thing the pipelines rely on: from `first` on it works; before, `before` happens.
    effect: refuse (doctor refuses the backend), degrade (runs, with `before`), compile (compile
    --backend works around it), info (nothing to do)."""

    key: str
    first: Version
    what: str
    before: str
    effect: str
    source: str


FEATURES: tuple[Feature, ...] = (
    Feature(
        "nonroot",
        (2, 3, 0),
        "the images run as uid 1000",
        "the launcher writes input artifacts under /minio, /s3 and /gcs in the image's root "
        "file system, which uid 1000 cannot create: every step with an input artifact fails",
        "refuse",
        f"{KFP} 2.3.0 backend/src/v2/compiler/argocompiler/container.go "
        "(minio-scratch, s3-scratch, gcs-scratch emptyDirs; #10857)",
    ),
    Feature(
        "scratch",
        (2, 3, 0),
        "scratch is an emptyDir with a size limit",
        "no emptyDirMounts field in the proto",
        "refuse",
        f"{KFP} 2.3.0 backend/src/v2/driver/driver.go extendPodSpecPatch (EmptyDirMounts)",
    ),
    Feature(
        "lenient_parse",
        (2, 4, 1),
        "unknown Kubernetes fields are dropped, not refused",
        "the driver parses the Kubernetes config strictly (jsonpb.UnmarshalString): one "
        "unknown field fails the step",
        "compile",
        f"{KFP} 2.4.0/2.4.1 backend/src/v2/cmd/driver/main.go:138/203",
    ),
    Feature(
        "name_parameters",
        (2, 5, 0),
        "Secret, PVC and pull-secret names as parameters",
        "kfp-kubernetes 2.17.3's secretNameParameter / pvcNameParameter are unknown; the "
        "constant names are used",
        "compile",
        f"{KFP} 2.5.0 {_PROTO}",
    ),
    Feature(
        "parallelism",
        (2, 4, 0),
        "ParallelFor parallelism limits",
        "no limit: every shard and score pod of a loop is created at once",
        "degrade",
        f"{KFP} 2.4.0 backend/src/v2/compiler/argocompiler/dag.go:359",
    ),
    Feature(
        "retries_root",
        (2, 4, 1),
        "retries (set_retry) of tasks in the root DAG",
        "no retries at all",
        "degrade",
        f"{KFP} 2.4.1 backend/src/v2/compiler/argocompiler/container.go getTaskRetryStrategy",
    ),
    Feature(
        "retries_nested",
        (2, 14, 0),
        "retries of tasks inside loops and sub-pipelines",
        "only root-DAG tasks are retried (rootDag.Tasks[name])",
        "degrade",
        f"{KFP} 2.5.0 backend/src/v2/compiler/argocompiler/container.go:508; 2.14.0 "
        "container.go:614 (per-task retry parameters)",
    ),
    Feature(
        "job_uuid",
        (2, 5, 0),
        "the run id placeholder {{$.pipeline_job_uuid}}",
        "the placeholder is passed literally; compile --backend writes {{workflow.uid}}, "
        "which the API server replaces with the run id",
        "compile",
        f"{KFP} 2.5.0 backend/src/v2/driver/driver.go:1648; 2.3.0/2.4.1 "
        "backend/src/apiserver/template/v2_template.go:328/330 (ReplaceUID)",
    ),
    Feature(
        "node_affinity",
        (2, 14, 0),
        "GPU memory placement by node affinity on the GPU feature discovery label",
        "nodeAffinity is dropped silently; compile --backend "
        "places GPU steps by node selector on autocomp.io/gpu-<N>gb labels (doctor prints "
        "the kubectl label commands)",
        "compile",
        f"{KFP} 2.14.0 backend/src/v2/driver/k8s.go:486",
    ),
    Feature(
        "collected",
        (2, 14, 0),
        "fan-in of a loop's outputs with dsl.Collected",
        "the driver skips ParallelFor tasks when resolving inputs: a Collected input fails",
        "refuse",
        f"{KFP} 2.14.0 backend/src/v2/driver/resolve.go:603 (#11725); 2.5.0 driver.go getDAGTasks",
    ),
    Feature(
        "named_loops",
        (2, 16, 0),
        "dsl.Collected from a ParallelFor with a name",
        "the driver looks the loop up by its display name (#13239)",
        "refuse",
        f"{KFP} 2.15.0 backend/src/v2/driver/dag.go:95; fix 2.16.0 argocompiler/dag.go (#12808)",
    ),
    Feature(
        "server_parse",
        (2, 14, 0),
        "the API server compiles each run (strict protojson)",
        "the driver parses at run time",
        "info",
        f"{KFP} 2.14.0 backend/src/v2/compiler/argocompiler/container.go:285",
    ),
    Feature(
        "secret_optional",
        (2, 15, 0),
        "an optional Secret as env (autocomp-hf)",
        "2.14 refuses the field at run creation, older drivers drop it: compile --backend "
        "leaves it out and the autocomp-hf Secret must exist (an empty token is fine)",
        "compile",
        f"{KFP} 2.15.0 backend/src/v2/driver/k8s.go:340",
    ),
    Feature(
        "seaweedfs",
        (2, 15, 0),
        "SeaweedFS is KFP's store; multi-user profiles get keys "
        "limited to mlpipeline/{artifacts,private-artifacts/<ns>,private/<ns>,shared}/*",
        "MinIO (minio-service.kubeflow:9000); a profile's Secret holds the root keys",
        "info",
        f"{KFP} 2.15.0 manifests/kustomize/base/installs/multi-user/pipelines-profile-"
        "controller/sync.py:353",
    ),
    Feature(
        "no_minio_service",
        (2, 16, 0),
        "the store is seaweedfs.kubeflow:8333 (or :9000)",
        "minio-service.kubeflow:9000 answers (2.15: a compatibility Service)",
        "info",
        f"{KFP} 2.16.0 manifests/kustomize/third-party/seaweedfs/base/seaweedfs/"
        "seaweedfs-service.yaml",
    ),
)
FEATURE = {f.key: f for f in FEATURES}


# ----------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """A `--backend` value: the releases [first, until) whose compiled YAML is identical."""

    name: str
    first: Version
    until: Version | None  # None: open (checked up to NEWEST_READ)

    def covers(self, version: Version) -> bool:
        return version >= self.first and (self.until is None or version < self.until)

    def has(self, feature: str) -> bool:
        """Whether every release this target covers has `feature`."""
        return self.first >= FEATURE[feature].first

    @property
    def range(self) -> str:
        if self.until is None:
            return f">={shown(self.first)}"
        return f">={shown(self.first)},<{shown(self.until)}"


TARGETS: tuple[Target, ...] = (
    Target("2.3", (2, 3, 0), (2, 5, 0)),
    Target("2.5", (2, 5, 0), (2, 14, 0)),
    Target("2.14", (2, 14, 0), (2, 15, 0)),
    Target("2.15", (2, 15, 0), None),
)
DEFAULT_TARGET = TARGETS[-1]


def refusal(version: Version) -> str | None:
    """Why autocomp cannot run on `version` at all (None: it can, with some --backend)."""
    for feature in FEATURES:
        package_level = feature.key in ("collected", "named_loops")  # check_server: the YAML
        if feature.effect == "refuse" and not package_level and version < feature.first:
            fixed = f"fixed in {shown(feature.first)}: {feature.source}"
            return f"KFP {shown(version)}: {feature.before} ({fixed})"
    return None


def target_for(text: str | None) -> Target:
    """The compile target of a backend version (`--backend 2.5.0`, `2.14`, ...; None: the
    newest). A version autocomp cannot run on is a usage error that says why."""
    if text is None:
        return DEFAULT_TARGET
    version = parse_version(text) if EXACT_VERSION.fullmatch(text) else None
    if version is None:
        raise UsageError(
            "backend", text, "give a KFP backend version, e.g. 2.15.0 (docs/cluster.md)"
        )
    why = refusal(version)
    if why:
        raise UsageError("backend", text, f"not supported: {why}")
    found = next((t for t in TARGETS if t.covers(version)), None)
    if found is None:
        raise UsageError("backend", text, f"no supported KFP release; supported: "
                         f"{', '.join(t.range for t in TARGETS)}")  # fmt: skip
    return found


# ----------------------------------------------------------------------------- the matrix

# each feature as its absence reads in the matrix (what a user sees). dsl.Collected is not in it:
# no autocomp pipeline fans in with it (the fan-in reads the store), though doctor still checks
# a package for it (`uses`)
SHORT = {
    "nonroot": "refused: the launcher cannot create /minio, /s3, /gcs as uid 1000",
    "parallelism": "no loop parallelism limits",
    "retries_root": "no retries",
    "retries_nested": "retries only for root-DAG tasks",
    "job_uuid": "run id through {{workflow.uid}}",
    "node_affinity": "GPUs placed by autocomp.io/gpu-<N>gb node labels",
    "secret_optional": "the autocomp-hf Secret must exist",
}
MATRIX = {(2, 2, 0): "2.2.0", (2, 3, 0): "2.3.0", (2, 4, 0): "2.4.0", (2, 4, 1): "2.4.1",
          (2, 5, 0): "2.5.0", (2, 14, 0): "2.14.x", (2, 15, 0): "2.15.0", (2, 16, 0): "2.16.x",
          (2, 17, 0): "2.17.0"}  # fmt: skip


SEAWEEDFS_434 = (2, 17, 0)  # seaweedfs-deployment.yaml: 4.00 at 2.15.0-2.16.1, 4.34 at 2.17.0


def _store(version: Version) -> str:
    """KFP's own store (20Gi: minio-pvc.yaml, seaweedfs-pvc.yaml) and a profile's keys
    (pipelines-profile-controller/sync.py; docs/cluster.md, The store)."""
    if version < FEATURE["seaweedfs"].first:
        return "store: MinIO, minio-service.kubeflow:9000, 20Gi"
    if version < FEATURE["no_minio_service"].first:
        return ("store: SeaweedFS 4.00 (seaweedfs.kubeflow:8333; minio-service too), 20Gi, "
                "keys per profile: Put/Get/List under its prefixes")  # fmt: skip
    if version < SEAWEEDFS_434:
        return ("store: SeaweedFS 4.00 (seaweedfs.kubeflow:8333), 20Gi, keys per profile: "
                "Put/Get/List under its prefixes")  # fmt: skip
    return (
        "store: SeaweedFS 4.34 (seaweedfs.kubeflow:8333), 20Gi, keys per profile: "
        "Put/Get/List and DeleteObject under its prefixes, a bucket policy for listing"
    )


def matrix_markdown() -> str:
    """The support matrix as docs/cluster.md prints it (a test keeps the two equal)."""
    rows = ["| KFP | Kubeflow | `--backend` | on that backend |", "|---|---|---|---|"]
    for version, label in MATRIX.items():
        kubeflow = ", ".join(k for k, v in KUBEFLOW.items() if v == version) or "-"
        if refusal(version):
            rows.append(f"| {label} | {kubeflow} | refused | {SHORT['nonroot']} |")
            continue
        target = next(t for t in TARGETS if t.covers(version))
        missing = {f.key for f in FEATURES if f.key in SHORT and version < f.first}
        if "retries_root" in missing:
            missing.discard("retries_nested")
        differs = [SHORT[f.key] for f in FEATURES if f.key in missing] + [_store(version)]
        rows.append(f"| {label} | {kubeflow} | {target.name} | {'; '.join(differs)} |")
    return "\n".join(rows) + "\n"


# ----------------------------------------------------------------------------- the package

_STAMP = re.compile(r"\s*\[autocomp backend ([^\]]+)\]$")


def stamp(spec: dict[str, Any], target: Target) -> None:
    """Record the target's range in the pipeline's description (pipelineInfo.description: the
    one free-text field every backend's strict PipelineSpec parse accepts)."""
    info = spec["pipelineInfo"]
    info["description"] = (
        f"{_STAMP.sub('', info.get('description', ''))} [autocomp backend {target.range}]"
    )


def stamped_range(spec: dict[str, Any]) -> tuple[Version, Version | None] | None:
    """(first, until) recorded by `stamp`; None for a package compiled without it."""
    found = _STAMP.search(spec.get("pipelineInfo", {}).get("description", ""))
    if not found:
        return None
    first = until = None
    for part in found[1].split(","):
        if part.startswith(">="):
            first = parse_version(part[2:])
        elif part.startswith("<"):
            until = parse_version(part[1:])
    return (first, until) if first else None


def adapt(docs: list[dict[str, Any]], target: Target) -> list[dict[str, Any]]:
    """The compiled documents (pipeline spec, platform spec) as `target`'s backends take them:
    only the Kubernetes fields its proto knows, the run id placeholder its backends resolve, and
    the target recorded."""
    spec = docs[0]
    if not target.has("job_uuid"):
        spec = _replace_constant(spec, "{{$.pipeline_job_uuid}}", "{{workflow.uid}}")
    stamp(spec, target)
    out = [spec]
    for platform in docs[1:]:
        executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
        for label, config in executors.items():
            executors[label] = {
                key: _keep(value, key, target.first)
                for key, value in config.items()
                if accepted(key, target.first)
            }
        out.append(platform)
    return out


def _replace_constant(value: Any, old: str, new: str) -> Any:
    if isinstance(value, dict):
        return {k: _replace_constant(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_constant(v, old, new) for v in value]
    return new if value == old else value


# ----------------------------------------------------------------------------- checks


def uses(spec: dict[str, Any]) -> dict[str, list[str]]:
    """What a compiled pipeline relies on that not every backend has, with the tasks: retries
    of nested tasks, loop parallelism limits, Collected fan-in (and from named loops)."""
    components = spec.get("components", {})
    root = spec.get("root", {}).get("dag", {}).get("tasks", {})
    dags = {"root": root, **{n: c["dag"]["tasks"] for n, c in components.items() if "dag" in c}}
    found: dict[str, list[str]] = {"retries_nested": [], "retries_root": [], "parallelism": [],
                                   "collected": [], "named_loops": []}  # fmt: skip
    loops = []
    for dag, tasks in dags.items():
        for key, task in tasks.items():
            shown_name = task.get("taskInfo", {}).get("name", key)
            if task.get("retryPolicy", {}).get("maxRetryCount"):
                found["retries_root" if dag == "root" else "retries_nested"].append(shown_name)
            if task.get("iteratorPolicy", {}).get("parallelismLimit"):
                found["parallelism"].append(shown_name)
            if "parameterIterator" in task or "artifactIterator" in task:
                loops.append((key, shown_name))
            component = components.get(task.get("componentRef", {}).get("name"), {})
            inputs = component.get("inputDefinitions", {}).get("artifacts", {}).values()
            if "executorLabel" in component and any(i.get("isArtifactList") for i in inputs):
                found["collected"].append(shown_name)
    if found["collected"]:  # a named loop's outputs may be what is collected (#13239)
        found["named_loops"] = [name for key, name in loops if name != key]
    return {k: sorted(set(v)) for k, v in found.items() if v}


def check_server(spec: dict[str, Any], version: Version) -> tuple[list[str], list[str]]:
    """(refusals, degradations) of running the compiled `spec` on backend `version`: a
    refusal stops doctor, submit and schedule; a degradation is said once."""
    why = refusal(version)
    if why:
        return [why], []
    refusals, degraded = [], []
    recorded = stamped_range(spec)
    if recorded is None:
        refusals.append("the package records no backend; recompile with `autocomp compile`")
    else:
        first, until = recorded
        if version < first or (until is not None and version >= until):
            wanted = next((t for t in TARGETS if t.covers(version)), None)
            fix = f"`autocomp compile --backend {shown(version)}`" if wanted else "another KFP"
            refusals.append(f"the package was compiled for KFP {_range(first, until)}, the server "
                            f"is {shown(version)}; recompile: {fix}")  # fmt: skip
    used = uses(spec)
    for key in ("collected", "named_loops"):
        if used.get(key) and version < FEATURE[key].first:
            f = FEATURE[key]
            refusals.append(f"{f.what} ({', '.join(used[key])}) needs KFP {shown(f.first)}: "
                            f"{f.before} ({f.source})")  # fmt: skip
    for key in ("retries_root", "retries_nested", "parallelism"):
        if used.get(key) and version < FEATURE[key].first:
            f = FEATURE[key]
            degraded.append(f"{f.before} ({key.replace('_', ' ')}: {', '.join(used[key])})")
    if version > NEWEST_READ:
        degraded.append(f"newer than the newest release read ({shown(NEWEST_READ)}): not verified")
    return refusals, degraded


def compiled_range(recorded: tuple[Version, Version | None]) -> str:
    """A package's recorded range (stamped_range) as a user reads it."""
    return _range(*recorded)


def _range(first: Version, until: Version | None) -> str:
    return (
        f"{shown(first)} and later" if until is None else f"{shown(first)} to below {shown(until)}"
    )
