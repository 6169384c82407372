"""Talk to a Kubeflow Pipelines endpoint through kfp.Client (REST API v2beta1): upload or
version the compiled pipelines, create a recurring run, submit one run.

Versions are content-addressed (cluster.packages.version_name), so uploading an unchanged
pipeline is a no-op and any change becomes a new version. (KFP names a new pipeline's first
version after the pipeline; its content name goes in the pipeline's description, `... [version
<name>]`, so that one is recognised too.) `submit` and `schedule` run the version whose content
is the local `dist/` package, never merely the newest upload, and check everything before any
request: the parameters (cluster.packages.check_params: typed by the package, the library's own
checks, a store the pods share, models that fit the package's GPUs), the backend (the server's
version against the range the package was compiled for, cluster.backends), and for a recurring
run KFP's own rules (max_concurrency 1-10, robfig/cron: cluster.cron).

Authentication (docs/cluster.md): a bearer token (oauth2-proxy / Istio, or a ServiceAccount
token with audience pipelines.kubeflow.org: the PodDefault's projected token file, or `kubectl
create token --audience pipelines.kubeflow.org`), or the session cookie of a Dex login
(`oauth2_proxy_kubeflow=...` on Kubeflow 1.9-1.11). In multi-user mode every request needs the
profile namespace.

Over 450 lines because every verb that talks to a KFP endpoint (connect, upload, submit,
schedule) shares its endpoint, authentication and API-error handling here; uploads.py and
cron.py already hold what stands alone."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.pipelines import plumbing
from autocomp.pipelines.cluster import backends
from autocomp.pipelines.cluster.packages import (  # noqa: F401  (the client's public names)
    check_params,
    check_placement,
    input_definitions,
    load_documents,
    load_package,
    typed_params,
    version_name,
)
from autocomp.pipelines.cluster.uploads import pinned_version, upload  # noqa: F401
from autocomp.pipelines.plumbing import DISPLAY_NAMES  # noqa: F401
from autocomp.store.catalog.ids import check_component

# Where Kubeflow's PodDefault `access-ml-pipeline` mounts a projected ServiceAccount token with
# audience pipelines.kubeflow.org (kubeflow/manifests v1.11.0 tests/poddefaults.access-ml-
# pipeline.kubeflow-user-example-com.yaml); kfp reads $KF_PIPELINES_SA_TOKEN_PATH too.
TOKEN_PATH_ENV = "KF_PIPELINES_SA_TOKEN_PATH"
PODDEFAULT_TOKEN = "/var/run/secrets/kubeflow/pipelines/token"
_HEADER_VALUE = re.compile(
    r"[\x20-\x7e\t]*"
)  # visible ASCII, space and tab: nothing a header splits on


@dataclass(frozen=True)
class Endpoint:
    """How to reach a KFP API: host, and what its authentication needs (a bearer token, the
    session cookie of a Dex login, a private CA), the profile namespace of a multi-user
    installation, and the backend version when the server cannot say it (`kfp_version`)."""

    host: str
    token: str | None = None
    cookies: str | None = None
    ca_cert: str | None = None
    namespace: str | None = None
    kfp_version: str | None = None


def read_token(path: str | None) -> str | None:
    """A token from a file (a projected ServiceAccount token, `kubectl create token` output):
    `path`, else $KF_PIPELINES_SA_TOKEN_PATH, else the PodDefault's file when it exists."""
    path = path or os.environ.get(TOKEN_PATH_ENV)
    if not path:
        path = PODDEFAULT_TOKEN if Path(PODDEFAULT_TOKEN).is_file() else None
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError("token_file", path, f"cannot be read ({exc}); give the token file "
                         "(a projected ServiceAccount token)") from None  # fmt: skip


