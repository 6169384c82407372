"""SeaweedFS's authorisation of S3 requests, as multi-user Kubeflow Pipelines configures it, in
front of moto_server: the stand-in that holds autocomp's store to the per-profile keys of
KFP 2.15.0/2.16.x (SeaweedFS 4.00) and 2.17.0 (SeaweedFS 4.34).

Sources (read at the tags named; `sw` is seaweedfs/seaweedfs, `kfp` kubeflow/pipelines):

- The keys a profile gets: kfp `manifests/kustomize/base/installs/multi-user/
  pipelines-profile-controller/sync.py` writes one IAM user per namespace through SeaweedFS's
  IAM API (`iam.put_user_policy`): :356-377 at 2.15.0, :388-409 at 2.16.0/2.16.1 (the same
  document), :468-492 at 2.17.0 (adds `s3:DeleteObject`) and a bucket policy on `mlpipeline`
  (`ensure_bucket_list_policy`, :176-248, called at :494; PR #13469).
- The image: `third-party/seaweedfs/base/seaweedfs/seaweedfs-deployment.yaml`:
  `chrislusf/seaweedfs:4.00` at 2.15.0-2.16.1, `ghcr.io/chrislusf/seaweedfs:4.34` at 2.17.0,
  run as `weed server -s3 -iam -filer` with its 20Gi PVC (`seaweedfs-pvc.yaml`).
- SeaweedFS 4.00 (`rules_400`): a user policy becomes "legacy" actions, `Write:<bucket>/<path>`
  (`weed/iamapi/iamapi_management_handlers.go:314-350` GetActions, :47-70 MapToStatementAction:
  `Put*`->Write, `Get*`->Read, `List*`->List, anything else refused); each route names one
  action (`weed/s3api/s3api_server.go`, lines below); the object is `/`+key, or for a
  bucket-level request `/`+the `prefix` query (`s3_constants/header.go:134-153`,
  `auth_credentials.go:485-496`); `canDo` (`auth_credentials.go:523-567`) allows when an
  action ending in `*` is a prefix of `<Action>:<bucket><object>`.
- SeaweedFS 4.34 (`rules_434`): inline user policies are attached to the identity and are
  authoritative (`weed/s3api/auth_credentials.go:2301-2345` VerifyActionPermission,
  :2217-2296 evaluateIAMPolicies); the action is the S3 one (`weed/s3api/s3_action_resolver.go`
  :28-62, :96-341); the resource is the object's ARN, the bucket's for List
  (`auth_credentials.go:2249-2254`); multipart requests are allowed by `s3:PutObject`
  (`weed/s3api/policy_engine/engine.go:161-172`); the bucket policy is evaluated first, a Deny
  refuses and an Allow grants (`auth_credentials.go:1548-1590`); DeleteObjects is checked key
  by key as `s3:DeleteObject` (`auth_credentials.go:1526-1533`); CopyObject also needs
  `s3:GetObject` on its source (`AuthorizeCopySource`, :2363-2420).

Not modelled (the stand-in answers 501 NotImplemented, so a test fails the day autocomp starts
using one of them): any request whose route is not in ROUTES. Not traced here: whether 4.34's
default embedded IAM (`weed/command/s3.go:352`, `s3api_server.go:323-350`) sends a static-key
identity through `authorizeWithIAM` rather than `evaluateIAMPolicies`; both evaluate the same
policy document against the same resolved action.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass, field

BUCKET = "mlpipeline"


@dataclass(frozen=True)
class Call:
    """One S3 request as SeaweedFS's router sees it (path-style)."""

    method: str
    bucket: str
    key: str  # "" for a bucket-level request
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    batch_keys: tuple[str, ...] = ()  # DeleteObjects: the keys in its body


@dataclass(frozen=True)
class Route:
    """One route of `s3api_server.go`: its S3 operation, the legacy action it is checked as,
    and where (4.00 line, 4.34 line)."""

    operation: str
    action: str  # SeaweedFS's ACTION_* (Read, Write, List, Admin, ...)
    lines: tuple[int, int]


def _q(*names: str) -> Callable[[Call], bool]:
    return lambda c: all(n in c.query for n in names)


