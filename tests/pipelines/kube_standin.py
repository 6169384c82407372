"""A local HTTP stand-in of the three Kubernetes API reads `autocomp doctor` makes (no cluster
can run here): GET a namespaced Secret, a namespaced PersistentVolumeClaim, and the node list.
Objects are real v1 JSON; a missing object is the API server's 404 `Status` (reason NotFound).
A kubeconfig pointing at it is written by `kubeconfig()`."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

_NAMESPACED = re.compile(r"^/api/v1/namespaces/([^/]+)/(secrets|persistentvolumeclaims)/([^/]+)$")
_KINDS = {"secrets": "Secret", "persistentvolumeclaims": "PersistentVolumeClaim"}


class KubeStandIn:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict] = {}  # (namespace, plural, name) -> body
        self.nodes: list[dict] = []
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

    def add_node(self, name: str, gpus: int, labels: dict[str, str]) -> None:
        self.nodes.append({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "32", "nvidia.com/gpu": str(gpus)}},
        })  # fmt: skip

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "standin",
            "clusters": [{"name": "standin", "cluster": {"server": self.host}}],
            "users": [{"name": "me", "user": {"token": "t"}}],
            "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "me"}}],
        }))  # fmt: skip
        return path

    def answer(self, path: str) -> tuple[int, dict]:
        if path == "/api/v1/nodes":
            return 200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                         "items": self.nodes}  # fmt: skip
        found = _NAMESPACED.match(path)
        if found and (key := (found[1], found[2], found[3])) in self.objects:
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

            def do_GET(self) -> None:  # noqa: N802
                status, payload = standin.answer(self.path.split("?")[0])
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
