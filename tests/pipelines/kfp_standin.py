"""A local HTTP stand-in of the KFP REST API v2beta1 (no KFP server can run here).

It implements the endpoints kfp.Client uses for upload, versioning, experiments, runs and
recurring runs, with the real wire format (JSON with snake_case fields, multipart uploads),
keeps state in memory, and records every request so tests can assert what the real client sent.
Each rule it enforces is the real server's, from the file it is in (kubeflow/pipelines,
backend/src/apiserver at 2.15.0 unless said):

- runtime parameters against the version's root.inputDefinitions (template/v2_template.go
  validatePipelineJobInputs): unknown names, wrong types, missing required ones: 400;
- from 2.14.0 the Kubernetes config of each executor is parsed strictly when a run or recurring
  run is created (v2/compiler/argocompiler/container.go:285, protojson.Unmarshal): a field the
  release's proto lacks is refused (UNKNOWN_FIELDS, read in kubernetes_platform/proto);
- recurring runs: max_concurrency 1-10, robfig/cron v1.2.0 `cron.Parse`, an interval of at
  least 1 s (server/api_converter.go:1970-1983); created ENABLED or DISABLED by their `mode`;
  listed with a `display_name` filter within a namespace or an experiment (job_server.go:181
  listJobs, :362 ListRecurringRuns; the response's key is `recurringRuns`, the proto's own field
  name, backend/api/v2beta1/recurring_run.proto), got, enabled (`:enable`), disabled
  (`:disable`) and deleted by id (job_server.go:387, :398, :410), each authorized against the
  recurring run's namespace; an unknown id is NOT_FOUND (404, code 5);
- multi-user mode: an experiment needs a namespace (server/experiment_server.go:357), a run and
  a recurring run take their experiment's and refuse none (run_server.go:146, job_server.go:106);
  every request needs an identity: the gateway's `kubeflow-userid` header, which the stand-in
  sets from a Dex session cookie (`oauth2_proxy_kubeflow`, kubeflow/manifests common/oauth2-
  proxy), or a bearer token reviewed with audience pipelines.kubeflow.org
  (auth/authenticator_token_review.go; apiserver/common/const.go:54); and a SubjectAccessReview
  per namespace (resource/resource_manager.go IsAuthorized: PERMISSION_DENIED, "User '...' is not
  authorized"); namespace-less (shared) pipelines are not checked (pipeline_upload_server.go);
- errors: grpc-gateway's body, `{"code", "message", "details"}` from 2.14 (grpc-gateway v2) and
  `{"error", "code", "message", "details"}` up to 2.5 (v1); the upload endpoints write
  `{"error_message", "error_details"}` (pipeline_upload_server.go:423 writeErrorToResponse).
- the ScheduledWorkflow controller's tick (`fire`): a recurring run that is enabled and below
  its max_concurrency makes a new run of its pipeline version and parameters, with
  `{{workflow.uid}}` replaced by the new run's id (crd/controller/scheduledworkflow/util/
  scheduled_workflow.go:155 NewWorkflow, :183 ReplaceUID, :202/:207 enabled and concurrency
  checks); `executor` (tests/pipelines/kfp_runs.execute) then runs it here to its end, and the
  run ends SUCCEEDED or FAILED with the failed task chain in `run_details.task_details` and the
  run's `error`, as the persistence agent reports them;
- healthz: both /apis/v1beta1/healthz and /apis/v2beta1/healthz answer `commit_sha`, `tag_name`
  and `multi_user` (main.go:355-365; v2beta1 adds `pipeline_store`). Release images 2.4-2.15
  answer `tag_name: "unknown"` (built without TAG_NAME): `KfpStandIn(tag_name="unknown")`.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable
from email.parser import BytesParser
from email.policy import default
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import yaml

from autocomp.pipelines.cluster.cron import parse as parse_cron

API = "/apis/v2beta1"
TIME = "2026-11-30T00:00:00Z"
AUDIENCE = "pipelines.kubeflow.org"
COOKIE = "oauth2_proxy_kubeflow"
# Kubernetes executor fields a release's proto lacks (kubernetes_platform/proto at the tag):
# what its strict parse refuses. 2.14.x has no SecretAsEnv.optional (added in 2.15.0).
UNKNOWN_FIELDS = {
    (2, 14): {("secretAsEnv", "optional"), ("pvcMount", "subPath"), ("", "securityContext")},
    (2, 15): {("pvcMount", "subPath"), ("", "securityContext")},
}


def _version(tag: str) -> tuple[int, int]:
    try:
        major, minor = tag.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return (2, 15)  # "unknown": a 2.4-2.15 release image


class KfpStandIn:
    def __init__(
        self,
        tag_name: str = "2.17.0",
        multi_user: bool = False,
        token: str | None = None,
        users: dict[str, str] | None = None,
        access: dict[str, set[str]] | None = None,
        audiences: dict[str, list[str]] | None = None,
    ) -> None:
        """`token`: a gateway that wants this bearer token on every request. Multi-user:
        `users` maps a credential (a Dex session cookie value or a bearer token) to the user,
        `audiences` a token to the audiences it was issued for (default pipelines.kubeflow.org),
        `access` a user to the namespaces its RoleBindings let it use."""
        self.tag_name = tag_name
        self.token = token
        self.multi_user = multi_user
        self.users = users or {}
        self.access = access or {}
        self.audiences = audiences or {}
        self.packages: dict[str, list] = {}  # version id -> the uploaded documents
        self.requests: list[dict] = []
        self.pipelines: dict[str, dict] = {}
        self.versions: dict[str, list[dict]] = {}
        self.experiments: dict[str, dict] = {}
        self.runs: list[dict] = []
        self.recurring: list[dict] = []
        self.executor: Callable[[list, dict, str], tuple[str, list[str]]] | None = None
        self.retried: dict[str, threading.Thread] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()

    @property
    def v2_gateway(self) -> bool:
        return _version(self.tag_name) >= (2, 14)

    # ------------------------------------------------------------------ errors

    def status(self, http: int, code: int, message: str) -> tuple:
        """grpc-gateway's error body, as this release's API server sends it."""
        body = {"code": code, "message": message, "details": []}
        return http, body if self.v2_gateway else {"error": message, **body}

    @staticmethod
    def upload_error(http: int, message: str) -> tuple:
        return http, {"error_message": message, "error_details": message}

    # ------------------------------------------------------------------ identity

    def identity(self, headers: dict[str, str]) -> tuple[str | None, tuple | None]:
        """(user, None) or (None, the refusal) for a multi-user request."""
        cookies = dict(c.strip().split("=", 1) for c in headers.get("cookie", "").split(";")
                       if "=" in c)  # fmt: skip
        if cookies.get(COOKIE) in self.users:
            return self.users[cookies[COOKIE]], None
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        if bearer and bearer in self.users:
            if AUDIENCE not in self.audiences.get(bearer, [AUDIENCE]):
                return None, self.status(401, 16, "Failed to authenticate token review: the "
                                         f"token's audiences lack {AUDIENCE}")  # fmt: skip
            return self.users[bearer], None
        return None, self.status(401, 16, "Request header error: there is no user identity header.")

    def authorize(self, user: str | None, namespace: str) -> tuple | None:
        if not self.multi_user or not namespace:
            return None
        if namespace in self.access.get(user or "", set()):
            return None
        return self.status(403, 7, f"User '{user}' is not authorized with reason: no RoleBinding "
                           f"in namespace {namespace} (request: {{Namespace:{namespace}}})")  # fmt: skip

    # ------------------------------------------------------------------ routing

    def handle(self, method: str, path: str, query: dict, body: dict | None, files: dict,
               headers: dict[str, str]) -> tuple:  # fmt: skip
        if path in ("/apis/v1beta1/healthz", f"{API}/healthz") and method == "GET":
            health = {"commit_sha": "0" * 40, "tag_name": self.tag_name,
                      "multi_user": self.multi_user}  # fmt: skip
            return 200, {**health, "pipeline_store": "database"} if path.startswith(API) else health
        user = None
        if self.multi_user:
            user, refused = self.identity(headers)
            if refused:
                return refused
        if not path.startswith(API):
            return self.status(404, 5, f"not the v2beta1 API: {path}")
        route = path[len(API) :]
        if route == "/pipelines/upload" and method == "POST":
            return self._upload(query, files, user)
        if route == "/pipelines/upload_version" and method == "POST":
            return self._upload_version(query, files)
        if route == "/pipelines" and method == "GET":
            return self._list_pipelines(query)
        if route.startswith("/pipelines/") and route.count("/") == 2 and method == "GET":
            pid = route.split("/")[2]
            if pid not in self.pipelines:
                return self.status(404, 5, f"no pipeline {pid}")
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
            namespace = query.get("namespace", [""])[0]
            refused = self.authorize(user, namespace)
            if refused:
                return refused
            name = _filter_value(query)
            found = [e for e in self.experiments.values() if e["display_name"] == name
                     and (not self.multi_user or e.get("namespace") == namespace)]  # fmt: skip
            return 200, {"experiments": found, "total_size": len(found)}
        if route == "/experiments" and method == "POST":
            return self._create_experiment(body, user)
        if route in ("/recurringruns", "/runs") and method == "POST":
            return self._create_run(route, body, user)
        if route == "/recurringruns" and method == "GET":
            return self._list_recurring(query, user)
        if route.startswith("/recurringruns/"):
            return self._recurring_run(method, route.split("/")[2], user)
        answered = self._run_routes(method, route, user)
        if answered is not None:
            return answered
        return self.status(404, 5, f"no route {method} {route}")

    # ------------------------------------------------------------------ the scheduler

    def fire(self, recurring_run_id: str) -> dict | None:
        """One tick of the recurring run's schedule; the run it made (None: disabled, or as many
        runs going as its max_concurrency)."""
        swf = next(r for r in self.recurring if r["recurring_run_id"] == recurring_run_id)
        going = [r for r in self.runs if r.get("recurring_run_id") == recurring_run_id
                 and r["state"] in ("PENDING", "RUNNING")]  # fmt: skip
        if swf["status"] != "ENABLED" or len(going) >= int(swf.get("max_concurrency") or 1):
            return None
        run_id = str(uuid.uuid4())
        given = (swf.get("runtime_config") or {}).get("parameters") or {}
        params = json.loads(json.dumps(given).replace("{{workflow.uid}}", run_id))
        run = {"run_id": run_id, "display_name": f"{swf['display_name']}-{len(self.runs)}",
               "recurring_run_id": recurring_run_id, "experiment_id": swf.get("experiment_id"),
               "pipeline_version_reference": swf["pipeline_version_reference"],
               "runtime_config": {"parameters": params}, "namespace": swf["namespace"],
               "state": "RUNNING", "created_at": TIME}  # fmt: skip
        self.runs.append(run)
        if self.executor is not None:
            self.execute(run)
        return run

    def execute(self, run: dict) -> dict:
        """Run `run`'s workflow to its end with `executor` (Argo's part; a retried run again,
        in the same place: its succeeded steps are kept, kfp_runs), and record how it ended."""
        docs = self.packages[run["pipeline_version_reference"]["pipeline_version_id"]]
        params = (run.get("runtime_config") or {}).get("parameters") or {}
        run["state"] = "RUNNING"
        state, failed = self.executor(docs, params, run["run_id"])  # type: ignore[misc]
        run["state"], run["finished_at"] = state, TIME
        run["run_details"] = {"task_details": [
            {"display_name": name, "state": "FAILED"} for name in failed]}  # fmt: skip
        run.pop("error", None)
        if failed:
            run["error"] = {"code": 2, "message": "Inner task failed: " + " inside ".join(failed)}
        return run

    # ------------------------------------------------------------------ runs: get, retry

    def _run_routes(self, method: str, route: str, user: str | None) -> tuple | None:
        """GET /runs/{id}, GET /experiments/{id}, POST /runs/{id}:retry, as the API server
        answers them (run_server.go RetryRun -> retryRun: canAccessRun with verb retry, then
        resource_manager.go RetryRun: only a Failed/Error workflow, not one with offloaded node
        status, and the run's state back to RUNNING). `retry_refusals`: run id -> the message
        RetryRun fails with for it (e.g. an offloaded node status); `retry_missing`: a release
        without the endpoint (404)."""
        found = re.fullmatch(r"/(runs|experiments)/([^/:]+)(:retry)?", route)
        if not found:
            return None
        kind, key, retry = found[1], found[2], found[3]
        if kind == "experiments" and method == "GET" and not retry:
            if key not in self.experiments:
                return self.status(404, 5, f"Experiment {key} not found")
            return 200, self.experiments[key]
        run = next((r for r in self.runs if r["run_id"] == key), None) if kind == "runs" else None
        if run is None:
            return (
                self.status(404, 5, f"Failed to get run: Run {key} not found")
                if kind == "runs"
                else None
            )
        refused = self.authorize(user, run.get("namespace", ""))
        if refused:
            return refused
        if method == "GET" and not retry:
            return 200, run
        if method == "POST" and retry:
            if getattr(self, "retry_missing", False):
                return self.status(404, 5, "Not Found")
            if run["state"] not in ("FAILED", "CANCELED"):
                return self.status(400, 3, f"Failed to retry a run: Failed to retry run {key}: "
                                   "Workflow must be Failed/Error to retry")  # fmt: skip
            why = getattr(self, "retry_refusals", {}).get(key)
            if why:
                return self.status(500, 13, f"Failed to retry a run: Failed to retry run {key} "
                                   f"as it does not allow reties: {why}")  # fmt: skip
            run["state"] = "RUNNING"
            run.pop("finished_at", None)
            run["retries"] = run.get("retries", 0) + 1
            if self.executor is not None:  # the resubmitted workflow runs its failed nodes,
                # after the answer, as Argo does (`retried[run id]`: the thread, to join)
                self.retried[key] = threading.Thread(target=self.execute, args=(run,))
                self.retried[key].start()
            return 200, {}
        return None

    def _create_experiment(self, body: dict, user: str | None) -> tuple:
        namespace = body.get("namespace") or ""
        if self.multi_user and not namespace:
            return self.status(400, 3, "Invalid input error: An experiment cannot have an empty "
                               "namespace in multi-user mode")  # fmt: skip
        refused = self.authorize(user, namespace)
        if refused:
            return refused
        exp = {"experiment_id": str(uuid.uuid4()), "display_name": body["display_name"],
               "namespace": namespace, "created_at": TIME, "storage_state": "AVAILABLE"}  # fmt: skip
        self.experiments[exp["experiment_id"]] = exp
        return 200, exp

    def _create_run(self, route: str, body: dict, user: str | None) -> tuple:
        recurring = route == "/recurringruns"
        if recurring:
            refused = self._check_schedule(body)
            if refused:
                return refused
        experiment = self.experiments.get(body.get("experiment_id") or "", {})
        namespace = experiment.get("namespace", "")
        if self.multi_user and not namespace:
            what = "Recurring run" if recurring else "A run"
            return self.status(400, 3, f"Invalid input error: {what} cannot have an empty "
                               "namespace in multi-user mode")  # fmt: skip
        refused = self.authorize(user, namespace) or self._check_runtime(body)
        if refused:
            return refused
        if recurring:
            status = "DISABLED" if body.get("mode") == "DISABLE" else "ENABLED"
            run = {**body, "recurring_run_id": str(uuid.uuid4()), "status": status,
                   "namespace": namespace, "created_at": TIME}  # fmt: skip
            self.recurring.append(run)
        else:
            run = {**body, "run_id": str(uuid.uuid4()), "state": "PENDING",
                   "namespace": namespace, "created_at": TIME}  # fmt: skip
            self.runs.append(run)
        return 200, run

    def _list_recurring(self, query: dict, user: str | None) -> tuple:
        """ListRecurringRuns: within the experiment's namespace when one is given, else the
        namespace asked for (authorized first); a `display_name` filter is exact."""
        namespace = query.get("namespace", [""])[0]
        experiment = query.get("experiment_id", [""])[0]
        if experiment:
            if experiment not in self.experiments:
                return self.status(404, 5, f"Failed to list recurring runs: experiment "
                                   f"{experiment} not found")  # fmt: skip
            namespace = self.experiments[experiment]["namespace"]
        refused = self.authorize(user, namespace)
        if self.multi_user and not namespace:
            refused = self.status(400, 3, "Invalid input error: namespace is required in "
                                  "multi-user mode")  # fmt: skip
        if refused:
            return refused
        name = _filter_value(query)
        found = [r for r in self.recurring
                 if (not self.multi_user or r["namespace"] == namespace)
                 and (not experiment or r.get("experiment_id") == experiment)
                 and (name is None or r["display_name"] == name)]  # fmt: skip
        return 200, {"recurringRuns": found, "total_size": len(found)}

    def _recurring_run(self, method: str, tail: str, user: str | None) -> tuple:
        """Get, delete, `:enable` or `:disable` one recurring run by id."""
        rid, _, verb = tail.partition(":")
        run = next((r for r in self.recurring if r["recurring_run_id"] == rid), None)
        allowed = {("GET", ""), ("DELETE", ""), ("POST", "enable"), ("POST", "disable")}
        if (method, verb) not in allowed:
            return self.status(404, 5, f"no route {method} /recurringruns/{tail}")
        if run is None:
            return self.status(404, 5, f"Failed to get a recurring run: ResourceNotFoundError: "
                               f"Job {rid} not found")  # fmt: skip
        refused = self.authorize(user, run["namespace"])
        if refused:
            return refused
        if method == "DELETE":
            self.recurring.remove(run)
        elif verb:
            run["status"] = "ENABLED" if verb == "enable" else "DISABLED"
        return 200, run if method == "GET" else {}

    def _check_schedule(self, body: dict) -> tuple | None:
        concurrency = int(body.get("max_concurrency") or 0)
        if not 1 <= concurrency <= 10:
            return self.status(400, 3, "Invalid input error: Max concurrency of a recurring run "
                               f"must be at least 1 and at most 10. Received {concurrency}")  # fmt: skip
        trigger = body.get("trigger") or {}
        cron = (trigger.get("cron_schedule") or {}).get("cron")
        if cron is not None and parse_cron(cron):
            return self.status(400, 3, "Invalid input error: Schedule cron is not a supported "
                               f"format(https://godoc.org/github.com/robfig/cron). Error: "
                               f"{parse_cron(cron)}")  # fmt: skip
        interval = (trigger.get("periodic_schedule") or {}).get("interval_second")
        if interval is not None and int(interval) < 1:
            return self.status(400, 3, f"Invalid input error: Found invalid period schedule "
                               f"interval {interval}. Set at interval to least 1 second")  # fmt: skip
        return None

    def _check_runtime(self, body: dict) -> tuple | None:
        reference = body.get("pipeline_version_reference") or {}
        docs = self.packages.get(reference.get("pipeline_version_id"))
        if docs is None:
            return self.status(404, 5, f"pipeline version {reference} not found")
        spec = docs[0]
        definitions = spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
        given = (body.get("runtime_config") or {}).get("parameters") or {}
        for name, value in given.items():
            if name not in definitions:
                return self.status(400, 3, f"Invalid input error: unknown parameter {name!r}")
            kind = definitions[name]["parameterType"]
            if not _is_kind(value, kind):
                return self.status(400, 3, f"Invalid input error: parameter {name!r} expects "
                                   f"{kind}, got {json.dumps(value)}")  # fmt: skip
        for name, d in definitions.items():
            if name not in given and "defaultValue" not in d and not d.get("isOptional"):
                return self.status(400, 3, f"Invalid input error: parameter {name!r} is required")
        return self._check_kubernetes(docs)

    def _check_kubernetes(self, docs: list) -> tuple | None:
        unknown = UNKNOWN_FIELDS.get(_version(self.tag_name))
        if not unknown or len(docs) < 2:
            return None  # before 2.14 the driver parses at run time
        executors = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
        for config in executors.values():
            for parent, field in unknown:
                items = [config] if not parent else config.get(parent, [])
                if any(field in item for item in items):
                    return self.status(500, 13, "Failed to create a run: failed to unmarshal "
                                       f"kubernetes config: proto: unknown field \"{field}\"")  # fmt: skip
        return None

    def _upload(self, query: dict, files: dict, user: str | None) -> tuple:
        name = query.get("name", [None])[0]
        namespace = query.get("namespace", [""])[0]
        refused = self.authorize(user, namespace)  # shared pipelines: not checked
        if refused:
            return self.upload_error(refused[0], refused[1]["message"])
        if any(p["display_name"] == name for p in self.pipelines.values()):
            return self.upload_error(409, f"Failed to create a pipeline: pipeline {name} exists")
        pid = str(uuid.uuid4())
        pipeline = {"pipeline_id": pid, "display_name": name, "created_at": TIME,
                    "description": query.get("description", [""])[0]}  # fmt: skip
        self.pipelines[pid] = pipeline
        self.versions[pid] = []
        self._add_version(pid, name, files)
        return 200, pipeline

    def _upload_version(self, query: dict, files: dict) -> tuple:
        pid = query.get("pipelineid", [None])[0]
        name = query.get("name", [None])[0]
        if pid not in self.pipelines:
            return self.upload_error(404, f"no pipeline {pid}")
        if any(v["display_name"] == name for v in self.versions[pid]):
            return self.upload_error(409, f"version {name} exists")
        return 200, self._add_version(pid, name, files)

    def _add_version(self, pid: str, name: str, files: dict) -> dict:
        version = {
            "pipeline_id": pid,
            "pipeline_version_id": str(uuid.uuid4()),
            "display_name": name,
            "created_at": f"2026-11-30T00:00:{len(self.versions[pid]):02d}Z",
            "package_size": len(files.get("uploadfile", b"")),
        }
        self.packages[version["pipeline_version_id"]] = [
            d for d in yaml.safe_load_all(files.get("uploadfile", b"{}")) if d
        ]
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
                headers = {k.lower(): v for k, v in self.headers.items()}
                standin.requests.append({"method": method, "path": url.path, "query": query,
                                         "body": body, "files": files, "content_type": ctype,
                                         "headers": headers})  # fmt: skip
                if standin.token and self.headers.get("Authorization") != f"Bearer {standin.token}":
                    status, payload = standin.status(401, 16, "Unauthenticated: no valid token")
                else:
                    status, payload = standin.handle(method, url.path, query, body, files, headers)
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

            def do_DELETE(self) -> None:  # noqa: N802
                self._serve("DELETE")

        return Handler


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