def check_endpoint(endpoint: Endpoint) -> None:
    """Everything an endpoint sends, checked before a request: an http(s) host, header values
    without line breaks or control characters (a pasted token or cookie often ends in one),
    a CA file that exists, a namespace Kubernetes accepts."""
    if not re.match(r"https?://[^\s/]+", endpoint.host or ""):
        raise UsageError("host", endpoint.host, "give the KFP API as http(s)://host[/path], e.g. "
                         "https://kubeflow.example.com/pipeline")  # fmt: skip
    for what, value in (("token", endpoint.token), ("cookies", endpoint.cookies)):
        if value is not None and not _HEADER_VALUE.fullmatch(value):
            bad = next(c for c in value if not _HEADER_VALUE.fullmatch(c))
            raise UsageError(what, f"...{bad!r}...", "contains a line break or control "
                             "character; copy it again without it")  # fmt: skip
    if endpoint.ca_cert and not Path(endpoint.ca_cert).is_file():
        raise UsageError("ca_cert", endpoint.ca_cert, "no such file; give the CA bundle (PEM)")
    if endpoint.namespace is not None and not re.fullmatch(
        r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", endpoint.namespace
    ):
        raise UsageError("namespace", endpoint.namespace, "not a Kubernetes namespace name")
    if endpoint.kfp_version is not None and not backends.EXACT_VERSION.fullmatch(
        endpoint.kfp_version
    ):
        raise UsageError("kfp_version", endpoint.kfp_version, "give a version such as 2.15.0")


def connect(endpoint: Endpoint | str, namespaced: bool = True) -> Any:
    """A kfp.Client for `endpoint`, after one healthz request with the same credentials (its
    answer is kept as `client.autocomp_health`). In multi-user mode runs, experiments and their
    authorization are per namespace: it must be given (`namespaced`; uploads are shared)."""
    import warnings

    import kfp

    if isinstance(endpoint, str):
        endpoint = Endpoint(endpoint)
    check_endpoint(endpoint)
    health = _probe(endpoint)
    if namespaced and health.get("multi_user") and not endpoint.namespace:
        raise UsageError("namespace", None, "the KFP API runs in multi-user mode: give your "
                         "profile namespace (every run, experiment and authorization is per "
                         "namespace)")  # fmt: skip
    try:
        with warnings.catch_warnings():  # "only works with KFP v2.0.0-beta.2 and later": known
            warnings.simplefilter("ignore", FutureWarning)
            client = kfp.Client(
                host=endpoint.host,
                existing_token=endpoint.token,
                cookies=endpoint.cookies,
                ssl_ca_cert=endpoint.ca_cert,
                namespace=endpoint.namespace or "kubeflow",  # kfp's own "none given"
            )
    except Exception as exc:  # the client raises plain exceptions for unreachable hosts
        raise UsageError(
            "host",
            endpoint.host,
            f"no KFP API answers there ({type(exc).__name__}: {str(exc)[:120]})",
        ) from exc
    client.autocomp_health = health
    client.autocomp_endpoint = endpoint
    _with_deadline(client)
    return client


