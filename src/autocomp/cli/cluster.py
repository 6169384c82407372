"""Verbs that talk to a Kubeflow cluster: upload (the compiled pipelines), doctor (a cluster
preflight), resume (a failed run, through KFP's run retry), submit (one run) and schedule (a
recurring run, and `schedule list|pause|resume|delete`). They need the `pipelines` extra (kfp)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from autocomp.cli.table import format_table
from autocomp.errors import UsageError
from autocomp.pipelines.plumbing import PIPELINES


def add_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register the cluster verbs, in the order `autocomp --help` lists them."""
    _add_upload(verbs)
    _add_doctor(verbs)
    _add_resume(verbs)
    _add_submit_and_schedule(verbs)


def _where(args: argparse.Namespace) -> dict[str, Any]:
    """The endpoint flags (autocomp.pipelines.cluster.client.endpoint_from's arguments)."""
    return {"host": args.host, "token_env": args.token_env, "token_file": args.token_file,
            "cookies": args.cookies, "ca_cert": args.ca_cert, "namespace": args.namespace,
            "kfp_version": args.kfp_version}  # fmt: skip


def _note(args: argparse.Namespace) -> Any:
    return lambda said: print(f"autocomp {args.verb}: note: {said}", file=sys.stderr)


def _upload(args: argparse.Namespace) -> None:
    from autocomp.pipelines.cluster.client import upload_all

    def done(name: str, result: dict[str, str]) -> None:
        print(f"{name}: {result['action']} (pipeline {result['pipeline_id']}, "
              f"version {result['version']})")  # fmt: skip

    upload_all(args.dist, args.pipeline, done, **_where(args))


def _schedule(args: argparse.Namespace) -> None:
    from autocomp.pipelines.cluster.client import schedule_package

    if args.action:
        return _manage_schedules(args)
    for flag, value in (("pipeline", args.pipeline), ("name", args.name), ("cron", args.cron)):
        if not value:
            raise UsageError(
                flag, None, f"`autocomp schedule` needs --{flag} to create a recurring run "
                "(or an action: list, pause, resume, delete)",
            )  # fmt: skip

    def done(run_id: str, action: str) -> None:
        said = {"exists": "exists as asked, unchanged", "created": "created"}
        print(f"recurring run {run_id} ({args.name}): {args.pipeline} on '{args.cron}', "
              f"{said.get(action, action)}")  # fmt: skip

    dist, items = _generator(args)
    schedule_package(args.pipeline, dist, args.name, args.cron, items,
                     args.experiment, args.max_concurrency, args.catchup,
                     _note(args), done, args.store_capacity,
                     upload_first=bool(args.renderer), **_where(args))  # fmt: skip


def _generator(args: argparse.Namespace) -> tuple[str, list[str]]:
    """(dist, --param items) of a run: with --renderer, the packages compiled for that
    renderer (pipelines.generators) and `renderer=` among the parameters."""
    if not args.renderer:
        return args.dist, args.param
    if any(item.startswith("renderer=") for item in args.param):
        raise UsageError("renderer", args.renderer, "give the renderer once: --renderer, "
                         "or --param renderer=, not both")  # fmt: skip
    from autocomp.pipelines.generators import generator_dist

    dist = generator_dist(args.pipeline, args.dist, args.renderer, _note(args))
    return str(dist), [*args.param, f"renderer={args.renderer}"]


def _manage_schedules(args: argparse.Namespace) -> None:
    """`autocomp schedule list|pause|resume|delete`: recurring runs by name (cluster.recurring)."""
    from autocomp.pipelines.cluster import recurring
    from autocomp.pipelines.cluster.client import api_errors, connect, endpoint_from

    endpoint = endpoint_from(**_where(args))
    if args.action != "list" and not args.name:
        raise UsageError("name", None, f"`autocomp schedule {args.action}` needs --name "
                         "(`autocomp schedule list` shows them)")  # fmt: skip
    client = connect(endpoint)
    with api_errors(endpoint.host):
        if args.action == "list":
            found = recurring.listed(client, args.name, endpoint.namespace)
            rows = [[r.name, r.id, r.status, r.schedule, str(r.params.get("name", "-"))]
                    for r in found]  # fmt: skip
            print(format_table(["name", "id", "status", "schedule", "publishes as"], rows))
            return
        changed = recurring.manage(client, args.action, args.name, endpoint.namespace)
    for run in changed:
        print(f"recurring run {run.id} ({run.name}): {recurring.ACTIONS[args.action][1]}")