# (method, object-level?, extra test, route), first match wins, in the order the router
# registers them (s3api_server.go at 4.00 / 4.34)
ROUTES: list[tuple[str, bool, Callable[[Call], bool], Route]] = [
    ("PUT", True, lambda c: "partNumber" in c.query and "x-amz-copy-source" in c.headers,
     Route("UploadPartCopy", "Write", (259, 780))),
    ("PUT", True, _q("partNumber", "uploadId"), Route("UploadPart", "Write", (261, 782))),
    ("POST", True, _q("uploadId"), Route("CompleteMultipartUpload", "Write", (263, 784))),
    ("POST", True, _q("uploads"), Route("CreateMultipartUpload", "Write", (265, 786))),
    ("DELETE", True, _q("uploadId"), Route("AbortMultipartUpload", "Write", (267, 788))),
    ("HEAD", True, lambda c: True, Route("HeadObject", "Read", (299, 823))),
    ("GET", True, lambda c: not c.query.keys() - {"versionId"},
     Route("GetObject", "Read", (305, 829))),
    ("PUT", True, lambda c: "x-amz-copy-source" in c.headers,
     Route("CopyObject", "Write", (311, 834))),
    ("PUT", True, lambda c: not c.query, Route("PutObject", "Write", (313, 836))),
    ("DELETE", True, lambda c: not c.query, Route("DeleteObject", "Write", (315, 838))),
    ("POST", False, _q("delete"), Route("DeleteObjects", "Write", (322, 845))),
    ("GET", False, _q("location"), Route("GetBucketLocation", "Read", (351, 874))),
    ("GET", False, lambda c: c.query.get("list-type") == "2",
     Route("ListObjectsV2", "List", (380, 924))),
    ("HEAD", False, lambda c: not c.query, Route("HeadBucket", "Read", (404, 948))),
    ("PUT", False, lambda c: not c.query, Route("CreateBucket", "Admin", (410, 953))),
    ("GET", False, lambda c: not c.query.keys() - {"prefix", "delimiter", "marker", "max-keys"},
     Route("ListObjectsV1", "List", (416, 960))),
]  # fmt: skip


def route(call: Call) -> Route | None:
    for method, on_object, test, found in ROUTES:
        if call.method == method and bool(call.key) == on_object and test(call):
            return found
    return None


# ----------------------------------------------------------------------------- the policies


def profile_policy(release: str, namespace: str) -> dict:
    """The user policy sync.py writes for a profile (see the module doc for the lines)."""
    actions = ["s3:Put*", "s3:Get*", "s3:List*"]
    if release >= "2.17":
        actions.append("s3:DeleteObject")
    resources = [f"arn:aws:s3:::{BUCKET}/{p}/*" for p in
                 ("artifacts", f"private-artifacts/{namespace}", f"private/{namespace}", "shared")]  # fmt: skip
    return {"Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": actions, "Resource": resources}]}  # fmt: skip


def bucket_policy_217() -> dict:
    """kfp 2.17.0 sync.py:185-231 (ensure_bucket_list_policy), as written."""
    arn = f"arn:aws:s3:::{BUCKET}"
    own = ["private-artifacts/${aws:username}/*", "private/${aws:username}/*"]
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "AllowOwnDeepList", "Effect": "Allow", "Principal": "*",
         "Action": "s3:ListBucket", "Resource": arn,
         "Condition": {"StringLike": {"s3:prefix": [*own, "artifacts/*", "shared/*"]}}},
        {"Sid": "AllowHeadBucket", "Effect": "Allow", "Principal": "*",
         "Action": "s3:ListBucket", "Resource": arn,
         "Condition": {"StringEquals": {"s3:RequestMethod": "HEAD"}}},
        {"Sid": "AllowTopLevelDelimitedBrowse", "Effect": "Allow", "Principal": "*",
         "Action": "s3:ListBucket", "Resource": arn,
         "Condition": {"Null": {"s3:prefix": "true"}, "StringEquals": {"s3:delimiter": "/"}}},
        {"Sid": "DenyOtherDeepList", "Effect": "Deny", "Principal": "*",
         "Action": "s3:ListBucket", "Resource": arn,
         "Condition": {"StringLike": {"s3:prefix": ["private-artifacts/*", "private/*"]},
                       "StringNotLike": {"s3:prefix": own}}},
    ]}  # fmt: skip


def _list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


# ----------------------------------------------------------------------------- SeaweedFS 4.00

# iamapi_management_handlers.go:30-37 and :47-70 at 4.00
STATEMENT_ACTIONS_400 = {"*": "Admin", "Put*": "Write", "PutBucketAcl": "WriteAcp",
                         "Get*": "Read", "GetBucketAcl": "ReadAcp", "List*": "List",
                         "Tagging*": "Tagging", "DeleteBucket*": "DeleteBucket"}  # fmt: skip


