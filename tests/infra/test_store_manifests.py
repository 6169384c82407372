"""autocomp's own MinIO (manifests/store/minio): builds with `kubectl kustomize`, validates
against the Kubernetes schema, takes its size and storage class from its parameters, meets Pod
Security `restricted` and is reachable under Kubeflow's Istio `global-deny-all`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "manifests" / "store" / "minio"
KUBECTL = shutil.which("kubectl")

pytestmark = [pytest.mark.infra,
              pytest.mark.skipif(KUBECTL is None, reason="no kubectl (kustomize) here")]  # fmt: skip


def _build(folder: Path) -> list[dict]:
    built = subprocess.run([KUBECTL, "kustomize", str(folder)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return [d for d in yaml.safe_load_all(built.stdout) if d]


def _one(docs: list[dict], kind: str) -> dict:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def test_the_store_builds_validates_and_keeps_to_its_namespace(tmp_path):
    docs = _build(STORE)
    assert {d["metadata"].get("namespace", d["metadata"]["name"]) for d in docs} == {
        "autocomp-store"
    }
    out = tmp_path / "built.yaml"
    out.write_text(yaml.safe_dump_all(docs))
    tool = Path(sys.executable).parent / "kubernetes-validate"
    done = subprocess.run([tool, "--strict", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (done.stdout + done.stderr).count("passed") == 5  # all but the two Istio kinds


def test_size_and_storage_class_are_parameters(tmp_path):
    """The kustomization's `params` literals (the one place to set them) reach the PVC."""
    copy = tmp_path / "minio"
    shutil.copytree(STORE, copy)
    text = (copy / "kustomization.yaml").read_text()
    assert "storageClassName=standard" in text and "size=2Ti" in text
    text = text.replace("storageClassName=standard", "storageClassName=gp3")
    (copy / "kustomization.yaml").write_text(text.replace("size=2Ti", "size=5Ti"))
    claim = _one(_build(copy), "PersistentVolumeClaim")
    assert claim["spec"]["storageClassName"] == "gp3"
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Ti"


def test_the_pod_meets_pod_security_restricted():
    """The `restricted` profile's controls (kubernetes.io/docs/concepts/security/
    pod-security-standards, Restricted), each on the pod autocomp ships."""
    pod = _one(_build(STORE), "Deployment")["spec"]["template"]["spec"]
    containers = pod["containers"] + pod.get("initContainers", [])
    allowed_volumes = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                       "persistentVolumeClaim", "projected", "secret"}  # fmt: skip
    assert all(set(v) - {"name"} <= allowed_volumes for v in pod["volumes"])
    assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    for c in containers:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and not sc.get("privileged")
        assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add")
        assert sc.get("runAsUser", pod["securityContext"]["runAsUser"]) != 0
        assert not any("hostPort" in p for p in c.get("ports", []))


def test_istio_admits_s3_traffic_to_the_store():
    docs = _build(STORE)
    pod = _one(docs, "Deployment")["spec"]["template"]
    policy, peer = _one(docs, "AuthorizationPolicy"), _one(docs, "PeerAuthentication")
    service = _one(docs, "Service")
    assert policy["spec"]["action"] == "ALLOW" and "from" not in policy["spec"]["rules"][0]
    for selected in (policy, peer):
        labels = selected["spec"]["selector"]["matchLabels"]
        assert labels.items() <= pod["metadata"]["labels"].items()
    s3 = next(p for p in service["spec"]["ports"] if p["name"] == "http-s3")
    assert policy["spec"]["rules"][0]["to"][0]["operation"]["ports"] == [str(s3["targetPort"])]
    assert pod["metadata"]["annotations"]["sidecar.istio.io/inject"] == "true"
    assert _one(docs, "Namespace")["metadata"]["labels"]["istio-injection"] == "enabled"
