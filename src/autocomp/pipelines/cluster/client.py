"""Talk to a Kubeflow Pipelines endpoint through kfp.Client (REST API v2beta1):
upload or version the compiled pipelines, create a recurring run, submit one run.

Versions are content-addressed: `<package version>-<first 12 hex of the YAML's SHA-256>`, so
uploading an unchanged pipeline is a no-op and any change becomes a new version. (KFP names a new
pipeline's first version after the pipeline; its content name goes in the pipeline's
description, `... [version <name>]`, so that one is recognised too.) `submit` and `schedule` run
the version whose content is the local `dist/` package, never merely the newest upload, and
their `--param` values are typed and checked against that package's `inputDefinitions` before
any request is sent.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocomp import __version__
from autocomp.errors import UsageError
from autocomp.pipelines.plumbing import DISPLAY_NAMES

MIN_KFP = (2, 14)  # artifact fan-in through dsl.Collected; non-root executors need 2.3+


@dataclass(frozen=True)
class Endpoint:
    """How to reach a KFP API: host, and what its authentication needs (a bearer token for
    oauth2-proxy/Istio, the session cookie of a Dex login, a private CA) and the profile namespace
    of a multi-user installation."""

    host: str
    token: str | None = None
    cookies: str | None = None
    ca_cert: str | None = None
    namespace: str | None = None


def connect(endpoint: Endpoint | str) -> Any:
    import warnings

    import kfp

    if isinstance(endpoint, str):
        endpoint = Endpoint(endpoint)
    if endpoint.ca_cert and not Path(endpoint.ca_cert).is_file():
        raise UsageError("ca_cert", endpoint.ca_cert, "no such file; give the CA bundle (PEM)")
    _probe(endpoint)
    try:
        with warnings.catch_warnings():  # "only works with KFP v2.0.0-beta.2 and later": known
            warnings.simplefilter("ignore", FutureWarning)
            return kfp.Client(
                host=endpoint.host,
                existing_token=endpoint.token,
                cookies=endpoint.cookies,
                ssl_ca_cert=endpoint.ca_cert,
                namespace=endpoint.namespace or "kubeflow",
            )
    except Exception as exc:  # the client raises plain exceptions for unreachable hosts
        raise UsageError(
            "host",
            endpoint.host,
            f"no KFP API answers there ({type(exc).__name__}: {str(exc)[:120]})",
        ) from exc


def _probe(endpoint: Endpoint) -> None:
    """One healthz request with the same credentials, so that a refused login is said at once
    (kfp.Client retries its own healthz call five times, 5 s apart, then reports a timeout)."""
    import urllib3

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
            timeout=urllib3.Timeout(connect=10, read=30),
            retries=False,
            redirect=False,
        )
    except urllib3.exceptions.HTTPError as exc:
        raise UsageError(
            "host", endpoint.host, f"no KFP API answers there ({type(exc).__name__}: {exc})"
        ) from None
    if answer.status in (302, 401, 403):  # 302: a login page (Dex, oauth2-proxy)
        raise UsageError(
            "host",
            endpoint.host,
            f"the KFP API refused access (HTTP {answer.status}: "
            f"{answer.data[:120].decode(errors='replace')}); log in and pass the session cookie "
            "with --cookies, or a token in the variable named by --token-env",
        )


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
    """The server's own message from a KFP API error (grpc-gateway JSON body), else the error."""
    body = getattr(exc, "body", None)
    try:
        payload = json.loads(body) if body else {}
    except (TypeError, ValueError):
        payload = {}
    message = payload.get("message") or payload.get("error") or str(exc)
    status = getattr(exc, "status", None)
    return f"HTTP {status}: {message}" if status else message


def version_name(package: Path) -> str:
    return f"{__version__}-{hashlib.sha256(package.read_bytes()).hexdigest()[:12]}"


# ----------------------------------------------------------------------------- packages