def legacy_actions_400(policy: dict) -> list[str]:
    """GetActions at 4.00 (iamapi_management_handlers.go:314-350): `<Action>:<path>`."""
    found = []
    for statement in policy["Statement"]:
        if statement["Effect"] != "Allow":
            raise ValueError("not a valid effect: only 'Allow' is possible (:319)")
        for resource in _list(statement["Resource"]):
            parts = resource.split(":")
            if len(parts) != 6 or parts[:3] != ["arn", "aws", "s3"]:
                continue
            for action in _list(statement["Action"]):
                act = action.split(":")
                if len(act) != 2 or act[0] != "s3":
                    continue
                if act[1] not in STATEMENT_ACTIONS_400:
                    raise ValueError(f"not a valid action: {act[1]!r} (:333-336)")
                mapped = STATEMENT_ACTIONS_400[act[1]]
                found.append(mapped if parts[5] == "*" else f"{mapped}:{parts[5]}")
    return found


def can_do_400(actions: list[str], action: str, bucket: str, obj: str) -> str | None:
    """canDo (auth_credentials.go:523-567 at 4.00): the granting action, or None."""
    if "Admin" in actions or action in actions:
        return "Admin" if "Admin" in actions else action
    target, admin = f"{action}:{bucket}{obj}", f"Admin:{bucket}{obj}"
    for granted in actions:
        if granted.endswith("*"):
            if target.startswith(granted[:-1]) or admin.startswith(granted[:-1]):
                return granted
        elif granted in (f"{action}:{bucket}", f"Admin:{bucket}"):
            return granted
    return None


def rules_400(call: Call, found: Route, policy: dict, user: str) -> tuple[bool, str]:
    """SeaweedFS 4.00's verdict on one request and the rule that gave it."""
    obj = "/" + call.key  # header.go:134-143: the object always starts with /
    prefix = call.query.get("prefix", "")
    prefix = prefix if prefix.startswith("/") else "/" + prefix  # header.go:145-153
    if obj == "/" and prefix:  # auth_credentials.go:490-493 (prefix is never empty)
        obj = prefix
    granted = can_do_400(legacy_actions_400(policy), found.action, call.bucket, obj)
    where = f"s3api_server.go:{found.lines[0]} checks {found.operation} as {found.action}"
    if granted is None:
        return False, (f"{where} on {found.action}:{call.bucket}{obj}; no action of the user "
                       "policy matches it (canDo, auth_credentials.go:523-567)")  # fmt: skip
    return True, f"{where}; allowed by {granted}"


# ----------------------------------------------------------------------------- SeaweedFS 4.34

MULTIPART = {"s3:CreateMultipartUpload", "s3:UploadPart", "s3:UploadPartCopy",
             "s3:CompleteMultipartUpload", "s3:AbortMultipartUpload", "s3:ListParts",
             "s3:ListMultipartUploads"}  # fmt: skip


def s3_action_434(call: Call, found: Route) -> str:
    """ResolveS3Action (s3_action_resolver.go:28-62) for the requests ROUTES knows."""
    q, method, on_object = call.query, call.method, bool(call.key)
    if on_object and "uploadId" in q:  # :99-112
        return {"PUT": "s3:UploadPart", "POST": "s3:CompleteMultipartUpload",
                "DELETE": "s3:AbortMultipartUpload", "GET": "s3:ListParts"}[method]  # fmt: skip
    if "uploads" in q and method == "POST" and on_object:  # :117-123
        return "s3:CreateMultipartUpload"
    if "location" in q and method == "GET" and not on_object:  # :202-204
        return "s3:GetBucketLocation"
    if "delete" in q and method == "POST" and not on_object:  # :229-231
        return "s3:DeleteObject"
    if on_object:  # resolveObjectLevelAction, :237-266
        return {("GET", "Read"): "s3:GetObject", ("HEAD", "Read"): "s3:GetObject",
                ("PUT", "Write"): "s3:PutObject", ("DELETE", "Write"): "s3:DeleteObject",
                ("POST", "Write"): "s3:PutObject"}[(method, found.action)]  # fmt: skip
    if method in ("GET", "HEAD") and found.action in ("List", "Read"):  # :269-274
        return "s3:ListBucket"
    if method == "PUT" and found.action == "Write":
        return "s3:CreateBucket"
    return {"Admin": "s3:*", "Write": "s3:PutObject", "Read": "s3:GetObject"}.get(
        found.action, "s3:" + found.action
    )  # mapBaseActionToS3Format, :298-341


