"""docs/cluster.md's three walk-throughs ("Kubeflow 1.10 on EKS", "Kubeflow 1.11 multi-user on
GKE", "standalone KFP 2.5 on one node"): the packages compiled with each one's settings, checked
for what the sources say would block the run: GPU placement (only labels the platform sets, and
the platform's nodes take every GPU step and score class), Pod Security admission (the warm-up
Job compile writes, the steps' Kubernetes settings), the namespace its manifests go to, and the
capacity check on its store (a bucket of the user's own; KFP's own 20Gi store refused). The
store policy is the store section's and tests/infra/test_store_policy.py's."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from autocomp.pipelines.cluster import placement
from autocomp.pipelines.cluster.doctor import fitting, placements
from autocomp.pipelines.cluster.plan import score_groups
from tests.pipelines.test_pod_security import pod_specs, violations

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "cluster.md").read_text()
KUBECTL = shutil.which("kubectl")
PROFILE = "kubeflow-user-example-com"


@dataclass(frozen=True)
class Walk:
    title: str
    backend: str | None
    placement: str
    gpu_labels: tuple[str, ...]
    overlay: str
    component: str
    namespace: str
    compile_line: str
    nodes: tuple[dict, ...]  # the GPU nodes the walk-through's platform would bring up


def _node(name: str, gpus: int, labels: dict) -> dict:
    return {"name": name, "gpus": gpus, "labels": labels, "taints": [], "ephemeral": "2Ti"}


def _eks(kind: str, gpus: int) -> dict:
    return _node(kind, gpus, {"node.kubernetes.io/instance-type": kind,
                              "eks.amazonaws.com/nodegroup": kind.replace(".", "-")})  # fmt: skip


def _gke(accelerator: str, gpus: int) -> dict:
    return _node(accelerator, gpus, {"cloud.google.com/gke-accelerator": accelerator})


WALKS = (
    Walk("Kubeflow 1.10 on EKS", "2.5.0", "eks", (), "multi-user", "model-cache-eks", PROFILE,
         "autocomp compile --out dist --backend 2.5.0 --placement eks",
         # one managed node group per type the 2.5 package selects (node selectors only)
         (_eks("g4dn.xlarge", 1), _eks("g5.xlarge", 1), _eks("g6e.xlarge", 1),
          _eks("g6e.12xlarge", 4), _eks("p4de.24xlarge", 8))),
    Walk("Kubeflow 1.11 multi-user on GKE", None, "gke", (), "multi-user", "model-cache-gke",
         PROFILE, "autocomp compile --out dist --placement gke",
         (_gke("nvidia-l4", 1), _gke("nvidia-tesla-a100", 1), _gke("nvidia-h100-80gb", 8))),
    Walk("Standalone KFP 2.5 on one node", "2.5.0", "labels", ("80:autocomp.io/pool=gpu",),
         "kubeflow-store", "model-cache-single-node", "kubeflow",
         "autocomp compile --out dist --backend 2.5.0 --placement labels --gpu-label "
         "80:autocomp.io/pool=gpu",
         (_node("gpu-1", 8, {"autocomp.io/pool": "gpu"}),)),
)  # fmt: skip


def _section(walk: Walk) -> str:
    start = DOC.index(f"### {walk.title}")
    end = DOC.find("\n## ", start)
    return DOC[start:end]


@pytest.mark.parametrize("walk", WALKS, ids=[w.placement for w in WALKS])
def test_the_doc_holds_the_walkthrough_as_tested(walk):
    section = _section(walk)
    assert walk.compile_line in section
    assert f"manifests/overlays/{walk.overlay}" in section
    assert f"manifests/components/{walk.component}" in section
    assert f"namespace: {'$NS' if walk.namespace == PROFILE else walk.namespace}" in section
    assert "count=1000" in section


@pytest.mark.slow
@pytest.mark.parametrize("walk", WALKS, ids=[w.placement for w in WALKS])
def test_every_gpu_step_lands_on_the_platforms_nodes_by_labels_it_sets(walk, dist_for):
    dist = dist_for(walk.backend, placement=walk.placement, gpu_labels=walk.gpu_labels)
    packages = {}
    for path in sorted(dist.glob("*.yaml")):
        docs = list(yaml.safe_load_all(path.read_text()))
        packages[path.stem] = (path, docs)
        assert placement.stamped(docs[0]) == (walk.placement, [])  # every class placed
        assert "autocomp.io/gpu-" not in path.read_text()  # no label a node only gets by hand
    classes = [c.name for c in score_groups() if c.gpus]
    places = placements(packages, classes)
    placed = {step for place in places for step in place["steps"]}
    assert {f"score-{c}" for c in classes} | {"caption", "render", "validate"} <= placed
    for place in places:
        fits = [n["name"] for n in walk.nodes if fitting(place, n) is None]
        assert fits, (place["steps"], [fitting(place, n) for n in walk.nodes])


@pytest.mark.slow
@pytest.mark.parametrize("walk", WALKS, ids=[w.placement for w in WALKS])
def test_what_the_walkthrough_runs_passes_admission(walk, dist_for):
    dist = dist_for(walk.backend, placement=walk.placement, gpu_labels=walk.gpu_labels)
    job = pod_specs([d for d in yaml.safe_load_all((dist / "jobs/model-cache-warmup.yaml")
                                                   .read_text()) if d])  # fmt: skip
    assert {k: violations(v) for k, v in job.items()} == {k: [] for k in job}
    allowed = {"pvcMount", "emptyDirMounts", "secretAsEnv", "imagePullSecret", "nodeSelector",
               "nodeAffinity", "tolerations", "activeDeadlineSeconds"}  # fmt: skip
    for path in dist.glob("*.yaml"):
        platform = list(yaml.safe_load_all(path.read_text()))[1]
        for label, config in platform["platforms"]["kubernetes"]["deploymentSpec"][
            "executors"
        ].items():
            assert set(config) <= allowed, (path.name, label, set(config) - allowed)


@pytest.mark.infra
@pytest.mark.skipif(KUBECTL is None, reason="needs kubectl (kustomize)")
@pytest.mark.parametrize("walk", WALKS, ids=[w.placement for w in WALKS])
def test_the_manifests_go_to_the_namespace_the_runs_execute_in(walk, tmp_path):
    kustomization = {
        "resources": [os.path.relpath(ROOT / "manifests/overlays" / walk.overlay, tmp_path)],
        "components": [os.path.relpath(ROOT / "manifests/components" / walk.component, tmp_path)],
        "namespace": walk.namespace,
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    built = subprocess.run([KUBECTL, "kustomize", str(tmp_path)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    docs = [d for d in yaml.safe_load_all(built.stdout) if d]
    namespaced = [d for d in docs if d["kind"] not in ("ClusterRole", "ClusterRoleBinding")]
    assert {d["metadata"].get("namespace") for d in namespaced} == {walk.namespace}
    assert {k: violations(v) for k, v in pod_specs(docs).items()} == {
        k: [] for k in pod_specs(docs)
    }


@pytest.mark.parametrize("walk", WALKS, ids=[w.placement for w in WALKS])
def test_the_walkthroughs_store_passes_the_capacity_check_that_refuses_kfps_own(walk):
    """Each walk-through's run at --count 1000 (the pipeline's default) goes to a bucket of the
    user's own, which the capacity check lets through (its room unknown: said, not refused);
    the same run on KFP's own 20Gi store is refused before any request (storecap.py)."""
    import re

    from autocomp.errors import UsageError
    from autocomp.pipelines import plumbing
    from autocomp.pipelines.cluster.storecap import check_store_room

    stores = set(re.findall(r"store=(s3://\S+)", _section(walk)))
    assert len(stores) <= 1 and (stores or walk.placement == "labels")
    store = next(iter(stores), "s3://my-autocomp-bucket/autocomp")
    assert not store.startswith(f"s3://{plumbing.DEFAULT_STORE.split('/')[2]}/")
    params = {**plumbing.defaults("generate_benchmark"), "count": 1000, "store": store}
    notes: list[str] = []
    said = check_store_room("generate_benchmark", params, None, notes.append)
    assert "planned" in said and notes == [said]  # the bytes said, the room to declare named
    with pytest.raises(UsageError, match="cannot hold this run"):
        check_store_room("generate_benchmark", {**params, "store": plumbing.DEFAULT_STORE})