def _with_deadline(client: Any) -> None:
    """Every request of the kfp client under the one network deadline (autocomp.network): its
    generated REST client sends none unless a call passes `_request_timeout`."""
    from autocomp.network import deadline

    rest = client._run_api.api_client.rest_client  # one ApiClient serves every kfp API
    send = rest.request

    def request(*args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        return send(*args, _request_timeout=_request_timeout or deadline().pair, **kwargs)

    rest.request = request


def _probe(endpoint: Endpoint) -> dict[str, Any]:
    """One healthz request with the same credentials, so that a refused login is said at once
    (kfp.Client retries its own healthz call five times, 5 s apart, then reports a timeout).
    Returns the answer (tag_name, multi_user, ...)."""
    import urllib3

    from autocomp.network import urllib3_timeout

    headers = {}
    if endpoint.token:
        headers["Authorization"] = f"Bearer {endpoint.token}"
    if endpoint.cookies:
        headers["Cookie"] = endpoint.cookies
    http = urllib3.PoolManager(ca_certs=endpoint.ca_cert) if endpoint.ca_cert else None
    try:
        answer = (http or urllib3.PoolManager()).request(
            "GET",
            endpoint.host.rstrip("/") + "/apis/v2beta1/healthz",
            headers=headers,
            timeout=urllib3_timeout(),  # the one network deadline
            retries=False,
            redirect=False,
        )
    except (urllib3.exceptions.HTTPError, ValueError) as exc:
        raise UsageError(
            "host", endpoint.host, f"no KFP API answers there ({type(exc).__name__}: {exc})"
        ) from None
    if answer.status in (302, 401, 403):  # 302: a login page (Dex, oauth2-proxy)
        raise UsageError(
            "host",
            endpoint.host,
            f"the KFP API refused access (HTTP {answer.status}: {_body_message(answer.data)}); "
            "log in and pass the session cookie (oauth2_proxy_kubeflow=...), or a token with "
            "audience pipelines.kubeflow.org (docs/cluster.md, authentication)",
        )
    try:
        health = json.loads(answer.data)
    except ValueError:
        health = None
    if answer.status != 200 or not isinstance(health, dict):
        raise UsageError("host", endpoint.host, f"no KFP API answers there (HTTP {answer.status}: "
                         f"{_body_message(answer.data)})")  # fmt: skip
    return health


def _body_message(data: bytes) -> str:
    try:
        payload = json.loads(data)
    except ValueError:
        return data[:120].decode(errors="replace")
    return _message(payload) or data[:120].decode(errors="replace")


def _message(payload: Any) -> str | None:
    """The message of a KFP error body: grpc-gateway's `message` (and `error` up to 2.5), the
    upload endpoints' `error_message` (pipeline_upload_server.go writeErrorToResponse)."""
    if not isinstance(payload, dict):
        return None
    return payload.get("error_message") or payload.get("message") or payload.get("error")


@contextlib.contextmanager
def api_errors(host: str) -> Iterator[None]:
    """Any refusal or failure of the KFP API as a usage error naming the host and the server's
    own message (e.g. a 403 of multi-user authorization, a 409 of a concurrent upload)."""
    from kfp_server_api.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        yield
    except ApiException as exc:
        raise UsageError("host", host, f"the KFP API refused it ({api_message(exc)})") from None
    except HTTPError as exc:
        raise UsageError("host", host, f"the KFP API stopped answering ({exc})") from None


def api_message(exc: BaseException) -> str:
    """The server's own message from a KFP API error (its JSON body), else the error."""
    body = getattr(exc, "body", None)
    try:
        payload = json.loads(body) if body else {}
    except (TypeError, ValueError):
        payload = {}
    message = _message(payload) or str(exc)
    status = getattr(exc, "status", None)
    return f"HTTP {status}: {message}" if status else message


# ----------------------------------------------------------------------------- the backend


def server_version(client: Any) -> tuple[backends.Version | None, str]:
    """The backend's version and where it was read: healthz `tag_name`; where that says
    "unknown" (release images 2.4-2.15 are built without TAG_NAME), KFP's install ConfigMap
    through the kubeconfig; else the endpoint's stated kfp_version."""
    known = getattr(client, "autocomp_version", None)
    if known is None:
        known = client.autocomp_version = _server_version(client)
    return known


def _server_version(client: Any) -> tuple[backends.Version | None, str]:
    from autocomp.pipelines.cluster import kube

    tag = client.autocomp_health.get("tag_name")
    version = backends.parse_version(tag)
    if version is not None:
        return version, "healthz tag_name"
    try:
        found = backends.parse_version(kube.connect().install_version())
    except (kube.Unavailable, kube.KubeError) as exc:
        found, why = None, str(exc)
    else:
        why = "no appVersion"
    if found is not None:
        return found, f"ConfigMap {kube.KFP_NAMESPACE}/{kube.INSTALL_CONFIG[0]} appVersion"
    stated = backends.parse_version(client.autocomp_endpoint.kfp_version)
    if stated is not None:
        return stated, "stated (kfp_version)"
    return None, f"healthz tag_name {tag!r}, ConfigMap {kube.INSTALL_CONFIG[0]}: {why}"


def check_backend(
    client: Any, docs: list[dict[str, Any]], package: Path | None = None
) -> list[str]:
    """Refuse (UsageError) a package this backend cannot run; return what it runs degraded.
    A package compiled for other releases is named with both sides and the compile command
    that fits the server (`package`: its file, so the command writes the same folder)."""
    version, source = server_version(client)
    if version is None:
        raise UsageError("kfp_version", None, f"the server's KFP version is unknown ({source}); "
                         "give it (`kubectl -n kubeflow get configmap pipeline-install-config "
                         "-o jsonpath={.data.appVersion}`)")  # fmt: skip
    refusals, degraded = backends.check_server(docs[0], version)
    recorded = backends.stamped_range(docs[0])
    other = recorded is not None and not recorded_covers(recorded, version)
    if refusals and recorded and other and package is not None and not backends.refusal(version):
        fits = next((t for t in backends.TARGETS if t.covers(version)), None)
        fix = (f"autocomp compile --out {package.parent} --backend {backends.shown(version)}"
               if fits else "no autocomp target runs on it")  # fmt: skip
        raise UsageError(
            "dist",
            str(package),
            f"compiled for KFP {backends.compiled_range(recorded)}, but the server at "
            f"{client.autocomp_endpoint.host} runs KFP {backends.shown(version)} ({source}); "
            f"recompile for it: {fix}",
        )
    if refusals:
        raise UsageError(f"KFP server ({source})", backends.shown(version), refusals[0])
    return degraded


def recorded_covers(recorded: tuple[Any, Any], version: Any) -> bool:
    """Whether a package's recorded backend range (backends.stamped_range) holds `version`."""
    first, until = recorded
    return bool(version >= first and (until is None or version < until))


# ----------------------------------------------------------------------------- runs


def _experiment(client: Any, experiment: str, namespace: str | None) -> str:
    """The experiment's id, created in `namespace` (multi-user: the run's namespace comes from
    its experiment, backend/src/apiserver/server/job_server.go:97)."""
    return client.create_experiment(experiment, namespace=namespace).experiment_id


def check_schedule(cron: str, max_concurrency: int, params: dict[str, Any]) -> None:
    """What a recurring run needs beyond its parameters, as the API server checks it
    (backend/src/apiserver/server/api_converter.go:1970-1977 at 2.15.0): a cron robfig/cron
    v1.2.0 parses, written with its seconds field (a 5-field cron is read as second minute hour
    day month, not crontab's minute-first order: refused here), max_concurrency from 1 to 10;
    and run-unique names (each run would skip over the last one's benchmark)."""
    from autocomp.pipelines.cluster.cron import parse

    error = parse(cron)
    if error:
        raise UsageError(
            "cron",
            cron,
            f"KFP refuses it ({error}); give 6 fields: second minute "
            "hour day month weekday, e.g. '0 0 3 * * 1' = Mondays 03:00, or @weekly",
        )
    if not cron.startswith("@") and len(cron.split()) == 5:
        raise UsageError("cron", cron, "KFP reads 5 fields as second minute hour day month (not "
                         "crontab's minute hour day month weekday); give 6 fields, e.g. "
                         "'0 0 3 * * 1' = Mondays 03:00, or @weekly")  # fmt: skip
    if not 1 <= max_concurrency <= 10:
        raise UsageError("max_concurrency", max_concurrency, "KFP takes 1 to 10")
    if params.get("unique_name") is False:
        raise UsageError(
            "unique_name",
            False,
            "a recurring run must publish under run-unique names (each run would skip over the "
            "last one's benchmark); leave unique_name at its default",
        )


# What a recurring generate run's `draw` is: the run id. The API server and the ScheduledWorkflow
# controller replace {{workflow.uid}} in the compiled workflow, runtime parameters included,
# with each run's id (backend/src/apiserver/template/v2_template.go ReplaceUID; crd/controller/
# scheduledworkflow/util/scheduled_workflow.go:183, "Replace {{workflow.uid}} with runId"). KFP's
# recurring-run macros ([[RunUUID]], [[Index]]) do not reach a v2 pipeline's parameters: its
# runtime config is compiled into the workflow, and the controller overrides only workflow
# arguments (common/util/workflow.go OverrideParameters).
RUN_ID = "{{workflow.uid}}"


def with_draw(pipeline: str, params: dict[str, Any]) -> dict[str, Any]:
    """The parameters of a recurring run: a generate run draws anew each time (draw = its run
    id) unless `draw` is given; a draw of "" would replay the first run from KFP's cache, as
    would any recurring fine-tuning run (its training steps are cached): both refused."""
    if pipeline == "finetune_models":
        raise UsageError(
            "pipeline",
            pipeline,
            "a recurring fine-tuning run would replay the "
            "first one from KFP's cache; submit it when its benchmark changes",
        )
    if "generate_benchmark" not in plumbing.parts(pipeline):
        return params
    if params.get("draw") == "":
        raise UsageError(
            "draw",
            "",
            "a recurring run with a fixed draw replays its first run "
            "from KFP's cache; leave draw out (each run draws anew) or name one",
        )
    return {**params, "draw": params.get("draw", RUN_ID)}


def _prepare(client: Any, pipeline: str, package: Path, params: dict[str, Any]) -> tuple:
    """Everything before a run is sent: the parameters, the models' GPUs, the backend, the
    uploaded version; returns (pipeline id, version id, the backend's degradations)."""
    docs = load_documents(pipeline, package)
    check_params(pipeline, params, docs[0])
    check_placement(pipeline, params, docs)
    degraded = check_backend(client, docs, package)
    pipeline_id, version_id = pinned_version(client, pipeline, package)
    return pipeline_id, version_id, degraded


def schedule(
    client: Any,
    pipeline: str,
    package: Path,
    job_name: str,
    cron: str,
    params: dict[str, Any],
    experiment: str = "autocomp",
    max_concurrency: int = 1,
    catchup: bool = False,
    namespace: str | None = None,
    done: Callable[[str, str], None] | None = None,
) -> str:
    """A KFP recurring run of the uploaded version of `package`; returns its id. Everything is
    checked before any request (check_schedule, _prepare). No catch-up by default: a paused or
    late schedule starts one run, not one per missed interval. A recurring generate run draws
    anew each time (with_draw), unless `draw` is given. One per name (recurring.upsert): the
    same schedule again changes nothing, a changed one replaces it; `done(id, what was done)`."""
    check_schedule(cron, max_concurrency, params)
    params = with_draw(pipeline, params)
    pipeline_id, version_id, _ = _prepare(client, pipeline, package, params)
    namespace = namespace or client.autocomp_endpoint.namespace
    from kfp_server_api.exceptions import ApiException

    from autocomp.pipelines.cluster import recurring

    def create() -> str:
        try:
            made = client.create_recurring_run(
                experiment_id=_experiment(client, experiment, namespace),
                job_name=job_name,
                cron_expression=cron,
                max_concurrency=max_concurrency,
                no_catchup=not catchup,
                params=params,
                pipeline_id=pipeline_id,
                version_id=version_id,
                enabled=True,
            )
        except ApiException as exc:
            raise UsageError(
                "params", params, f"the KFP API refused it ({api_message(exc)})"
            ) from None
        return str(made.recurring_run_id)

    wanted = recurring.Recurring("", job_name, "ENABLED", cron, pipeline_id, version_id, params,
                                 str(max_concurrency), not catchup)  # fmt: skip
    run_id, action = recurring.upsert(client, wanted, namespace, create)
    if done is not None:
        done(run_id, action)
    return run_id


def submit(
    client: Any,
    pipeline: str,
    package: Path,
    job_name: str,
    params: dict[str, Any],
    experiment: str = "autocomp",
    namespace: str | None = None,
) -> str:
    """One run of the uploaded version of `package` (everything checked first, before any
    request: _prepare); returns its id."""
    pipeline_id, version_id, _ = _prepare(client, pipeline, package, params)
    namespace = namespace or client.autocomp_endpoint.namespace
    from kfp_server_api.exceptions import ApiException

    try:
        run = client.run_pipeline(
            experiment_id=_experiment(client, experiment, namespace),
            job_name=job_name,
            params=params,
            pipeline_id=pipeline_id,
            version_id=version_id,
        )
    except ApiException as exc:
        raise UsageError("params", params, f"the KFP API refused it ({api_message(exc)})") from None
    return run.run_id


# ----------------------------------------------------------------------------- the verbs


def endpoint_from(
    host: str | None = None,
    token_env: str | None = "KFP_TOKEN",
    token_file: str | None = None,
    cookies: str | None = None,
    ca_cert: str | None = None,
    namespace: str | None = None,
    kfp_version: str | None = None,
) -> Endpoint:
    """The endpoint of `upload`, `submit`, `schedule` and `doctor`, checked before anything is
    sent: `host` or $KFP_HOST; the bearer token in the environment variable `token_env`, else
    the projected token file `token_file` (read_token); `cookies` or $KFP_COOKIES; `namespace`
    or $KFP_NAMESPACE."""
    host = host or os.environ.get("KFP_HOST")
    if not host:
        raise UsageError("host", None, "give the KFP API endpoint (or set KFP_HOST)")
    token = os.environ.get(token_env) if token_env else None
    endpoint = Endpoint(
        host=host,
        token=token or read_token(token_file),
        cookies=cookies or os.environ.get("KFP_COOKIES"),
        ca_cert=ca_cert,
        namespace=namespace or os.environ.get("KFP_NAMESPACE"),
        kfp_version=kfp_version,
    )
    check_endpoint(endpoint)
    return endpoint


def upload_all(
    dist: str | Path,
    pipeline: str | None = None,
    done: Callable[[str, dict[str, str]], None] | None = None,
    **where: Any,
) -> dict[str, dict[str, str]]:
    """Upload (or version) `pipeline`, or all three, from `dist` as shared pipelines (no
    namespace): every package is checked before the endpoint (`where`: endpoint_from's
    arguments) is reached. `done(name, result)` follows each upload."""
    names = [pipeline] if pipeline else list(DISPLAY_NAMES)
    packages = {name: Path(dist) / f"{name}.yaml" for name in names}
    for name, package in packages.items():
        load_package(name, package)
    endpoint = endpoint_from(**where)
    client = connect(endpoint, namespaced=False)
    results = {}
    for name, package in packages.items():
        with api_errors(endpoint.host):
            results[name] = upload(client, name, package)
        if done is not None:
            done(name, results[name])
    return results


def checked_params(
    pipeline: str, dist: str | Path, job_name: str, items: list[str], recurring: bool = False,
    store_capacity: str | None = None, note: Callable[[str], None] | None = None,
) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:  # fmt: skip
    """(package, parameters, documents) of one run of `pipeline`'s package in `dist`: the
    `name=value` items typed by the package and checked as a whole (the library's checks, the
    store and whether the run fits it, the models' GPUs; a recurring run's draw), before any
    request."""
    from autocomp.pipelines.cluster.nodes import check_nodes
    from autocomp.pipelines.cluster.storecap import check_package_room

    check_component("job_name", job_name)  # the one rule for every name (issue 24)
    package = Path(dist) / f"{pipeline}.yaml"
    docs = load_documents(pipeline, package)
    params = check_params(pipeline, typed_params(pipeline, items, docs[0]), docs[0])
    check_package_room(pipeline, params, docs[0], store_capacity, note)
    if recurring:
        params = with_draw(pipeline, params)
    check_placement(pipeline, params, docs)
    check_nodes(pipeline, params, docs, note)  # the live nodes, where a kubeconfig reaches them
    return package, params, docs


def _connected(
    docs: list[dict[str, Any]],
    note: Callable[[str], None] | None,
    where: dict[str, Any],
    package: Path | None = None,
) -> Any:
    """The client, once the server's version accepts the package (its degradations noted)."""
    client = connect(endpoint_from(**where))
    for said in check_backend(client, docs, package):
        if note is not None:
            note(said)
    return client


def submit_package(
    pipeline: str,
    dist: str | Path,
    job_name: str,
    items: list[str],
    experiment: str = "autocomp",
    note: Callable[[str], None] | None = None,
    said: dict[str, str] | None = None,
    store_capacity: str | None = None,
    upload_first: bool = False,
    **where: Any,
) -> str:
    """`autocomp submit`: one run of the uploaded `dist` package with the `name=value` items,
    everything checked before the endpoint (`where`: endpoint_from's arguments) is reached;
    `note` hears what the server's backend runs degraded. Returns the run id; `said` gets the
    run's page in the KFP UI (`ui`) and the name its benchmark is published under
    (`publishes`, generate_benchmark only). `store_capacity`: the store's room (storecap).
    `upload_first`: upload the package (a new version when it is new) in the same command."""
    from autocomp.pipelines.cluster.packages import published_as

    package, params, docs = checked_params(pipeline, dist, job_name, items, False,
                                           store_capacity, note)  # fmt: skip
    client = _connected(docs, note, where, package)
    with api_errors(client.autocomp_endpoint.host):
        if upload_first:
            _upload_one(client, pipeline, package, note)
        run_id = submit(client, pipeline, package, job_name, params, experiment)
    if said is not None:
        said["ui"] = run_link(client.autocomp_endpoint.host, run_id)
        said["publishes"] = published_as(pipeline, params, docs[0], run_id)
    return run_id


def _upload_one(
    client: Any, pipeline: str, package: Path, note: Callable[[str], None] | None
) -> None:
    """Upload `package` as a shared pipeline (as `autocomp upload` does: no namespace), a new
    version only when its content is new."""
    shared = connect(client.autocomp_endpoint, namespaced=False)
    result = upload(shared, pipeline, package)
    if note is not None:
        note(f"{pipeline}: {result['action']} (pipeline {result['pipeline_id']}, version "
             f"{result['version']}) from {package}")  # fmt: skip


def run_link(host: str, run_id: str) -> str:
    """A run's page in the KFP UI: kfp.Client's own link (kfp/client/client.py:741 in kfp
    2.17: `<UI prefix>/#/runs/details/<id>`, the prefix being $KF_PIPELINES_UI_ENDPOINT or the
    host; Kubeflow serves the UI and the API under the same /pipeline prefix)."""
    prefix = os.environ.get("KF_PIPELINES_UI_ENDPOINT") or host
    return f"{prefix.rstrip('/')}/#/runs/details/{run_id}"


def schedule_package(
    pipeline: str,
    dist: str | Path,
    job_name: str,
    cron: str,
    items: list[str],
    experiment: str = "autocomp",
    max_concurrency: int = 1,
    catchup: bool = False,
    note: Callable[[str], None] | None = None,
    done: Callable[[str, str], None] | None = None,
    store_capacity: str | None = None,
    upload_first: bool = False,
    **where: Any,
) -> str:
    """`autocomp schedule`: a recurring run of the uploaded `dist` package (a new draw each
    run), checked as `submit_package` is (the cron and concurrency first); returns the
    recurring run's id. `upload_first`: as for submit_package."""
    check_schedule(cron, max_concurrency, {})
    package, params, docs = checked_params(pipeline, dist, job_name, items, True,
                                           store_capacity, note)  # fmt: skip
    check_schedule(cron, max_concurrency, params)
    client = _connected(docs, note, where, package)
    with api_errors(client.autocomp_endpoint.host):
        if upload_first:
            _upload_one(client, pipeline, package, note)
        return schedule(client, pipeline, package, job_name, cron, params, experiment,
                        max_concurrency, catchup=catchup, done=done)  # fmt: skip
