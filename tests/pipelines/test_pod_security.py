"""Every pod autocomp ships (manifests/, built with `kubectl kustomize`, and the examples) or
writes (the warm-up Job compile writes, doctor's probe pod, the compiled pipeline steps' Kubernetes
settings) passes the Pod Security Standards' `restricted` profile, which Kubeflow 1.11 enforces
on its `kubeflow` namespace (kubeflow/manifests v1.11.0 common/kubeflow-namespace/base/
namespace.yaml: pod-security.kubernetes.io/enforce: restricted). kubernetes-validate checks the
schema, not admission: `violations` is the standard's table, control by control
(https://kubernetes.io/docs/concepts/security/pod-security-standards/, v1.30; the same rules as
k8s.io/pod-security-admission policy/check_*.go)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
KUBECTL = shutil.which("kubectl")

# Baseline "Capabilities": the adds allowed (check_capabilities_baseline.go)
BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                 "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}  # fmt: skip
# Restricted "Volume Types" (check_restrictedVolumes.go)
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}  # fmt: skip
# Baseline "Sysctls": the safe set (check_sysctls.go)
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}  # fmt: skip


def violations(spec: dict[str, Any]) -> list[str]:
    """What in a PodSpec the `restricted` profile (baseline's controls included) forbids."""
    found: list[str] = []
    pod = spec.get("securityContext") or {}
    containers = [(c["name"], c) for key in ("initContainers", "containers",
                  "ephemeralContainers") for c in spec.get(key) or []]  # fmt: skip
    # baseline: host namespaces, host process, sysctls, /proc, SELinux, AppArmor
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            found.append(f"host namespaces: {key}")
    if (pod.get("windowsOptions") or {}).get("hostProcess"):
        found.append("hostProcess")
    for sysctl in pod.get("sysctls") or []:
        if sysctl["name"] not in SAFE_SYSCTLS:
            found.append(f"sysctl {sysctl['name']}")
    pod_seccomp = (pod.get("seccompProfile") or {}).get("type")
    if pod_seccomp == "Unconfined":
        found.append("pod seccompProfile Unconfined")
    if pod.get("runAsUser") == 0:
        found.append("pod runAsUser 0")
    for volume in spec.get("volumes") or []:
        kind = next(k for k in volume if k != "name")
        if kind not in RESTRICTED_VOLUMES:
            found.append(f"volume {volume['name']}: {kind}")
    for name, c in containers:
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            found.append(f"{name}: privileged")
        if sc.get("procMount", "Default") != "Default":
            found.append(f"{name}: procMount")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            found.append(f"{name}: hostPort")
        caps = sc.get("capabilities") or {}
        added = set(caps.get("add") or [])
        if added - BASELINE_CAPS or added - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: adds capabilities {sorted(added - {'NET_BIND_SERVICE'})}")
        if "ALL" not in (caps.get("drop") or []):
            found.append(f"{name}: does not drop ALL capabilities")
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation is not false")
        non_root = sc.get("runAsNonRoot", pod.get("runAsNonRoot"))
        if non_root is not True:
            found.append(f"{name}: runAsNonRoot is not true")
        if sc.get("runAsUser") == 0:
            found.append(f"{name}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile is {seccomp or 'unset'}")
    return found


def pod_specs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """kind/name -> the PodSpec of every workload among `docs`."""
    found = {}
    for doc in docs:
        kind, name = doc.get("kind"), doc.get("metadata", {}).get("name")
        if kind == "Pod":
            found[f"{kind}/{name}"] = doc["spec"]
        elif kind in ("Job", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"):
            found[f"{kind}/{name}"] = doc["spec"]["template"]["spec"]
        elif kind == "CronJob":
            found[f"{kind}/{name}"] = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return found


def test_the_checker_refuses_what_the_standard_forbids():
    good = {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "a", "securityContext": {
                "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}  # fmt: skip
    assert violations(good) == []
    root_init = {**good, "initContainers": [{"name": "prepare", "securityContext": {
        "runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]}}}]}  # fmt: skip
    assert violations(root_init) == [
        "prepare: adds capabilities ['CHOWN', 'FOWNER']",
        "prepare: runAsNonRoot is not true",
        "prepare: runAsUser 0",
    ]
    no_seccomp = {**good, "securityContext": {"runAsNonRoot": True}}
    assert violations(no_seccomp) == ["a: seccompProfile is unset"]
    host = {**good, "volumes": [{"name": "h", "hostPath": {"path": "/"}}], "hostNetwork": True}
    assert violations(host) == ["host namespaces: hostNetwork", "volume h: hostPath"]


def _built(overlay: str, tmp_path: Path) -> list[dict[str, Any]]:
    kustomization = {"resources": [os.path.relpath(MANIFESTS / "overlays" / overlay, tmp_path)]}
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    built = subprocess.run([KUBECTL, "kustomize", str(tmp_path)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return [d for d in yaml.safe_load_all(built.stdout) if d]


@pytest.mark.skipif(KUBECTL is None, reason="needs kubectl (kustomize)")
@pytest.mark.parametrize("overlay", sorted(p.name for p in (MANIFESTS / "overlays").iterdir()))
def test_every_pod_the_manifests_ship_is_restricted(overlay, tmp_path):
    pods = pod_specs(_built(overlay, tmp_path))
    assert {name: violations(spec) for name, spec in pods.items()} == {n: [] for n in pods}


def test_every_pod_in_any_manifest_file_is_restricted():
    seen = 0
    for path in sorted(MANIFESTS.rglob("*.yaml")):
        pods = pod_specs([d for d in yaml.safe_load_all(path.read_text()) if d])
        assert {name: violations(spec) for name, spec in pods.items()} == {n: [] for n in pods}
        seen += len(pods)
    assert seen >= 3  # the warm-up Job, the dev MinIO, the submit Job example


def test_the_warmup_job_compile_writes_and_the_probe_pod_are_restricted():
    from autocomp.pipelines.cluster import warmup
    from autocomp.pipelines.cluster.doctor import probe_pod

    (job,) = [d for d in yaml.safe_load_all(warmup.render("r.example/gpu:1", ("regcred",))) if d]
    assert violations(job["spec"]["template"]["spec"]) == []
    assert violations(probe_pod("s3://b/p", "r.example/core:1", [])["spec"]) == []


@pytest.mark.slow
def test_the_compiled_steps_ask_for_nothing_the_restricted_profile_forbids(dist_for):
    """A step's pod is made by KFP's driver from the package's Kubernetes settings: the volumes
    and scheduling autocomp asks for must all be allowed (no hostPath, no host namespaces)."""
    for backend in (None, "2.5.0"):
        folder = dist_for(backend)
        for path in sorted(folder.glob("*.yaml")):
            docs = list(yaml.safe_load_all(path.read_text()))
            executors = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
            allowed = {"pvcMount": "persistentVolumeClaim", "emptyDirMounts": "emptyDir",
                       "secretAsEnv": "secret", "secretAsVolume": "secret",
                       "configMapAsEnv": "configMap", "configMapAsVolume": "configMap",
                       "imagePullSecret": None, "nodeSelector": None, "nodeAffinity": None,
                       "tolerations": None, "activeDeadlineSeconds": None}  # fmt: skip
            for label, config in executors.items():
                odd = sorted(set(config) - set(allowed))
                assert not odd, (path.name, label, odd)
