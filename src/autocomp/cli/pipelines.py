"""Verbs of the Kubeflow pipelines: run (both pipelines on this machine through kfp.local),
compile, upload, schedule, submit, doctor (a cluster preflight). They need the `pipelines` extra
(kfp); the definitions ship inside the package, so they work from any folder and inside the
images."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from autocomp.cli.table import format_table, random_weights_note
from autocomp.config import PROFILES
from autocomp.errors import UsageError, whole_number
from autocomp.pipelines.plumbing import PIPELINES


def _compile(args: argparse.Namespace) -> None:
    from autocomp.pipelines.cluster.backends import target_for
    from autocomp.pipelines.compile import compile_all

    target = target_for(args.backend)
    sizes = {}
    for item in args.gpu_sizes:
        step, sep, gb = item.partition("=")
        if not sep or whole_number(gb) is None:  # ASCII digits: int() never sees '²'
            raise UsageError("gpu_sizes", item, "must look like step=GB, e.g. render=48")
        sizes[step] = int(gb)
    done = compile_all(args.out, args.backend, tuple(args.pull_secrets), sizes,
                       tuple(args.tolerations), args.placement, tuple(args.gpu_labels))  # fmt: skip
    for name, path in done.items():
        print(f"compiled {name} -> {path}")
    print(f"for KFP backend {target.range} (docs/cluster.md: what works on which version)")
    _compile_notes(done, target)


def _compile_notes(done: dict, target) -> None:  # noqa: ANN001  (a backends.Target)
    """What the packages cannot do on the target's first release (doctor refuses it there)."""
    import sys

    import yaml

    from autocomp.pipelines.cluster.backends import check_server

    for name in PIPELINES:
        spec = next(yaml.safe_load_all(done[name].read_text(encoding="utf-8")))
        refusals, _ = check_server(spec, target.first)
        for why in refusals:
            print(f"autocomp compile: note: {name} on KFP {target.range}: {why}", file=sys.stderr)


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

    schedule_package(args.pipeline, args.dist, args.name, args.cron, args.param,
                     args.experiment, args.max_concurrency, args.catchup,
                     _note(args), done, args.store_capacity, **_where(args))  # fmt: skip


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
    run_id = submit_package(args.pipeline, args.dist, args.name, args.param, args.experiment,
                            _note(args), said=said, store_capacity=args.store_capacity,
                            **_where(args))  # fmt: skip
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


def _prefetch(args: argparse.Namespace) -> None:
    import os

    from autocomp.pipelines.cluster.warmup import prefetch

    cache = args.cache or os.environ.get("HF_HUB_CACHE")
    if not cache and not args.list:
        raise UsageError("cache", None, "give the hub cache to fill (or set HF_HUB_CACHE)")
    failed = prefetch(cache or "", only=args.models or None, dry_run=args.list)
    if failed:
        print(f"prefetch: {failed} model(s) failed (see above)")
        raise SystemExit(1)


def _summary_rows(results: Path) -> list[list[str]]:
    """One row per model x family x N x set (paper protocol): Minimal and Contextual accuracy
    side by side, and the chance baseline."""
    import pyarrow.parquet as pq

    cells: dict[tuple, dict[str, dict]] = {}
    for run in sorted(p for p in results.iterdir() if (p / "summary.parquet").is_file()):
        for r in pq.read_table(run / "summary.parquet").to_pylist():
            if r["protocol"] == "paper" and r.get("score_type", "score") == "score":
                key = (r["model"], r["family"], r["n"], r["set"])
                cells.setdefault(key, {})[r["condition"]] = r
    rows = []
    for (model, family, n, set_), by in sorted(cells.items()):
        items = sorted({str(r["items"]) for r in by.values()})
        chance = next(iter(by.values()))["chance"]
        acc = [f"{100 * by[c]['accuracy']:.1f}" if c in by else "-"
               for c in ("minimal", "contextual")]  # fmt: skip
        rows.append([model, family, str(n), set_, "/".join(items), *acc, f"{100 * chance:.2f}"])
    return rows


def _run(args: argparse.Namespace) -> None:
    from autocomp.pipelines.local.run import run_local  # checks every value before kfp starts

    where = run_local(
        args.out,
        name=args.name,
        profile=args.profile,
        models=args.models or None,
        specs=args.specs,
        count=args.count,
        seed=args.seed,
        num_shards=args.num_shards,
    )
    out = Path(args.out)
    headers = ["model", "family", "N", "set", "items", "minimal %", "contextual %", "chance %"]
    print()
    print(format_table(headers, _summary_rows(out / "results")))
    if where["warnings"]:
        print(f"{len(where['warnings'])} warnings while running: see {out / 'logs' / 'kfp.log'}")
    print(f"benchmark: {out / 'benchmark'} -> store/benchmarks/{where['name']}")
    print(f"results:   {out / 'results'} (score runs; `autocomp report --run {out}` reads both)")
    print(f"logs:      {out / 'logs'}")
    print(f"report:    {out / 'report' / 'index.html'}")
    print("".join(f"{n}\n" for n in random_weights_note((out / "results").iterdir())), end="")