def load_package(pipeline: str, package: Path) -> dict[str, Any]:
    """The pipeline spec of a compiled package, checked to be `pipeline`'s."""
    import yaml

    if not package.is_file():
        raise UsageError(
            "package", str(package), "no compiled pipeline there; run `autocomp compile`"
        )
    try:
        spec = next(yaml.safe_load_all(package.read_text(encoding="utf-8")))
    except (yaml.YAMLError, UnicodeDecodeError, StopIteration) as exc:
        raise UsageError("package", str(package), f"is not a compiled pipeline ({exc})") from None
    name = (spec or {}).get("pipelineInfo", {}).get("name") if isinstance(spec, dict) else None
    if name != DISPLAY_NAMES[pipeline]:
        raise UsageError(
            "package", str(package), f"is not the {pipeline} pipeline (it is {name!r}); recompile"
        )
    return spec


def input_definitions(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})


_KINDS = {
    "STRING": "a string",
    "NUMBER_INTEGER": "an integer",
    "NUMBER_DOUBLE": "a number",
    "BOOLEAN": "true or false",
    "LIST": "a list, e.g. [a, b]",
    "STRUCT": "a mapping, e.g. {key: value}",
}


def _typed(raw: str, kind: str) -> Any:
    """`raw` as a value of the KFP parameter type `kind`; ValueError when it is not one."""
    import yaml

    if kind == "STRING":
        return raw  # never YAML: name=2024 stays "2024", renderer=off stays "off"
    if kind == "NUMBER_INTEGER":
        return int(raw)
    if kind == "NUMBER_DOUBLE":
        return float(raw)
    if kind == "BOOLEAN":
        if raw.lower() not in ("true", "false"):
            raise ValueError(raw)
        return raw.lower() == "true"
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise ValueError(raw) from exc
    if not isinstance(value, list if kind == "LIST" else dict):
        raise ValueError(raw)
    return value


def typed_params(pipeline: str, items: list[str], spec: dict[str, Any]) -> dict[str, Any]:
    """`--param name=value` items typed by the package's inputDefinitions: unknown names,
    values of the wrong type, repeated names and missing required parameters are usage errors."""
    definitions = input_definitions(spec)
    params: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError("params", item, "must look like name=value (e.g. renderer=flux-dev)")
        if key not in definitions:
            known = ", ".join(sorted(definitions))
            raise UsageError("params", item, f"{pipeline} has no parameter {key}; known: {known}")
        if key in params:
            raise UsageError("params", item, f"{key} is given twice; give it once")
        kind = definitions[key]["parameterType"]
        try:
            params[key] = _typed(raw, kind)
        except ValueError:
            raise UsageError("params", item, f"{key} must be {_KINDS[kind]}") from None
    missing = [k for k, d in definitions.items() if k not in params and _required(d)]
    if missing:
        raise UsageError(
            "params", None, f"{pipeline} needs {', '.join(f'{m}=...' for m in missing)}"
        )
    return params


def _required(definition: dict[str, Any]) -> bool:
    return "defaultValue" not in definition and not definition.get("isOptional", False)


def _default(definition: dict[str, Any]) -> Any:
    value = definition["defaultValue"]  # the YAML holds every number as a float
    return int(value) if definition["parameterType"] == "NUMBER_INTEGER" else value


