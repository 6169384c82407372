"""A local HTTP stand-in of the Kubernetes API reads and the one pod `autocomp doctor` makes (no
cluster can run here): namespaced Secrets, PersistentVolumeClaims and ConfigMaps, StorageClasses,
the node list, and Pods. Objects are real v1 JSON; a missing object is the API server's 404
`Status` (reason NotFound). A created Pod is run for real, as a kubelet would run it: its command
in a subprocess (this machine's autocomp stands in for the image) with its env resolved from the
Secrets (secretKeyRef; a missing key is CreateContainerConfigError), unless its image is not in
`pullable` (ErrImagePull). A kubeconfig pointing at it is written by `kubeconfig()`."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

_NAMESPACED = re.compile(
    r"^/api/v1/namespaces/([^/]+)/(secrets|persistentvolumeclaims|configmaps|pods)/([^/]+)(/log)?$"
)
_KINDS = {"secrets": "Secret", "persistentvolumeclaims": "PersistentVolumeClaim",
          "configmaps": "ConfigMap", "pods": "Pod"}  # fmt: skip


class KubeStandIn:
    def __init__(self, pullable: set[str] | None = None) -> None:
        self.objects: dict[tuple[str, str, str], dict] = {}  # (namespace, plural, name) -> body
        self.nodes: list[dict] = []
        self.classes: dict[str, dict] = {}
        self.pullable = pullable  # None: every image pulls
        self.logs: dict[tuple[str, str], str] = {}
        self.created: list[dict] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()

    def add(self, namespace: str, plural: str, name: str, **fields: object) -> None:
        self.objects[(namespace, plural, name)] = {
            "apiVersion": "v1",
            "kind": _KINDS[plural],
            "metadata": {"name": name, "namespace": namespace},
            **fields,
        }

    def add_secret(self, namespace: str, name: str, data: dict[str, str], kind: str = "Opaque"):
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        self.add(namespace, "secrets", name, type=kind, data=encoded)

    def add_claim(self, namespace: str, name: str, phase: str, klass: str | None,
                  modes: list[str], size: str = "1Ti") -> None:  # fmt: skip
        spec = {"accessModes": modes, "resources": {"requests": {"storage": size}}}
        if klass:
            spec["storageClassName"] = klass
        status = {"phase": phase, **({"capacity": {"storage": size}} if phase == "Bound" else {})}
        self.add(namespace, "persistentvolumeclaims", name, spec=spec, status=status)

    def add_class(self, name: str, provisioner: str, binding: str = "Immediate",
                  default: bool = False) -> None:  # fmt: skip
        marked = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
        self.classes[name] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                              "metadata": {"name": name, "annotations": marked},
                              "provisioner": provisioner, "volumeBindingMode": binding}  # fmt: skip

    def add_node(self, name: str, gpus: int, labels: dict[str, str],
                 taints: list[dict] | None = None, disk: str = "500Gi") -> None:  # fmt: skip
        self.nodes.append({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints or []},
            "status": {"allocatable": {"cpu": "32", "nvidia.com/gpu": str(gpus),
                                       "ephemeral-storage": disk}},
        })  # fmt: skip

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "standin",
            "clusters": [{"name": "standin", "cluster": {"server": self.host}}],
            "users": [{"name": "me", "user": {"token": "t"}}],
            "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "me"}}],
        }))  # fmt: skip
        return path

    # ------------------------------------------------------------------ pods

    def _run(self, namespace: str, pod: dict) -> None:
        """Run the pod's one container as the kubelet would, and record how it ended."""
        (container,) = pod["spec"]["containers"]
        name = pod["metadata"]["name"]
        status: dict = {"phase": "Pending"}
        if self.pullable is not None and container["image"] not in self.pullable:
            status["containerStatuses"] = [_waiting(container, "ErrImagePull")]
            pod["status"] = status
            return
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AUTOCOMP_S3"))}
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = item["value"]
                continue
            ref = item["valueFrom"]["secretKeyRef"]
            secret = self.objects.get((namespace, "secrets", ref["name"]), {})
            if ref["key"] not in secret.get("data", {}):
                status["containerStatuses"] = [_waiting(container, "CreateContainerConfigError")]
                pod["status"] = status
                return
            env[item["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
        command = list(container["command"])
        if command[0] == "autocomp":  # this machine's autocomp stands in for the image's
            command = [sys.executable, "-m", "autocomp.cli.main", *command[1:]]
        for mount in container.get("volumeMounts", []):  # emptyDirs: a fresh folder each
            env = {k: v.replace(mount["mountPath"], str(self._scratch)) for k, v in env.items()}
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        self.logs[(namespace, name)] = done.stdout + done.stderr
        pod["status"] = {"phase": "Succeeded" if done.returncode == 0 else "Failed"}

    @property
    def _scratch(self) -> Path:
        import tempfile

        return Path(tempfile.mkdtemp(prefix="standin-pod-"))

    # ------------------------------------------------------------------ HTTP

    def answer(self, method: str, path: str, body: dict | None) -> tuple[int, object]:
        if path == "/api/v1/nodes":
            return 200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                         "items": self.nodes}  # fmt: skip
        if path == "/apis/storage.k8s.io/v1/storageclasses":
            return 200, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClassList",
                         "metadata": {}, "items": list(self.classes.values())}  # fmt: skip
        found = re.match(r"^/apis/storage.k8s.io/v1/storageclasses/([^/]+)$", path)
        if found and found[1] in self.classes:
            return 200, self.classes[found[1]]
        created = re.match(r"^/api/v1/namespaces/([^/]+)/pods$", path)
        if created and method == "POST":
            body = {**body, "metadata": {**body["metadata"], "namespace": created[1]}}
            self.objects[(created[1], "pods", body["metadata"]["name"])] = body
            self.created.append(body)
            self._run(created[1], body)
            return 201, body
        found = _NAMESPACED.match(path)
        if found and (key := (found[1], found[2], found[3])) in self.objects:
            if method == "DELETE":
                return 200, self.objects.pop(key)
            if found[4]:
                return 200, self.logs.get((found[1], found[3]), "")
            return 200, self.objects[key]
        name = found[3] if found else path
        plural = found[2] if found else "unknown"
        return 404, {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
                     "message": f'{plural} "{name}" not found', "reason": "NotFound",
                     "details": {"name": name, "kind": plural}, "code": 404}  # fmt: skip

    def _handler(self) -> type:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                status, payload = standin.answer(method, self.path.split("?")[0], body)
                text = isinstance(payload, str)
                data = payload.encode() if text else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if text else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

            def do_DELETE(self) -> None:  # noqa: N802
                self._serve("DELETE")

        return Handler


def _waiting(container: dict, reason: str) -> dict:
    return {"name": container["name"], "image": container["image"], "ready": False,
            "restartCount": 0, "imageID": "", "state": {"waiting": {"reason": reason}}}  # fmt: skip