def _matches(patterns: list[str], value: str) -> bool:
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


def _condition(condition: dict, context: dict[str, str | None], user: str) -> bool:
    """The condition operators the KFP bucket policy uses (StringLike, StringNotLike,
    StringEquals, Null), with ${aws:username} substituted (policy_engine/conditions.go)."""
    for operator, tests in condition.items():
        for key, wanted in tests.items():
            values = [v.replace("${aws:username}", user) for v in _list(wanted)]
            have = context.get(key)
            if operator == "Null":
                if (have is None) != (values[0] == "true"):
                    return False
            elif operator == "StringEquals":
                if have is None or have not in values:
                    return False
            elif operator == "StringLike":
                if have is None or not _matches(values, have):
                    return False
            elif operator == "StringNotLike":
                if have is not None and _matches(values, have):
                    return False
            else:
                raise ValueError(f"condition operator {operator} not modelled")
    return True


def _evaluate(policy: dict, action: str, resource: str, context: dict, user: str) -> str | None:
    """'Deny', 'Allow' or None (no statement matches), AWS's order: a Deny wins."""
    verdict = None
    for statement in policy["Statement"]:
        actions = _list(statement["Action"])
        hit = _matches(actions, action) or (action in MULTIPART and
                                            _matches(actions, "s3:PutObject"))  # fmt: skip
        if not hit or not _matches(_list(statement["Resource"]), resource):
            continue
        if not _condition(statement.get("Condition", {}), context, user):
            continue
        if statement["Effect"] == "Deny":
            return f"Deny ({statement.get('Sid', 'statement')})"
        verdict = f"Allow ({statement.get('Sid', 'user policy')})"
    return verdict


def _check_434(call: Call, action: str, key: str, policy: dict, bucket_policy: dict | None,
               user: str) -> tuple[bool, str]:  # fmt: skip
    resource = f"arn:aws:s3:::{call.bucket}" + (f"/{key}" if key else "")
    context: dict[str, str | None] = {"s3:prefix": call.query.get("prefix"),
                                      "s3:delimiter": call.query.get("delimiter"),
                                      "s3:RequestMethod": call.method}  # fmt: skip
    if action == "s3:ListBucket":
        resource = f"arn:aws:s3:::{call.bucket}"  # auth_credentials.go:2249-2254
    if bucket_policy is not None:  # auth_credentials.go:1548-1590: the bucket policy first
        said = _evaluate(bucket_policy, action, resource, context, user)
        if said and said.startswith("Deny"):
            return False, f"{action} on {resource}: the bucket policy says {said}"
        if said:
            return True, f"{action} on {resource}: the bucket policy says {said}"
    said = _evaluate(policy, action, resource, context, user)
    if said and said.startswith("Allow"):
        return True, f"{action} on {resource}: the user policy says {said}"
    return False, (f"{action} on {resource}: no statement of the user policy allows it "
                   "(evaluateIAMPolicies, auth_credentials.go:2217-2296)")  # fmt: skip


def rules_434(call: Call, found: Route, policy: dict, user: str,
              bucket_policy: dict | None = None) -> tuple[bool, str]:  # fmt: skip
    """SeaweedFS 4.34's verdict on one request and the rule that gave it."""
    action = s3_action_434(call, found)
    where = f"s3api_server.go:{found.lines[1]} {found.operation} -> {action}"
    if found.operation == "DeleteObjects":  # auth_credentials.go:1526-1533: key by key
        for key in call.batch_keys:
            ok, why = _check_434(call, "s3:DeleteObject", key, policy, bucket_policy, user)
            if not ok:
                return False, f"{where}: key {key}: {why}"
        return True, f"{where}: every key allowed"
    ok, why = _check_434(call, action, call.key, policy, bucket_policy, user)
    if ok and found.operation == "CopyObject":  # AuthorizeCopySource, :2363-2420
        source = call.headers["x-amz-copy-source"].lstrip("/").split("/", 1)
        ok, why = _check_434(Call("GET", source[0], source[1], {}, {}), "s3:GetObject",
                             source[1], policy, bucket_policy, user)  # fmt: skip
        why = f"copy source: {why}"
    return ok, f"{where}: {why}"


