"""Whether a container image reference resolves: one HEAD of its manifest through the registry's
HTTP API (the OCI distribution spec: GET/HEAD /v2/<name>/manifests/<reference>), answering the
registry's Bearer or Basic challenge with the credentials of a docker config (a pull secret's,
or ~/.docker/config.json's `auths`). What doctor uses to say an image the YAML names exists."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

ACCEPT = ", ".join((
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
))  # fmt: skip
DOCKER_HUB = "registry-1.docker.io"


@dataclass(frozen=True)
class Reference:
    host: str
    name: str
    reference: str  # a digest, else the tag

    @property
    def base(self) -> str:
        local = re.match(r"(localhost|127\.\d+\.\d+\.\d+)(:\d+)?$", self.host)
        return f"{'http' if local else 'https'}://{self.host}"


def parse(image: str) -> Reference:
    """host, repository and tag or digest of `image` (Docker's rules: a first component with a
    '.' or ':' or `localhost` is a registry, else Docker Hub; no tag means `latest`)."""
    rest, _, digest = image.partition("@")
    first, _, remainder = rest.partition("/")
    if remainder and ("." in first or ":" in first or first == "localhost"):
        host, path = first, remainder
    else:
        host, path = DOCKER_HUB, rest if "/" in rest else f"library/{rest}"
    name, _, tag = path.rpartition(":") if ":" in path.split("/")[-1] else (path, "", "")
    return Reference(host, name, digest or tag or "latest")


def resolve(image: str, auths: dict[str, dict[str, str]]) -> tuple[str, str]:
    """(status, detail) for one image: PASS (the registry has it), FAIL (it answers that it has
    not), SKIP (it wants credentials we do not have, or does not answer)."""
    import urllib3

    ref = parse(image)
    url = f"{ref.base}/v2/{ref.name}/manifests/{ref.reference}"
    from autocomp.network import urllib3_timeout

    http = urllib3.PoolManager(timeout=urllib3_timeout())  # the one network deadline
    creds = auths.get(ref.host) or (
        auths.get("index.docker.io") if ref.host == DOCKER_HUB else None
    )
    try:
        answer = http.request("HEAD", url, headers={"Accept": ACCEPT}, retries=False)
        if answer.status == 401:
            header = _authorization(http, answer.headers.get("WWW-Authenticate", ""), creds)
            if header:
                answer = http.request("HEAD", url, headers={"Accept": ACCEPT,
                                      "Authorization": header}, retries=False)  # fmt: skip
    except urllib3.exceptions.HTTPError as exc:
        return "SKIP", f"{ref.host} does not answer here ({type(exc).__name__})"
    if answer.status == 200:
        return "PASS", f"{ref.host} has it"
    if answer.status == 404:
        return "FAIL", f"{ref.host} has no {ref.name}:{ref.reference}; push it (`make push`)"
    if answer.status in (401, 403):
        why = "refuses the credentials" if creds else "needs credentials"
        return (
            "SKIP",
            f"{ref.host} {why} (HTTP {answer.status}); the pods pull it with the image pull secret",
        )
    return "SKIP", f"{ref.host} answers HTTP {answer.status}"


def _authorization(http: Any, challenge: str, creds: dict[str, str] | None) -> str | None:
    """The Authorization header for a registry's challenge (Bearer: a token from its realm)."""
    basic = None
    if creds:
        basic = (
            "Basic "
            + base64.b64encode(f"{creds['username']}:{creds['password']}".encode()).decode()
        )
    scheme, _, params = challenge.partition(" ")
    if scheme.lower() == "basic":
        return basic
    if scheme.lower() != "bearer":
        return None
    fields = dict(re.findall(r'(\w+)="([^"]*)"', params))
    if "realm" not in fields:
        return None
    query = {k: v for k, v in fields.items() if k in ("service", "scope")}
    answer = http.request(
        "GET",
        fields["realm"],
        fields=query,
        headers={"Authorization": basic} if basic else {},
        retries=False,
    )
    if answer.status != 200:
        return None
    token = json.loads(answer.data)
    found = token.get("token") or token.get("access_token")
    return f"Bearer {found}" if found else None