def _submit(args: argparse.Namespace) -> None:
    from autocomp.pipelines.cluster.client import submit_package

    said: dict[str, str] = {}
    dist, items = _generator(args)
    run_id = submit_package(args.pipeline, dist, args.name, items, args.experiment,
                            _note(args), said=said, store_capacity=args.store_capacity,
                            upload_first=bool(args.renderer), **_where(args))  # fmt: skip
    print(f"run {run_id}: {args.pipeline}")
    print(f"  ui:        {said['ui']}")
    if said.get("publishes"):
        print(
            f"  publishes: {said['publishes']} (evaluate_models: --param name={said['publishes']})"
        )


def _resume(args: argparse.Namespace) -> None:
    from autocomp.pipelines.cluster.resume import resume

    action, run_id = resume(args.run_id, args.dist, _note(args), **_where(args))
    if action == "retried":
        print(f"run {run_id}: retried (its failed tasks run again and resume from the store)")
    else:
        print(f"run {run_id}: a new run in place of {args.run_id} (same parameters and store)")


def _doctor(args: argparse.Namespace) -> None:
    from autocomp.pipelines.cluster.client import endpoint_from
    from autocomp.pipelines.cluster.doctor import Report, check_store, doctor

    if args.store_only:  # what doctor's probe pod runs, with the step's Secret as env
        if not args.store:
            raise UsageError("store", None, "--store-only needs the store to probe")
        if not check_store(Report(), args.store, "from here"):
            raise SystemExit(1)
        return
    if not doctor(endpoint_from(**_where(args)), args.store, args.dist, args.models or ["all"],
                  args.store_capacity):  # fmt: skip
        raise SystemExit(1)


def _client_args(p: argparse.ArgumentParser) -> None:
    """The options of every verb that talks to a KFP endpoint."""
    p.add_argument("--host", default=None, help="KFP API endpoint (default: $KFP_HOST)")
    p.add_argument(
        "--token-env",
        default="KFP_TOKEN",
        help="environment variable holding a bearer token (default KFP_TOKEN; oauth2-proxy)",
    )
    p.add_argument(
        "--token-file",
        default=None,
        help="a file holding the token: a projected ServiceAccount token with audience "
        "pipelines.kubeflow.org (default: $KF_PIPELINES_SA_TOKEN_PATH, or the file the "
        "access-ml-pipeline PodDefault mounts)",
    )
    p.add_argument(
        "--cookies",
        default=None,
        help="session cookie of a Dex login, "
        "'oauth2_proxy_kubeflow=...' on Kubeflow 1.9-1.11 (default: $KFP_COOKIES)",
    )
    p.add_argument("--ca-cert", default=None, help="CA bundle (PEM) of a private endpoint")
    p.add_argument("--namespace", default=None, help="profile namespace (multi-user Kubeflow; "
                   "default: $KFP_NAMESPACE)")  # fmt: skip
    p.add_argument("--kfp-version", default=None, help="the KFP backend version, where the "
                   "server says 'unknown' and its ConfigMap is not readable")  # fmt: skip
    p.add_argument("--dist", default="dist", help="compiled pipelines folder (default dist)")


def _capacity_arg(p: argparse.ArgumentParser) -> None:
    """--store-capacity: the store's room, for the capacity check of submit, schedule, doctor."""
    p.add_argument(
        "--store-capacity",
        default=None,
        metavar="SIZE",
        help="the room of the store, e.g. 2Ti: a run the capacity plan says does not fit "
        "is refused (KFP's own bucket mlpipeline: 20Gi, known)",
    )


