"""A run's GPU placements against the cluster's live nodes: what `doctor` prints per placement
and what `submit` and `schedule` check before a run is created (`check_nodes`), from the nodes'
labels, GPUs, taints and local disk as the Kubernetes API answers them (cluster.kube, through
the user's kubeconfig), matched the way the scheduler matches them (cluster.placement.unmet).

A score class no node can ever take is refused at submit with one line, when the package's
placement scheme is one no autoscaler adds nodes for (`gfd`: GPU feature discovery labels a node
once it runs; `labels`: labels of the user's own; compile-time node selectors on autocomp's size
labels): a pod that no live node takes waits Pending forever. With a provider scheme (gke,
karpenter, eks, aks) a node pool may be scaled up for the pod (its labels are the provider's,
known to the autoscaler), so no live node is a note, not a refusal. A cluster with no GPU node at
all (a pool scaled to zero looks the same) is a note too. Without a kubeconfig nothing is
checked; an API that refuses or does not answer is a note."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.pipelines.cluster.resources import GPU_MEMORY_LABEL

Packages = dict[str, tuple[Path, list[dict[str, Any]]]]  # pipeline -> (file, documents)
# schemes whose node labels no autoscaler scales a pool up for: no live node is no node ever
NO_AUTOSCALER = ("gfd", "labels")

_UNITS = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
          "Ti": 2**40}  # fmt: skip


def quantity(text: str | None) -> float:
    """Bytes of a Kubernetes quantity (`120Gi`, `500G`, `1073741824`); 0 if none."""
    found = re.fullmatch(r"([0-9.]+)([kMGT]i?)?", text or "")
    return float(found[1]) * _UNITS[found[2] or ""] if found else 0.0


def placements(packages: Packages, classes: list[str]) -> list[dict[str, Any]]:
    """Every GPU placement the packages ask for: GPUs, the per-GPU memory (MiB, or the
    autocomp.io size label), tolerations, the largest /scratch, and the steps. Score classes
    not in `classes` are left out."""
    import json

    from autocomp.pipelines.cluster.packages import compiled_gpu_floor, executors_config
    from autocomp.pipelines.cluster.placement import requirement

    found: dict[tuple, dict[str, Any]] = {}
    for _, docs in packages.values():
        executors = docs[0].get("deploymentSpec", {}).get("executors", {})
        for label, config in executors_config(docs).items():
            accel = executors.get(label, {}).get("container", {}).get("resources", {})
            gpus = int(accel.get("accelerator", {}).get("resourceCount", 0) or 0)
            step = label.removeprefix("exec-")
            if not gpus or (step.startswith("score-") and re.match(r"score-\d+x", step)
                            and step.removeprefix("score-") not in classes):  # fmt: skip
                continue
            labels, expressions = requirement(config)
            key = (gpus, compiled_gpu_floor(config), tuple(sorted(labels.items())),
                   json.dumps(expressions, sort_keys=True))  # fmt: skip
            place = found.setdefault(key, {"gpus": gpus, "floor": key[1], "labels": labels,
                                           "expressions": expressions,
                                           "tolerations": config.get("tolerations", []),
                                           "disk": 0.0, "steps": []})  # fmt: skip
            place["steps"].append(step)
            for mount in config.get("emptyDirMounts", []):
                place["disk"] = max(place["disk"], quantity(mount.get("sizeLimit")))
    return sorted(found.values(), key=lambda p: (p["gpus"], p["floor"] or 0))


def _tolerated(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    if taint.get("effect") == "PreferNoSchedule":
        return True
    return any(
        t.get("key") == taint.get("key")
        and (t.get("operator") == "Exists" or t.get("value") == taint.get("value"))
        and t.get("effect") in (None, "", taint.get("effect"))
        for t in tolerations
    )


def fitting(place: dict[str, Any], node: dict[str, Any]) -> str | None:
    """Why `node` cannot run `place` (None: it can)."""
    from autocomp.pipelines.cluster.placement import unmet

    if node["gpus"] < place["gpus"]:
        return f"{node['gpus']} GPUs"
    memory = node["labels"].get(GPU_MEMORY_LABEL)
    if place["floor"] and place["labels"]:  # autocomp.io/gpu-<N>gb
        missing = [k for k, v in place["labels"].items() if node["labels"].get(k) != v]
        if missing:
            return f"no label {', '.join(missing)}"
    elif place["floor"] and _mib(memory) < place["floor"]:
        return f"{GPU_MEMORY_LABEL} {memory or 'absent'} < {place['floor']}"
    elif not place["floor"]:  # another scheme (cluster.placement): as the scheduler decides
        why = unmet(node["labels"], place["labels"], place.get("expressions", []))
        if why:
            return why
    for taint in node.get("taints", []):
        if not _tolerated(taint, place["tolerations"]):
            shown = f"{taint['key']}{'=' + taint['value'] if taint.get('value') else ''}"
            return (
                f"taint {shown}:{taint['effect']} (compile --toleration {shown}:{taint['effect']})"
            )
    if place["disk"] and node.get("ephemeral") and quantity(node["ephemeral"]) < place["disk"]:
        return f"{node['ephemeral']} of local disk < the /scratch limit"
    return None


def _mib(text: str | None) -> int:
    """A GPU memory label in MiB; 0 when absent or not a whole number (e.g. `80GB`: the
    scheduler's Gt does not match it either)."""
    from autocomp.pipelines.cluster.placement import _int

    return max(_int(text) or 0, 0)


def check_nodes(
    pipeline: str,
    params: dict[str, Any],
    docs: list[dict[str, Any]],
    note: Callable[[str], None] | None = None,
) -> None:
    """Refuse (one UsageError) a run that scores a model whose class no live node takes, where
    no autoscaler can add one (see the module doc); a note otherwise, or when nodes cannot be
    read. `params`: the run's parameters (the package's defaults fill in the rest)."""
    from autocomp.pipelines import plumbing
    from autocomp.pipelines.cluster import kube as kubeapi
    from autocomp.pipelines.cluster.placement import stamped
    from autocomp.pipelines.cluster.plan import ALL, in_all, score_groups

    if "evaluate_models" not in plumbing.parts(pipeline):
        return
    from autocomp.pipelines.cluster.packages import _default, input_definitions

    defaults = {k: _default(d) for k, d in input_definitions(docs[0]).items()
                if "defaultValue" in d}  # fmt: skip
    models = list({**defaults, **params}.get("models") or [ALL])
    wanted = set(in_all()[0] if models == [ALL] else models)
    classes = {c.name: sorted(set(m) & wanted) for c, m in score_groups().items() if c.gpus}
    classes = {name: hit for name, hit in classes.items() if hit}
    if not classes:
        return
    try:
        nodes = kubeapi.connect().nodes()
    except kubeapi.Unavailable:
        return  # no kubeconfig here: nothing to read (doctor names what to check by hand)
    except kubeapi.KubeError as exc:
        if note is not None:
            note(f"GPU nodes not checked ({exc}); `autocomp doctor` checks them with a kubeconfig")
        return
    if not any(n["gpus"] for n in nodes):  # a pool scaled to zero looks the same: say it only
        if note is not None:
            note(f"no GPU node in this cluster now; the run's GPU pods wait for one "
                 f"({', '.join(sorted(classes))})")  # fmt: skip
        return
    scheme, _ = stamped(docs[0])
    for place in placements({pipeline: (Path(), docs)}, list(classes)):
        scored = [s.removeprefix("score-") for s in place["steps"] if s.startswith("score-")]
        hit = [m for name in scored for m in classes.get(name, [])]
        if not hit or any(fitting(place, n) is None for n in nodes):
            continue
        why = "; ".join(f"{n['name']}: {fitting(place, n)}" for n in nodes if n["gpus"])[:300]
        said = (f"needs {place['gpus']} GPU(s) (score-{scored[0]}) and no node of this cluster "
                f"takes it ({why or 'no GPU nodes'})")  # fmt: skip
        if scheme in NO_AUTOSCALER:
            raise UsageError("models", hit[0], f"{said}, and no autoscaler adds one for the "
                             f"{scheme} placement: its pods would wait forever; leave it out, "
                             "add such a node (`autocomp doctor` says which), or recompile with "
                             "your platform's --placement")  # fmt: skip
        if note is not None:
            note(f"{hit[0]} {said}; the {scheme} placement lets an autoscaler add one")