def check_params(pipeline: str, params: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """The parameters of one run of a compiled package, checked as a whole before any request:
    the package's defaults under the given values, each stage's configuration rebuilt and
    checked by its own rule, names, models and seeds (autocomp.pipelines.checks.check).
    Returns `params` (what is sent: the server fills in the defaults)."""
    from autocomp.pipelines import checks, plumbing

    definitions = input_definitions(spec)
    table = {p.name for p in plumbing.parameters(pipeline)}
    if set(definitions) != table:
        odd = sorted(set(definitions) ^ table)[0]
        raise UsageError(
            "package", pipeline, f"was compiled by another autocomp version (parameter {odd}); "
            "run `autocomp compile` again",
        )  # fmt: skip
    defaults = {k: _default(d) for k, d in definitions.items() if "defaultValue" in d}
    checks.check(pipeline, {**defaults, **params})
    return params


# ----------------------------------------------------------------------------- versions


def _versions(client: Any, pipeline_id: str) -> list[Any]:
    found, token = [], ""
    while True:
        response = client.list_pipeline_versions(
            pipeline_id=pipeline_id, page_token=token, page_size=100, sort_by="created_at desc"
        )
        found.extend(response.pipeline_versions or [])
        token = getattr(response, "next_page_token", None) or ""
        if not token:
            return found


def _find_version(client: Any, pipeline: str, package: Path) -> tuple[str | None, Any]:
    """(pipeline id or None, the uploaded version with this package's content or None)."""
    name = DISPLAY_NAMES[pipeline]
    version = version_name(package)
    pipeline_id = client.get_pipeline_id(name)
    if pipeline_id is None:
        return None, None
    first = f"[version {version}]" in (client.get_pipeline(pipeline_id).description or "")
    for v in _versions(client, pipeline_id):
        if v.display_name == version or (first and v.display_name == name):
            return pipeline_id, v
    return pipeline_id, None


def upload(client: Any, pipeline: str, package: Path) -> dict[str, str]:
    """Create the pipeline (first upload) or add a version; returns ids and what was done."""
    name = DISPLAY_NAMES[pipeline]
    version = version_name(package)
    pipeline_id, found = _find_version(client, pipeline, package)
    if pipeline_id is None:
        created = client.upload_pipeline(
            str(package), pipeline_name=name, description=f"autocomp {pipeline} [version {version}]"
        )
        latest = _versions(client, created.pipeline_id)
        return {
            "pipeline_id": created.pipeline_id,
            "version_id": latest[0].pipeline_version_id,
            "version": version,
            "action": "created",
        }
    if found is not None:
        return {
            "pipeline_id": pipeline_id,
            "version_id": found.pipeline_version_id,
            "version": version,
            "action": "unchanged",
        }
    made = client.upload_pipeline_version(
        str(package), pipeline_version_name=version, pipeline_id=pipeline_id
    )
    return {
        "pipeline_id": pipeline_id,
        "version_id": made.pipeline_version_id,
        "version": version,
        "action": "versioned",
    }


def pinned_version(client: Any, pipeline: str, package: Path) -> tuple[str, str]:
    """(pipeline id, version id) of the uploaded version whose content is `package`."""
    pipeline_id, found = _find_version(client, pipeline, package)
    if pipeline_id is None:
        raise UsageError("pipeline", pipeline, "is not uploaded there; run `autocomp upload`")
    if found is None:
        raise UsageError(
            "package",
            str(package),
            f"its version {version_name(package)} is not uploaded there (the server has other "
            "versions); run `autocomp upload` first, or point --dist at the uploaded package",
        )
    return pipeline_id, found.pipeline_version_id


# ----------------------------------------------------------------------------- runs


def _experiment(client: Any, experiment: str, namespace: str | None) -> str:
    return client.create_experiment(experiment, namespace=namespace).experiment_id


def check_schedule(cron: str, max_concurrency: int, params: dict[str, Any]) -> None:
    """What a recurring run needs beyond its parameters: a 6-field cron, a concurrency of at
    least 1, and run-unique names (each run would skip over the last one's benchmark)."""
    if len(cron.split()) != 6:
        raise UsageError(
            "cron",
            cron,
            "KFP cron has 6 fields: second minute hour day month "
            "weekday (e.g. '0 0 3 * * 1' = Mondays 03:00)",
        )
    if max_concurrency < 1:
        raise UsageError("max_concurrency", max_concurrency, "must be at least 1")
    if params.get("unique_name") is False:
        raise UsageError(
            "params",
            "unique_name=false",
            "a recurring run must publish under run-unique names (each run would skip over the "
            "last one's benchmark); leave unique_name at its default",
        )


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
) -> str:
    """A KFP recurring run of the uploaded version of `package`; returns its id. Everything is
    checked before any request (check_schedule, check_params). No catch-up by default: a
    paused or late schedule starts one run, not one per missed interval."""
    check_schedule(cron, max_concurrency, params)
    check_params(pipeline, params, load_package(pipeline, package))
    pipeline_id, version_id = pinned_version(client, pipeline, package)
    from kfp_server_api.exceptions import ApiException

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
        raise UsageError("params", params, f"the KFP API refused it ({api_message(exc)})") from None
    return made.recurring_run_id


