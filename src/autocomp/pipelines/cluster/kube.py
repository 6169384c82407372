"""What autocomp reads from (and, for doctor's store probe, runs on) the Kubernetes API, through
the `kubernetes` client and the user's kubeconfig: Secrets, the model-cache claim and its storage
class, nodes, KFP's install ConfigMap (the backend version when the API server says "unknown"),
image pull secrets, and one short-lived probe Pod. Every call raises Unavailable (with why) when
there is no client or kubeconfig, or KubeError with the API server's reason, or with why it did
not answer (refused, or silent past the network deadline: autocomp.network), or what in its
answer cannot be read (a Secret's data that is not base64)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any

# KFP's install ConfigMap (manifests/kustomize/base/installs/generic/pipeline-install-config.yaml
# at every tag 2.2.0-2.17.0: `appVersion: <version>`), in the namespace KFP is installed in.
INSTALL_CONFIG = ("pipeline-install-config", "appVersion")
KFP_NAMESPACE = "kubeflow"


class Unavailable(Exception):
    """No Kubernetes client or kubeconfig here."""


class KubeError(Exception):
    """The API server refused or failed a request (`reason`: its reason, e.g. Not Found)."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass
class Kube:
    core: Any
    storage: Any
    errors: Any  # kubernetes' ApiException (the client library is untyped)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from urllib3.exceptions import HTTPError

        from autocomp.network import ENV, deadline

        try:
            return fn(*args, _request_timeout=deadline().pair, **kwargs)
        except self.errors as exc:
            raise KubeError(str(exc.reason), exc.status) from None
        except HTTPError as exc:  # refused, reset, or silent past the deadline
            why = type(getattr(exc, "reason", None) or exc).__name__
            raise KubeError(f"the Kubernetes API did not answer ({why}; deadline: "
                            f"{deadline().read:g} s, ${ENV})") from None  # fmt: skip

    def secret(self, namespace: str, name: str) -> dict[str, str]:
        """The Secret's data, decoded (data that is not base64 is a KubeError naming the key)."""
        import binascii

        found = self._call(self.core.read_namespaced_secret, name, namespace)
        data = {}
        for key, value in (found.data or {}).items():
            try:
                data[key] = base64.b64decode(value, validate=True).decode(errors="replace")
            except (binascii.Error, ValueError):
                raise KubeError(f"Secret {name}: the data of key {key} is not base64") from None
        return data

    def secret_type(self, namespace: str, name: str) -> str:
        return self._call(self.core.read_namespaced_secret, name, namespace).type or ""

    def claim(self, namespace: str, name: str) -> dict[str, Any]:
        """The claim's phase, storage class, access modes and capacity."""
        found = self._call(self.core.read_namespaced_persistent_volume_claim, name, namespace)
        return {
            "phase": found.status.phase if found.status else None,
            "class": found.spec.storage_class_name,
            "access_modes": list(found.spec.access_modes or []),
            "capacity": (found.status.capacity or {}).get("storage") if found.status else None,
            "requested": (found.spec.resources.requests or {}).get("storage"),
        }

    def storage_class(self, name: str | None) -> dict[str, Any] | None:
        """The class (the default class when `name` is None): provisioner, binding mode."""
        if name is None:
            classes = self._call(self.storage.list_storage_class).items
            marked = [c for c in classes if (c.metadata.annotations or {}).get(
                "storageclass.kubernetes.io/is-default-class") == "true"]  # fmt: skip
            if not marked:
                return None
            found = marked[0]
        else:
            found = self._call(self.storage.read_storage_class, name)
        return {"name": found.metadata.name, "provisioner": found.provisioner,
                "binding": found.volume_binding_mode or "Immediate"}  # fmt: skip

    def nodes(self) -> list[dict[str, Any]]:
        """Every node: name, allocatable GPUs and ephemeral storage, labels, taints."""
        found = []
        for node in self._call(self.core.list_node).items:
            allocatable = node.status.allocatable or {} if node.status else {}
            found.append({
                "name": node.metadata.name,
                "gpus": gpu_count(allocatable.get("nvidia.com/gpu")),
                "ephemeral": allocatable.get("ephemeral-storage"),
                "labels": node.metadata.labels or {},
                "taints": [{"key": t.key, "value": t.value, "effect": t.effect}
                           for t in (node.spec.taints or [])] if node.spec else [],
            })  # fmt: skip
        return found

    def install_version(self, namespace: str = KFP_NAMESPACE) -> str | None:
        name, key = INSTALL_CONFIG
        found = self._call(self.core.read_namespaced_config_map, name, namespace)
        return (found.data or {}).get(key)

    def registry_auth(self, namespace: str, secret: str) -> dict[str, dict[str, str]]:
        """registry host -> {username, password} from a docker-registry Secret."""
        data = self.secret(namespace, secret)
        raw = data.get(".dockerconfigjson") or data.get(".dockercfg") or "{}"
        try:
            return docker_auths(json.loads(raw))
        except (ValueError, AttributeError):
            raise KubeError(f"Secret {secret}: not a docker config (JSON with `auths`)") from None

    def run_pod(self, namespace: str, pod: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
        """Create `pod`, wait for it to end (or `timeout`), return its phase, the waiting reason
        of a container that never started (e.g. ErrImagePull) and its log; delete it."""
        name = pod["metadata"]["name"]
        self._call(self.core.create_namespaced_pod, namespace, pod)
        try:
            deadline = time.monotonic() + timeout
            while True:
                found = self._call(self.core.read_namespaced_pod, name, namespace)
                phase = found.status.phase if found.status else None
                waiting = _waiting_reason(found)
                if phase in ("Succeeded", "Failed") or waiting in _STUCK:
                    break
                if time.monotonic() > deadline:
                    waiting = waiting or "timed out"
                    break
                time.sleep(1)
            log = ""
            if phase in ("Succeeded", "Failed"):
                log = self._call(self.core.read_namespaced_pod_log, name, namespace)
            return {"phase": phase, "waiting": waiting, "log": log}
        finally:
            with contextlib.suppress(KubeError):  # gone already, or not ours to delete
                self._call(self.core.delete_namespaced_pod, name, namespace)


_STUCK = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError")


def _waiting_reason(pod: Any) -> str | None:
    statuses = (pod.status.container_statuses or []) if pod.status else []
    for status in statuses:
        if status.state and status.state.waiting and status.state.waiting.reason:
            return status.state.waiting.reason
    return None


def gpu_count(text: Any) -> int:
    """A node's allocatable GPUs from its quantity (`1`, `8`, `1k` = 1000); 0 for none or a
    value that is not a whole quantity."""
    import re

    found = re.fullmatch(r"([0-9]{1,9})([kMG]?)", str(text or "0").strip())
    if not found:
        return 0
    return int(found[1]) * {"": 1, "k": 10**3, "M": 10**6, "G": 10**9}[found[2]]


def docker_auths(config: dict[str, Any]) -> dict[str, dict[str, str]]:
    """registry host -> {username, password} from a docker config's `auths`."""
    found = {}
    for host, entry in (config.get("auths") or {}).items():
        user, password = entry.get("username"), entry.get("password")
        if entry.get("auth") and not user:
            try:
                decoded = base64.b64decode(entry["auth"], validate=True).decode()
            except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
                continue
            user, _, password = decoded.partition(":")
        if user:
            key = host.removeprefix("https://").removeprefix("http://").split("/")[0]
            found[key] = {"username": user, "password": password or ""}
    return found


def connect() -> Kube:
    """The Kubernetes API of the current kubeconfig context; Unavailable when there is none."""
    try:
        from kubernetes import client, config

        configuration = client.Configuration()
        # the library reads $KUBECONFIG once, at import; read it now
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG") or None,
                                client_configuration=configuration)  # fmt: skip
    except Exception as exc:  # noqa: BLE001  (no client or no kubeconfig: the caller says so)
        raise Unavailable(f"no kubeconfig ({type(exc).__name__})") from None
    configuration.retries = False  # one attempt within the deadline (Kube._call), said at once
    api = client.ApiClient(configuration)
    return Kube(client.CoreV1Api(api), client.StorageV1Api(api), client.ApiException)