@dataclass
class Profile:
    """The keys of one profile namespace on one KFP release, and what was asked of them."""

    release: str  # "2.15.0", "2.16.1", "2.17.0"; "iam": `policy` evaluated as 4.34/AWS do
    namespace: str = "team"
    seen: list[tuple[str, str, bool, str]] = field(default_factory=list)
    policy: dict | None = None  # a user policy of one's own (release "iam"), no bucket policy

    def decide(self, call: Call) -> tuple[bool | None, str]:
        """(allowed, the rule); allowed None: a request the stand-in does not model."""
        found = route(call)
        if found is None:
            return None, f"{call.method} {call.bucket}/{call.key} {call.query}: not modelled"
        if self.policy is not None:
            ok, why = rules_434(call, found, self.policy, self.namespace)
            self.seen.append((found.operation, call.key or call.query.get("prefix", ""), ok, why))
            return ok, why
        policy = profile_policy(self.release, self.namespace)
        if self.release >= "2.17":
            ok, why = rules_434(call, found, policy, self.namespace, bucket_policy_217())
        else:
            ok, why = rules_400(call, found, policy, self.namespace)
        self.seen.append((found.operation, call.key or call.query.get("prefix", ""), ok, why))
        return ok, why

    @property
    def refused(self) -> list[tuple[str, str, bool, str]]:
        return [s for s in self.seen if not s[2]]


CREDENTIAL = re.compile(r"Credential=([^/]+)/")


# ----------------------------------------------------------------------------- the stand-in


class PolicyStandin:
    """An S3 endpoint on 127.0.0.1 that decides each request as the profile's SeaweedFS would
    (403 AccessDenied, SeaweedFS's body: `s3err/s3api_errors.go`, "Access Denied."), and passes
    what it allows to moto_server on `upstream`. The key `admin` is SeaweedFS's
    `kubeflow-admin` (`-actions Admin`, seaweedfs-deployment.yaml): allowed everything."""

    def __init__(self, upstream: int, profile: Profile, admin_key: str = "admin") -> None:
        import threading
        from http.server import ThreadingHTTPServer

        self.upstream, self.profile, self.admin_key = upstream, profile, admin_key
        standin = self

        from http.server import BaseHTTPRequestHandler

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _handle(self) -> None:
                standin.handle(self)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, request) -> None:  # noqa: ANN001  (a BaseHTTPRequestHandler)
        from urllib.parse import parse_qs, unquote, urlsplit
        from xml.etree import ElementTree

        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        parts = urlsplit(request.path)
        bucket, _, key = unquote(parts.path).lstrip("/").partition("/")
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        headers = {k.lower(): v for k, v in request.headers.items()}
        found = CREDENTIAL.search(headers.get("authorization", ""))
        if not (found and found.group(1) == self.admin_key):
            batch: tuple[str, ...] = ()
            if request.command == "POST" and "delete" in query and body:
                batch = tuple(e.text or "" for e in ElementTree.fromstring(body).iter()
                              if e.tag.endswith("Key"))  # fmt: skip
            call = Call(request.command, bucket, key, query, headers, batch)
            allowed, why = self.profile.decide(call)
            if not allowed:
                code, status = (("NotImplemented", 501) if allowed is None
                                else ("AccessDenied", 403))  # fmt: skip
                message = "Access Denied." if status == 403 else why
                self._error(request, status, code, message, f"/{bucket}/{key}", why)
                return
        self._forward(request, body)

    def _error(self, request, status: int, code: str, message: str, resource: str,  # noqa: ANN001
               why: str) -> None:  # fmt: skip
        from xml.sax.saxutils import escape

        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                f"<Message>{escape(message)}</Message><Resource>{escape(resource)}</Resource>"
                "<RequestId>standin</RequestId></Error>").encode()  # fmt: skip
        request.send_response(status)
        request.send_header("Content-Type", "application/xml")
        request.send_header("X-Standin-Rule", why.encode("ascii", "replace").decode()[:900])
        request.send_header("Content-Length", str(0 if request.command == "HEAD" else len(body)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(body)

    def _forward(self, request, body: bytes) -> None:  # noqa: ANN001
        import http.client

        connection = http.client.HTTPConnection("127.0.0.1", self.upstream, timeout=60)
        hop = {"connection", "keep-alive", "transfer-encoding", "content-length"}
        headers = {k: v for k, v in request.headers.items() if k.lower() not in hop}
        headers["Content-Length"] = str(len(body))
        connection.request(request.command, request.path, body, headers)
        answer = connection.getresponse()
        data = answer.read()
        request.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in hop:
                request.send_header(name, value)
        length = answer.getheader("Content-Length") if request.command == "HEAD" else None
        request.send_header("Content-Length", length or str(len(data)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(data)
        connection.close()