def _add_upload(verbs: argparse._SubParsersAction) -> None:
    """`upload`: create or version the compiled pipelines on KFP."""
    p = verbs.add_parser("upload", help="create or version the compiled pipelines on KFP")
    _client_args(p)
    p.add_argument("--pipeline", choices=PIPELINES, default=None, help="one pipeline (default all)")
    p.set_defaults(run=_upload)


def _add_doctor(verbs: argparse._SubParsersAction) -> None:
    """`doctor`: check a cluster before the first run."""
    p = verbs.add_parser("doctor", help="check a cluster before the first run (KFP, store, ...)")
    _client_args(p)
    p.add_argument("--store", default=None, help="the store the pipelines use, e.g. s3://b/runs")
    _capacity_arg(p)
    p.add_argument(
        "--model", dest="models", action="append", default=[], help="a model to place (repeatable)"
    )
    p.add_argument(
        "--store-only",
        action="store_true",
        help="only write and read the store "
        "from here with this environment's credentials (what doctor's probe pod runs)",
    )
    p.set_defaults(run=_doctor)


def _add_resume(verbs: argparse._SubParsersAction) -> None:
    """`resume`: run again the failed tasks of a run."""
    p = verbs.add_parser(
        "resume",
        help="run again the failed tasks of a run (a lost node), through KFP's run retry",
        description="Retry a failed run through the KFP API (POST /apis/v2beta1/runs/ID:retry): "
        "only its failed tasks run again, each resuming from what it committed to the store. "
        "Where the server cannot retry it, a new run with the same parameters takes its place. "
        "Refused for a run that succeeded, is still going, belongs to another namespace or was "
        "made by another version of the pipeline than --dist.",
    )
    _client_args(p)
    p.add_argument("run_id", metavar="RUN_ID", help="the KFP run id")
    p.set_defaults(run=_resume, verb="resume")


def _add_submit_and_schedule(verbs: argparse._SubParsersAction) -> None:
    """`submit` (one run) and `schedule` (a recurring run) of an uploaded pipeline."""
    for verb, helptext in (
        (
            "schedule",
            "create a recurring run of an uploaded pipeline (one per name); "
            "`schedule list|pause|resume|delete` manage them",
        ),
        ("submit", "start one run of an uploaded pipeline"),
    ):
        p = verbs.add_parser(verb, help=helptext)
        _client_args(p)
        if verb == "schedule":
            p.add_argument(
                "action",
                nargs="?",
                choices=("list", "pause", "resume", "delete"),
                help="manage recurring runs by --name instead of creating one",
            )
        p.add_argument("--pipeline", choices=PIPELINES, required=verb == "submit")
        p.add_argument("--name", required=verb == "submit", help="run name")
        p.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="pipeline parameter (repeatable), e.g. renderer=flux-dev; typed and checked "
            "against the compiled pipeline in --dist",
        )
        p.add_argument("--experiment", default="autocomp", help="KFP experiment (default autocomp)")
        p.add_argument(
            "--renderer",
            default=None,
            help="run with this text-to-image model in one command: compile the packages it "
            "needs (beside --dist, when its GPUs are larger), upload them as a new version, "
            "and run it; the benchmark's card names it",
        )
        _capacity_arg(p)
        if verb == "schedule":
            p.add_argument(
                "--cron",
                default=None,
                help="KFP's cron: 6 fields (second first), "
                "e.g. '0 0 3 * * 1' = Mondays 03:00, or @weekly, @every 168h",
            )
            p.add_argument("--max-concurrency", type=int, default=1, help="runs at once (1-10)")
            p.add_argument("--catchup", action="store_true", help="start missed runs after a pause")
            p.set_defaults(run=_schedule, verb=verb)
        else:
            p.set_defaults(run=_submit, verb=verb)
