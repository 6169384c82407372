"""Verbs of the Kubeflow pipelines: run (both pipelines on this machine through kfp.local),
compile, upload, schedule, submit. They need the `pipelines` extra (kfp); the definitions ship
inside the package, so they work from any folder and inside the images."""

from __future__ import annotations

import argparse
from pathlib import Path

from autocomp.cli.settings import parse_params
from autocomp.cli.table import format_table
from autocomp.config import PROFILES
from autocomp.errors import UsageError

PIPELINES = ("generate_benchmark", "evaluate_models")


def _compile(args: argparse.Namespace) -> None:
    from autocomp.pipelines.compile import compile_all
    from autocomp.store.shards import prepare_folder

    prepare_folder(args.out)

    for name, path in compile_all(args.out).items():
        print(f"compiled {name} -> {path}")


def _package(args: argparse.Namespace, name: str) -> Path:
    path = Path(args.dist) / f"{name}.yaml"
    if not path.is_file():
        raise UsageError("--dist", str(path), "no compiled pipeline there; run `autocomp compile`")
    return path


def _host(args: argparse.Namespace) -> str:
    import os

    host = args.host or os.environ.get("KFP_HOST")
    if not host:
        raise UsageError("--host", None, "give the KFP API endpoint (or set KFP_HOST)")
    return host


def _upload(args: argparse.Namespace) -> None:
    from autocomp.pipelines.client import DISPLAY_NAMES, connect, upload

    names = [args.pipeline] if args.pipeline else list(DISPLAY_NAMES)
    client = connect(_host(args))
    for name in names:
        done = upload(client, name, _package(args, name))
        print(
            f"{name}: {done['action']} (pipeline {done['pipeline_id']}, version {done['version']})"
        )


def _schedule(args: argparse.Namespace) -> None:
    from autocomp.pipelines.client import connect, schedule

    params = parse_params(args.param)
    if len(args.cron.split()) != 6:
        raise UsageError(
            "--cron", args.cron, "KFP cron has 6 fields: second minute hour day month weekday "
            "(e.g. '0 0 3 * * 1' = Mondays 03:00)",
        )  # fmt: skip
    if args.max_concurrency < 1:
        raise UsageError("--max-concurrency", args.max_concurrency, "must be at least 1")
    client = connect(_host(args))
    run_id = schedule(
        client,
        args.pipeline,
        args.name,
        args.cron,
        params,
        args.experiment,
        args.max_concurrency,
    )
    print(f"recurring run {run_id}: {args.pipeline} on '{args.cron}'")


def _submit(args: argparse.Namespace) -> None:
    from autocomp.pipelines.client import connect, submit

    params = parse_params(args.param)
    run_id = submit(connect(_host(args)), args.pipeline, args.name, params, args.experiment)
    print(f"run {run_id}: {args.pipeline}")


def _check_run_arguments(args: argparse.Namespace) -> None:
    """Specs, counts, models and the output folder are checked before any pipeline task."""
    from autocomp.config import get_profile
    from autocomp.protocol.stages import check_specs
    from autocomp.scoring.registry import get_model

    profile = get_profile(args.profile)
    specs = args.specs if args.specs is not None else profile.sample.specs
    count = args.count if args.count is not None else profile.sample.count
    check_specs(specs, count)
    if args.num_shards is not None and args.num_shards < 1:
        raise UsageError("--num-shards", args.num_shards, "must be at least 1")
    if args.seed is not None and args.seed < 0:
        raise UsageError("--seed", args.seed, "must be 0 or more")
    for name in args.models:
        get_model(name)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError("--out", str(out), "is a file; give a folder for the run")


def _run(args: argparse.Namespace) -> None:
    import pyarrow.parquet as pq

    from autocomp.pipelines.local import run_local

    _check_run_arguments(args)
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
    results = f"{where['store']}/results/{args.name}"
    rows = []
    for run in sorted(Path(results).iterdir()):
        for r in pq.read_table(run / "summary.parquet").to_pylist():
            if r["protocol"] == "paper":
                rows.append(
                    [
                        r["model"],
                        r["family"],
                        str(r["n"]),
                        r["condition"],
                        r["set"],
                        str(r["items"]),
                        f"{100 * r['accuracy']:.1f}",
                        f"{100 * r['chance']:.2f}",
                    ]
                )
    headers = ["model", "family", "N", "condition", "set", "items", "acc %", "chance %"]
    print(format_table(headers, rows))
    print(f"benchmark: {where['benchmark']}")
    print(f"results:   {results}")
    print(f"report:    {where['report']}")


def add_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register the pipeline verbs."""
    tiny = PROFILES["tiny"]
    p = verbs.add_parser("run", help="run both pipelines on this machine (kfp.local, tiny models)")
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
        help="tiny: random-weight models, offline CPU (default); paper: the paper's "
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

    p = verbs.add_parser("compile", help="compile the Kubeflow pipelines to YAML")
    p.add_argument("--out", default="dist", help="output folder (default dist)")
    p.set_defaults(run=_compile)

    def client_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--host", default=None, help="KFP API endpoint (default: $KFP_HOST)")

    p = verbs.add_parser("upload", help="create or version the compiled pipelines on KFP")
    client_args(p)
    p.add_argument("--dist", default="dist", help="compiled pipelines folder (default dist)")
    p.add_argument(
        "--pipeline", choices=PIPELINES, default=None, help="one pipeline (default both)"
    )
    p.set_defaults(run=_upload)

    for verb, helptext in (
        ("schedule", "create a recurring run of an uploaded pipeline"),
        ("submit", "start one run of an uploaded pipeline"),
    ):
        p = verbs.add_parser(verb, help=helptext)
        client_args(p)
        p.add_argument("--pipeline", choices=PIPELINES, required=True)
        p.add_argument("--name", required=True, help="run name")
        p.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="pipeline parameter (repeatable), e.g. renderer=flux-dev",
        )
        p.add_argument("--experiment", default="autocomp", help="KFP experiment (default autocomp)")
        if verb == "schedule":
            p.add_argument("--cron", required=True, help="6-field cron, e.g. '0 0 3 * * 1'")
            p.add_argument("--max-concurrency", type=int, default=1)
            p.set_defaults(run=_schedule)
        else:
            p.set_defaults(run=_submit)