def add_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register the pipeline verbs, in the order `autocomp --help` lists them."""
    _add_run(verbs)
    _add_compile(verbs)
    _add_prefetch(verbs)
    _add_upload(verbs)
    _add_doctor(verbs)
    _add_resume(verbs)
    _add_submit_and_schedule(verbs)


def _add_run(verbs: argparse._SubParsersAction) -> None:
    """`run`: both pipelines on this machine (kfp.local)."""
    tiny = PROFILES["tiny"]
    p = verbs.add_parser(
        "run",
        help="run both pipelines on this machine (kfp.local; default profile tiny)",
        description="generate_benchmark then evaluate_models through kfp.local, with the tiny "
        "profile unless --profile says otherwise. Shows one line per task; each task's output "
        "is in <out>/logs; ends with the accuracy table and <out>/report/index.html. "
        "`make demo` is `autocomp run --out runs/demo`.",
    )
    p.add_argument("--out", default="runs/local", help="output folder (default runs/local)")
    p.add_argument("--name", default="local", help="benchmark name in the store (default local)")
    p.add_argument(
        "--specs", default=None, help=f"family:N list (tiny profile: {tiny.sample.specs})"
    )
    p.add_argument(
        "--count",
        type=int,
        default=None,
        help=f"concepts per family:N (tiny profile: {tiny.sample.count})",
    )
    p.add_argument("--seed", type=int, default=None, help=f"seed (default {tiny.sample.seed})")
    p.add_argument(
        "--num-shards",
        type=int,
        default=None,
        help=f"render/validate workers (tiny profile: {tiny.num_shards})",
    )
    p.add_argument(
        "--profile",
        default="tiny",
        help="tiny (default): random-weight models, offline CPU; paper: the paper's "
        "models and run size on this machine's GPU (weights from the hub)",
    )
    p.add_argument(
        "--model",
        dest="models",
        action="append",
        default=[],
        help="a model to score (repeatable; default: the profile's)",
    )
    p.set_defaults(run=_run)


def _add_compile(verbs: argparse._SubParsersAction) -> None:
    """`compile`: the pipelines to YAML, for one KFP backend."""
    p = verbs.add_parser("compile", help="compile the Kubeflow pipelines to YAML")
    p.add_argument("--out", default="dist", help="output folder (default dist)")
    p.add_argument(
        "--backend",
        default=None,
        help="the KFP backend version the cluster runs, e.g. 2.5.0 (Kubeflow 1.10) or 2.15.0 "
        "(Kubeflow 1.11; the default): the YAML holds only what that backend accepts",
    )
    p.add_argument(
        "--image-pull-secret",
        dest="pull_secrets",
        action="append",
        default=[],
        help="a Secret (docker-registry) every step pulls its image with (repeatable)",
    )
    p.add_argument(
        "--gpu-size",
        dest="gpu_sizes",
        action="append",
        default=[],
        metavar="STEP=GB",
        help="the GPU size of a step whose model is a parameter (caption, render, validate, "
        "finetune_train, finetune_score), e.g. render=48 to submit renderer=flux-dev; default: "
        "what the paper profile's models need",
    )
    p.add_argument(
        "--toleration",
        dest="tolerations",
        action="append",
        default=[],
        metavar="KEY[=VALUE][:EFFECT]",
        help="a taint of your GPU nodes the GPU steps tolerate besides nvidia.com/gpu "
        "(repeatable), e.g. sku=gpu:NoSchedule (AKS)",
    )
    p.add_argument(
        "--placement",
        default="gfd",
        choices=("gfd", "gke", "karpenter", "eks", "aks", "labels"),
        help="how GPU steps select their nodes: gfd (GPU feature discovery's "
        "nvidia.com/gpu.memory; the default), gke (cloud.google.com/gke-accelerator), "
        "karpenter (karpenter.k8s.aws/instance-gpu-memory), eks (managed node groups' "
        "instance types), aks (kubernetes.azure.com/accelerator and VM sizes), labels "
        "(--gpu-label); docs/cluster.md, GPU placement",
    )
    p.add_argument(
        "--gpu-label",
        dest="gpu_labels",
        action="append",
        default=[],
        metavar="GB:KEY=VALUE",
        help="with --placement labels: nodes labelled KEY=VALUE have GPUs of at least GB GB "
        "(repeatable), e.g. 48:pool=l40s",
    )
    p.set_defaults(run=_compile)


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


def _add_prefetch(verbs: argparse._SubParsersAction) -> None:
    """`prefetch`: every model the pipelines load, into a hub cache."""
    p = verbs.add_parser(
        "prefetch",
        help="download every model the pipelines load into a hub cache (the warm-up Job)",
        description="Every model `models=[all]` scores and the paper profile's generation "
        "models, from the hub into --cache (one copy: safetensors over pickles). "
        "dist/jobs/model-cache-warmup.yaml runs it in the cluster.",
    )
    p.add_argument("--cache", default=None, help="the hub cache folder (default $HF_HUB_CACHE)")
    p.add_argument("--model", dest="models", action="append", default=[], help="only this model")
    p.add_argument("--list", action="store_true", help="print what would be downloaded")
    p.set_defaults(run=_prefetch)


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
