"""A local HTTP stand-in of the KFP REST API v2beta1 (no KFP server can run here).

It implements the endpoints kfp.Client uses for upload, versioning, experiments, runs and
recurring runs, with the real wire format (JSON with snake_case fields, multipart uploads),
keeps state in memory, and records every request so tests can assert what the real client sent.
Like the real server, it keeps each uploaded package and refuses a run or recurring run whose
runtime parameters do not match that version's `root.inputDefinitions` (an unknown name, a value
of the wrong type, a required parameter missing) with HTTP 400 and grpc-gateway's error body
(`{"error", "code": 3 (INVALID_ARGUMENT), "message", "details"}`); an unknown pipeline version is
404 (`code` 5, NOT_FOUND). The v2beta1 /healthz answers `multi_user` (and the store kind), the
v1beta1 one `tag_name` (the KFP version) too, as the real server's do.
"""

from __future__ import annotations

import json
import threading
import uuid
from email.parser import BytesParser
from email.policy import default
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import yaml

API = "/apis/v2beta1"
TIME = "2026-11-30T00:00:00Z"


class KfpStandIn:
    def __init__(
        self, tag_name: str = "2.14.3", multi_user: bool = False, token: str | None = None
    ) -> None:
        self.tag_name = tag_name
        self.token = token  # when set, every request needs `Authorization: Bearer <token>`
        self.multi_user = multi_user
        self.packages: dict[str, dict] = {}  # version id -> the uploaded pipeline spec
        self.requests: list[dict] = []
        self.pipelines: dict[str, dict] = {}
        self.versions: dict[str, list[dict]] = {}
        self.experiments: dict[str, dict] = {}
        self.runs: list[dict] = []
        self.recurring: list[dict] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()

    # ------------------------------------------------------------------ routing

    def handle(self, method: str, path: str, query: dict, body: dict | None, files: dict) -> tuple:
        if path == "/apis/v1beta1/healthz" and method == "GET":  # the one v1 call: the version
            return 200, self._healthz()
        if not path.startswith(API):
            return 404, {"error": f"not the v2beta1 API: {path}"}
        route = path[len(API) :]
        if route == "/healthz" and method == "GET":
            return 200, {"multi_user": self.multi_user, "pipeline_store": "database"}
        if route == "/pipelines/upload" and method == "POST":
            return self._upload(query, files)
        if route == "/pipelines/upload_version" and method == "POST":
            return self._upload_version(query, files)
        if route == "/pipelines" and method == "GET":
            return self._list_pipelines(query)
        if route.startswith("/pipelines/") and route.count("/") == 2 and method == "GET":
            pid = route.split("/")[2]
            if pid not in self.pipelines:
                return 404, {"error": f"no pipeline {pid}"}
            return 200, self.pipelines[pid]
        if route.startswith("/pipelines/") and route.endswith("/versions") and method == "GET":
            pid = route.split("/")[2]
            versions = sorted(
                self.versions.get(pid, []),
                key=lambda v: v["created_at"],
                reverse="desc" in query.get("sort_by", [""])[0],
            )
            return 200, {"pipeline_versions": versions, "total_size": len(versions)}
        if route == "/experiments" and method == "GET":
            name = _filter_value(query)
            found = [e for e in self.experiments.values() if e["display_name"] == name]
            return 200, {"experiments": found, "total_size": len(found)}
        if route == "/experiments" and method == "POST":
            exp = {
                "experiment_id": str(uuid.uuid4()),
                "display_name": body["display_name"],
                "created_at": TIME,
                "storage_state": "AVAILABLE",
            }
            self.experiments[exp["experiment_id"]] = exp
            return 200, exp
        if route in ("/recurringruns", "/runs") and method == "POST":
            refused = self._check_runtime(body)
            if refused:
                return refused
        if route == "/recurringruns" and method == "POST":
            run = {
                **body,
                "recurring_run_id": str(uuid.uuid4()),
                "status": "ENABLED",
                "created_at": TIME,
            }
            self.recurring.append(run)
            return 200, run
        if route == "/runs" and method == "POST":
            run = {**body, "run_id": str(uuid.uuid4()), "state": "PENDING", "created_at": TIME}
            self.runs.append(run)
            return 200, run
        return 404, {"error": f"no route {method} {route}"}

    def _healthz(self) -> dict:
        return {"commit_sha": "0" * 40, "tag_name": self.tag_name, "multi_user": self.multi_user}

    def _check_runtime(self, body: dict) -> tuple | None:
        reference = body.get("pipeline_version_reference") or {}
        spec = self.packages.get(reference.get("pipeline_version_id"))
        if spec is None:
            return _status(404, 5, f"pipeline version {reference} not found")
        definitions = spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
        given = (body.get("runtime_config") or {}).get("parameters") or {}
        for name, value in given.items():
            if name not in definitions:
                return _status(400, 3, f"Invalid input error: unknown parameter {name!r}")
            kind = definitions[name]["parameterType"]
            if not _is_kind(value, kind):
                return _status(400, 3, f"Invalid input error: parameter {name!r} expects {kind}, "
                                       f"got {json.dumps(value)}")  # fmt: skip
        for name, d in definitions.items():
            if name not in given and "defaultValue" not in d and not d.get("isOptional"):
                return _status(400, 3, f"Invalid input error: parameter {name!r} is required")
        return None

    def _upload(self, query: dict, files: dict) -> tuple:
        name = query.get("name", [None])[0]
        if any(p["display_name"] == name for p in self.pipelines.values()):
            return 409, {"error": f"pipeline {name} exists"}
        pid = str(uuid.uuid4())
        pipeline = {
            "pipeline_id": pid,
            "display_name": name,
            "created_at": TIME,
            "description": query.get("description", [""])[0],
        }
        self.pipelines[pid] = pipeline
        self.versions[pid] = []
        self._add_version(pid, name, files)
        return 200, pipeline

    def _upload_version(self, query: dict, files: dict) -> tuple:
        pid = query.get("pipelineid", [None])[0]
        name = query.get("name", [None])[0]
        if pid not in self.pipelines:
            return 404, {"error": f"no pipeline {pid}"}
        if any(v["display_name"] == name for v in self.versions[pid]):
            return 409, {"error": f"version {name} exists"}
        return 200, self._add_version(pid, name, files)

    def _add_version(self, pid: str, name: str, files: dict) -> dict:
        version = {
            "pipeline_id": pid,
            "pipeline_version_id": str(uuid.uuid4()),
            "display_name": name,
            "created_at": f"2026-11-30T00:00:{len(self.versions[pid]):02d}Z",
            "package_size": len(files.get("uploadfile", b"")),
        }
        self.packages[version["pipeline_version_id"]] = next(
            yaml.safe_load_all(files.get("uploadfile", b"{}"))
        )
        self.versions[pid].append(version)
        return version

    def _list_pipelines(self, query: dict) -> tuple:
        name = _filter_value(query)
        found = [p for p in self.pipelines.values() if name is None or p["display_name"] == name]
        return 200, {"pipelines": found, "total_size": len(found)}

    # ------------------------------------------------------------------ HTTP

    def _handler(self) -> type:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _serve(self, method: str) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body, files = None, {}
                ctype = self.headers.get("Content-Type", "")
                if ctype.startswith("multipart/form-data"):
                    files = _multipart(ctype, raw)
                elif raw:
                    body = json.loads(raw)
                standin.requests.append(
                    {
                        "method": method,
                        "path": url.path,
                        "query": query,
                        "body": body,
                        "files": files,
                        "content_type": ctype,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                    }
                )
                if standin.token and self.headers.get("Authorization") != f"Bearer {standin.token}":
                    status, payload = _status(401, 16, "Unauthenticated: no valid token")
                else:
                    status, payload = standin.handle(method, url.path, query, body, files)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

        return Handler


def _status(http: int, code: int, message: str) -> tuple:
    """grpc-gateway's error body, as the KFP API server sends it."""
    return http, {"error": message, "code": code, "message": message, "details": []}


def _is_kind(value: object, kind: str) -> bool:
    """Whether a JSON value (protobuf Value) is of a KFP parameter type."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return {
        "STRING": isinstance(value, str),
        "NUMBER_INTEGER": number and float(value).is_integer(),
        "NUMBER_DOUBLE": number,
        "BOOLEAN": isinstance(value, bool),
        "LIST": isinstance(value, list),
        "STRUCT": isinstance(value, dict),
    }.get(kind, False)


def _filter_value(query: dict) -> str | None:
    raw = query.get("filter", [None])[0]
    if not raw:
        return None
    predicates = json.loads(raw).get("predicates", [])
    for p in predicates:
        if p.get("key") in ("display_name", "name"):
            return p.get("string_value") or p.get("stringValue")
    return None


def _multipart(content_type: str, raw: bytes) -> dict[str, bytes]:
    """Form fields of a multipart/form-data body (what kfp's upload API sends)."""
    message = BytesParser(policy=default).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw
    )
    return {
        part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
        for part in message.iter_parts()
    }