def submit(
    client: Any,
    pipeline: str,
    package: Path,
    job_name: str,
    params: dict[str, Any],
    experiment: str = "autocomp",
    namespace: str | None = None,
) -> str:
    """One run of the uploaded version of `package` (its parameters checked first, before any
    request: check_params); returns its id."""
    check_params(pipeline, params, load_package(pipeline, package))
    pipeline_id, version_id = pinned_version(client, pipeline, package)
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
    cookies: str | None = None,
    ca_cert: str | None = None,
    namespace: str | None = None,
) -> Endpoint:
    """The endpoint of `upload`, `submit`, `schedule` and `doctor`: `host` or $KFP_HOST, the
    bearer token in the environment variable `token_env`, `cookies` or $KFP_COOKIES."""
    import os

    host = host or os.environ.get("KFP_HOST")
    if not host:
        raise UsageError("host", None, "give the KFP API endpoint (or set KFP_HOST)")
    return Endpoint(
        host=host,
        token=os.environ.get(token_env) if token_env else None,
        cookies=cookies or os.environ.get("KFP_COOKIES"),
        ca_cert=ca_cert,
        namespace=namespace,
    )


def upload_all(
    dist: str | Path,
    pipeline: str | None = None,
    done: Callable[[str, dict[str, str]], None] | None = None,
    **where: Any,
) -> dict[str, dict[str, str]]:
    """Upload (or version) `pipeline`, or all three, from `dist`: every package is checked
    before the endpoint (`where`: endpoint_from's arguments) is reached. `done(name, result)`
    follows each upload."""
    names = [pipeline] if pipeline else list(DISPLAY_NAMES)
    packages = {name: Path(dist) / f"{name}.yaml" for name in names}
    for name, package in packages.items():
        load_package(name, package)
    endpoint = endpoint_from(**where)
    client = connect(endpoint)
    results = {}
    for name, package in packages.items():
        with api_errors(endpoint.host):
            results[name] = upload(client, name, package)
        if done is not None:
            done(name, results[name])
    return results


def checked_params(pipeline: str, dist: str | Path, items: list[str]) -> tuple[Path, dict]:
    """The package of `pipeline` in `dist` and the `name=value` items typed by it and checked
    as a whole (typed_params, check_params), before any request."""
    package = Path(dist) / f"{pipeline}.yaml"
    spec = load_package(pipeline, package)
    return package, check_params(pipeline, typed_params(pipeline, items, spec), spec)


def submit_package(
    pipeline: str,
    dist: str | Path,
    job_name: str,
    items: list[str],
    experiment: str = "autocomp",
    **where: Any,
) -> str:
    """`autocomp submit`: one run of the uploaded `dist` package with the `name=value` items,
    everything checked before the endpoint (`where`: endpoint_from's arguments) is reached;
    returns the run id."""
    package, params = checked_params(pipeline, dist, items)
    endpoint = endpoint_from(**where)
    with api_errors(endpoint.host):
        return submit(connect(endpoint), pipeline, package, job_name, params, experiment,
                      namespace=endpoint.namespace)  # fmt: skip


def schedule_package(
    pipeline: str,
    dist: str | Path,
    job_name: str,
    cron: str,
    items: list[str],
    experiment: str = "autocomp",
    max_concurrency: int = 1,
    catchup: bool = False,
    **where: Any,
) -> str:
    """`autocomp schedule`: a recurring run of the uploaded `dist` package, checked as
    `submit_package` is (the cron and concurrency first); returns the recurring run's id."""
    check_schedule(cron, max_concurrency, {})
    package, params = checked_params(pipeline, dist, items)
    check_schedule(cron, max_concurrency, params)
    endpoint = endpoint_from(**where)
    with api_errors(endpoint.host):
        return schedule(connect(endpoint), pipeline, package, job_name, cron, params, experiment,
                        max_concurrency, catchup=catchup, namespace=endpoint.namespace)  # fmt: skip
