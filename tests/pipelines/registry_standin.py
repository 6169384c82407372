"""A local HTTP stand-in of a container registry's manifest endpoint (OCI distribution spec:
HEAD /v2/<name>/manifests/<reference>), behind the Bearer token flow registries use: a request
without a token gets 401 with `WWW-Authenticate: Bearer realm=...,service=...,scope=...`; the realm
hands out a token, to anyone or (`credentials`) only with that Basic login."""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "registry-token"


class RegistryStandIn:
    def __init__(self, credentials: tuple[str, str] | None = None) -> None:
        self.manifests: set[tuple[str, str]] = set()  # (repository, tag or digest)
        self.credentials = credentials
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()

    def push(self, repository: str, reference: str) -> None:
        self.manifests.add((repository, reference))

    def _handler(self) -> type:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                if not self.path.startswith("/token"):
                    return self._send(404, {})
                login = self.headers.get("Authorization", "")
                if standin.credentials:
                    wanted = base64.b64encode(":".join(standin.credentials).encode()).decode()
                    if login != f"Basic {wanted}":
                        return self._send(401, {})
                body = json.dumps({"token": TOKEN}).encode()
                return self._send(200, {"Content-Type": "application/json"}, body)

            def do_HEAD(self) -> None:  # noqa: N802
                found = re.match(r"^/v2/(.+)/manifests/([^/]+)$", self.path)
                if not found:
                    return self._send(404, {})
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    challenge = (f'Bearer realm="http://{standin.host}/token",service="standin",'
                                 f'scope="repository:{found[1]}:pull"')  # fmt: skip
                    return self._send(401, {"WWW-Authenticate": challenge})
                if (found[1], found[2]) in standin.manifests:
                    return self._send(200, {"Docker-Content-Digest": found[2]})
                return self._send(404, {})

        return Handler
