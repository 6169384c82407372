"""The `autocomp` command line: one entry point, one verb per stage, `--help` on every verb.

Bad input exits with code 2 and one line that names the input, the value and the fix.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from autocomp import __version__
from autocomp.cli import finetune as finetune_cli
from autocomp.cli.table import format_table
from autocomp.errors import UsageError


def _families(args: argparse.Namespace) -> None:
    from autocomp.protocol.concepts import count_concepts
    from autocomp.protocol.family import load_all

    rows = []
    for family in load_all():
        distinct = ", ".join(
            f"N={n}: {count_concepts(family, n):,}" for n in range(family.n_min, family.n_max + 1)
        )
        label_role = "relations" if family.is_relation else f"{family.attribute_label}s"
        rows.append(
            [
                family.name,
                family.kind,
                f"{family.n_min}-{family.n_max}",
                str(len(family.objects)),
                f"{len(family.labels)} {label_role}",
                distinct,
            ]
        )
    headers = ["family", "kind", "N", "objects", "labels", "distinct concepts"]
    print(format_table(headers, rows))


def _sample(args: argparse.Namespace) -> None:
    from autocomp.protocol.stages import sample_stage

    table = sample_stage(args.family, args.n, args.count, args.seed, args.out)
    what = f"{table.num_rows:,} concepts of {args.family} N={args.n} (seed {args.seed})"
    print(f"wrote {what} to {args.out}")


def _negatives(args: argparse.Namespace) -> None:
    from autocomp.progress import row_progress
    from autocomp.protocol.stages import negatives_stage
    from autocomp.store.tables import open_parquet

    total = open_parquet(args.input).metadata.num_rows
    with row_progress("negatives", total) as advance:
        summary = negatives_stage(
            args.input, args.out, args.protocol, args.workers, args.batch_size, advance
        )
    print(
        f"wrote {summary['rows']:,} rows to {args.out} ({args.protocol} protocol): "
        f"{summary['swap']:,} swap, {summary['confusion']:,} confusion, "
        f"{summary['vary']:,} N=1 sanity negatives"
    )


def _models(args: argparse.Namespace) -> None:
    from autocomp.scoring.registry import all_models

    rows = [
        [
            m.name,
            m.backend,
            m.score,
            m.weights if m.backend != "open_clip" else f"{m.architecture} / {m.weights}",
            str(m.gpus),
            f"{m.gpu_memory_gb:g}",
            "yes" if m.trust_remote_code else "no",
        ]
        for m in all_models().values()
    ]
    headers = ["model", "backend", "score", "weights", "GPUs", "GPU GB", "remote code"]
    print(format_table(headers, rows))


def _score(args: argparse.Namespace) -> None:
    from autocomp.progress import row_progress
    from autocomp.scoring import load_scorer
    from autocomp.scoring.registry import get_model
    from autocomp.scoring.stage import score_stage
    from autocomp.store.tables import open_parquet

    entry = get_model(args.model)
    total = open_parquet(args.benchmark).metadata.num_rows
    with row_progress(f"score {entry.name}", total) as advance:
        summary = score_stage(
            entry,
            args.benchmark,
            args.out,
            lambda: load_scorer(entry.name, device=args.device),
            images_root=args.images,
            blind=args.blind,
            progress=advance,
        )
    rows = [
        [
            r["family"],
            str(r["n"]),
            r["condition"],
            r["set"],
            r["protocol"],
            str(r["items"]),
            f"{100 * r['accuracy']:.1f}",
            f"{100 * r['chance']:.2f}",
            str(r["failed"]),
            str(r["ties"]),
        ]
        for r in summary.to_pylist()
    ]
    headers = [
        "family",
        "N",
        "condition",
        "set",
        "protocol",
        "items",
        "acc %",
        "chance %",
        "failed",
        "ties",
    ]
    print(format_table(headers, rows))
    print(f"scores, predictions and summary in {args.out}")


def parse_settings(items: Sequence[str], allowed: dict[str, dict]) -> dict[str, dict]:
    """`--set role.key=value` (or `key=value` when there is one role) -> {role: {key: value}}.
    Keys must be settings of the chosen model; values are read as YAML scalars."""
    import yaml

    out: dict[str, dict] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise UsageError("--set", item, "must look like key=value (e.g. guidance_scale=5)")
        role, _, name = key.rpartition(".")
        if not role and len(allowed) == 1:
            role = next(iter(allowed))
        if role not in allowed or name not in allowed[role]:
            known = ", ".join(f"{r}.{k}" for r, keys in allowed.items() for k in keys)
            raise UsageError("--set", item, f"unknown setting; known: {known}")
        out.setdefault(role, {})[name] = yaml.safe_load(raw)
    return out


def _chosen(args: argparse.Namespace, role: str) -> str:
    from autocomp.generation.registry import profile

    return getattr(args, role) or profile(args.profile)[role]


def _caption(args: argparse.Namespace) -> None:
    from autocomp.generation.caption import caption_stage
    from autocomp.generation.registry import get_generation_model
    from autocomp.progress import row_progress
    from autocomp.store.shards import check_shard_args
    from autocomp.store.tables import open_parquet

    name = _chosen(args, "captioner")
    entry = get_generation_model("captioner", name)
    overrides = parse_settings(args.set, {"captioner": entry.settings}).get("captioner", {})
    check_shard_args(args.shard, args.num_shards)
    total = open_parquet(args.concepts, "--concepts").metadata.num_rows
    with row_progress(f"caption {name}", total) as advance:
        summary = caption_stage(
            args.concepts,
            args.out,
            name,
            args.engine,
            args.seed,
            args.shard,
            args.num_shards,
            args.batch_size,
            args.fallback,
            args.device,
            overrides,
            advance,
        )
    print(
        f"captions in {args.out}: {summary['accepted']:,} accepted, {summary['dropped']:,} "
        f"dropped, {summary['fallback']:,} fallback ({summary['attempts']:,} LLM attempts; "
        f"{summary['skipped_shards']} finished shard(s) skipped)"
    )


def _render(args: argparse.Namespace) -> None:
    from autocomp.generation.registry import get_generation_model
    from autocomp.generation.render import render_stage
    from autocomp.progress import row_progress

    name = _chosen(args, "renderer")
    entry = get_generation_model("renderer", name)
    overrides = parse_settings(args.set, {"renderer": entry.settings}).get("renderer", {})
    with row_progress(f"render {name}", None) as advance:
        summary = render_stage(
            args.captions,
            args.out,
            name,
            args.seed,
            args.shard,
            args.num_shards,
            args.batch_size,
            args.device,
            overrides,
            advance,
        )
    print(
        f"images in {args.out}: {summary['images']:,} rendered, {summary['reused']:,} reused; "
        f"{summary['skipped_shards']} finished shard(s) skipped"
    )


def _validate(args: argparse.Namespace) -> None:
    from autocomp.generation.registry import get_generation_model
    from autocomp.generation.validate import validate_stage
    from autocomp.progress import row_progress

    names = {role: _chosen(args, role) for role in ("detector", "segmenter", "vqa")}
    allowed = {
        role: get_generation_model(role, names[role]).settings for role in ("detector", "segmenter")
    }
    overrides = parse_settings(args.set, allowed)
    with row_progress("validate", None) as advance:
        summary = validate_stage(
            args.render,
            args.out,
            names["detector"],
            names["segmenter"],
            names["vqa"],
            args.shard,
            args.num_shards,
            args.batch_size,
            args.masks,
            args.all_checks,
            args.device,
            overrides,
            advance,
        )
    print(
        f"verdicts in {args.out}: {summary['passed']:,} of {summary['samples']:,} samples passed "
        f"every check; {summary['skipped_shards']} finished shard(s) skipped"
    )


def _curate(args: argparse.Namespace) -> None:
    import pyarrow.parquet as pq

    from autocomp.generation.curate import curate_stage

    counts = curate_stage(args.render, args.verdicts, args.out, args.captions, args.keep_rejected)
    rows = [
        [
            r["family"],
            str(r["n"]),
            r["condition"],
            r["check"],
            str(r["entered"]),
            str(r["passed"]),
            f"{100 * r['survival']:.1f}",
            f"{100 * r['cumulative']:.1f}",
        ]
        for r in pq.read_table(f"{args.out}/survival.parquet").to_pylist()
    ]
    headers = ["family", "N", "condition", "check", "entered", "passed", "survival %", "cum. %"]
    print(format_table(headers, rows))
    print(
        f"B_min {counts['b_min']:,}, B_ctx {counts['b_ctx']:,}, B_paired {counts['b_paired']:,} "
        f"of {counts['samples']:,} samples; {counts['kept']:,} rows in {args.out}/curated.parquet"
    )


def _params(items: Sequence[str]) -> dict:
    import yaml

    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError("--param", item, "must look like name=value (e.g. renderer=flux-dev)")
        out[key] = yaml.safe_load(raw)
    return out


def _compile(args: argparse.Namespace) -> None:
    from autocomp.pipelines.compile import compile_all

    for name, path in compile_all(args.out).items():
        print(f"compiled {name} -> {path}")


def _package(args: argparse.Namespace, name: str):  # noqa: ANN202
    from pathlib import Path

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

    client = connect(_host(args))
    run_id = schedule(
        client,
        args.pipeline,
        args.name,
        args.cron,
        _params(args.param),
        args.experiment,
        args.max_concurrency,
    )
    print(f"recurring run {run_id}: {args.pipeline} on '{args.cron}'")


def _submit(args: argparse.Namespace) -> None:
    from autocomp.pipelines.client import connect, submit

    run_id = submit(
        connect(_host(args)), args.pipeline, args.name, _params(args.param), args.experiment
    )
    print(f"run {run_id}: {args.pipeline}")


def _run(args: argparse.Namespace) -> None:
    from pathlib import Path

    import pyarrow.parquet as pq

    from autocomp.pipelines.local import run_local

    where = run_local(
        args.out,
        profile=args.profile,
        models=args.models or None,
        name=args.name,
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


def _report(args: argparse.Namespace) -> None:
    from autocomp.analysis.report import report_from_store, report_stage

    if bool(args.run_dir) == bool(args.store):
        raise UsageError("--run", args.run_dir, "give a run folder (--run) or --store with --name")
    if args.store:
        if not args.name:
            raise UsageError("--name", None, "give the benchmark name in the store")
        done = report_from_store(args.store, args.name, args.out, args.seed)
    else:
        done = report_stage(args.run_dir, args.out, args.seed, compare=args.compare)
    print(
        f"report: {done['html']} ({len(done['tables'])} tables as CSV, Parquet and LaTeX in "
        f"{done['html'].parent / 'tables'})"
    )


def _demo(args: argparse.Namespace) -> None:
    from autocomp.cli.demo import run_demo

    run_demo(args.out, args.count, args.seed)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autocomp",
        description="Exact, reproducible compositional benchmarks for vision-language models.",
    )
    parser.add_argument("--version", action="version", version=f"autocomp {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("families", help="list the task families and their vocabulary sizes")
    p.set_defaults(run=_families)

    p = verbs.add_parser("sample", help="sample concepts and write their Minimal captions")
    p.add_argument("--family", required=True, help="task family (see `autocomp families`)")
    p.add_argument("--n", type=int, required=True, help="number of objects per concept")
    p.add_argument("--count", type=int, required=True, help="number of distinct concepts")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--out", required=True, help="output Parquet file (concepts table)")
    p.set_defaults(run=_sample)

    def shard_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--shard", type=int, default=None, help="run only this shard (0-based)")
        p.add_argument("--num-shards", type=int, default=1, help="shards of the run (default 1)")
        p.add_argument("--device", default=None, help="torch device (default: cuda if present)")
        p.add_argument("--profile", default="paper", help="model profile: paper (default), tiny")
        p.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a model setting (repeatable)",
        )

    p = verbs.add_parser("caption", help="write Contextual captions with an LLM (checked, retried)")
    p.add_argument("--concepts", required=True, help="concepts table (autocomp sample)")
    p.add_argument("--out", required=True, help="output folder (resumable, sharded)")
    p.add_argument("--captioner", default=None, help="caption LLM (default: the profile's)")
    p.add_argument("--engine", default="transformers", choices=("transformers", "vllm"))
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--batch-size", type=int, default=16, help="prompts per batch (default 16)")
    p.add_argument(
        "--fallback",
        default=None,
        choices=("minimal",),
        help="keep concepts whose captions all failed, with the Minimal caption "
        "(marked; for pipeline tests, never for a benchmark)",
    )
    shard_args(p)
    p.set_defaults(run=_caption)

    p = verbs.add_parser("render", help="render both captions of every concept (diffusers)")
    p.add_argument("--captions", required=True, help="the caption stage's folder")
    p.add_argument("--out", required=True, help="output folder (images + render shards)")
    p.add_argument("--renderer", default=None, help="text-to-image model (default: the profile's)")
    p.add_argument("--seed", type=int, default=0, help="image seed (default 0)")
    p.add_argument("--batch-size", type=int, default=4, help="images per batch (default 4)")
    shard_args(p)
    p.set_defaults(run=_render)

    p = verbs.add_parser("validate", help="check objects, background and attributes of images")
    p.add_argument("--render", required=True, help="the render stage's folder")
    p.add_argument("--out", required=True, help="output folder (verdict shards)")
    p.add_argument("--detector", default=None, help="object detector (default: the profile's)")
    p.add_argument("--segmenter", default=None, help="segmenter (default: the profile's)")
    p.add_argument("--vqa", default=None, help="VQA judge, a registered VLM (default: profile's)")
    p.add_argument(
        "--masks",
        default="sam2",
        choices=("sam2", "boxes"),
        help="background check masks: SAM2 from the boxes (default) or the boxes",
    )
    p.add_argument(
        "--all-checks",
        action="store_true",
        help="run every check on every image (audits) instead of survivors only",
    )
    p.add_argument("--batch-size", type=int, default=8, help="images per batch (default 8)")
    shard_args(p)
    p.set_defaults(run=_validate)

    p = verbs.add_parser("curate", help="build B_min, B_ctx, B_paired and the survival table")
    p.add_argument("--render", required=True, help="the render stage's folder")
    p.add_argument("--verdicts", required=True, help="the validate stage's folder")
    p.add_argument("--captions", default=None, help="the caption stage's folder (caption row)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument(
        "--keep-rejected",
        action="store_true",
        help="keep rejected samples, marked accepted=false (audits, tiny runs)",
    )
    p.set_defaults(run=_curate)

    p = verbs.add_parser("negatives", help="build Swap and Confusion candidate sets")
    p.add_argument("--input", required=True, help="concepts table or curated table (Parquet)")
    p.add_argument("--out", required=True, help="output Parquet file (benchmark table)")
    p.add_argument(
        "--protocol",
        default="paper",
        choices=("paper", "strict"),
        help="paper: keep candidates that describe the positive's scene (flagged); "
        "strict: drop them (default paper)",
    )
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: up to 2)")
    p.add_argument("--batch-size", type=int, default=256, help="rows per batch (default 256)")
    p.set_defaults(run=_negatives)

    p = verbs.add_parser("models", help="list the registered models with backend and resources")
    p.set_defaults(run=_models)

    p = verbs.add_parser("score", help="score one model on one benchmark table")
    p.add_argument("--model", required=True, help="registered model name (see `autocomp models`)")
    p.add_argument("--benchmark", required=True, help="benchmark table (autocomp negatives)")
    p.add_argument("--out", required=True, help="output folder (resumable)")
    p.add_argument("--images", default=None, help="folder the benchmark's image paths are under")
    p.add_argument("--device", default=None, help="torch device (default: cuda if present)")
    p.add_argument("--blind", action="store_true", help="score captions without the image")
    p.set_defaults(run=_score)
    finetune_cli.add_parser(verbs)

    pipelines = ("generate_benchmark", "evaluate_models")

    p = verbs.add_parser("run", help="run both pipelines on this machine (kfp.local, tiny models)")
    p.add_argument("--out", default="runs/local", help="output folder (default runs/local)")
    p.add_argument("--name", default="local", help="benchmark name in the store (default local)")
    p.add_argument("--specs", default="color:2,position:2", help="family:N list")
    p.add_argument("--count", type=int, default=2, help="concepts per family:N (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-shards", type=int, default=2)
    p.add_argument(
        "--profile",
        default="tiny",
        choices=("tiny", "paper"),
        help="tiny: random-weight models, offline CPU (default); paper: the paper's "
        "models on this machine's GPU (weights from the hub)",
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
        "--pipeline", choices=pipelines, default=None, help="one pipeline (default both)"
    )
    p.set_defaults(run=_upload)

    for verb, helptext in (
        ("schedule", "create a recurring run of an uploaded pipeline"),
        ("submit", "start one run of an uploaded pipeline"),
    ):
        p = verbs.add_parser(verb, help=helptext)
        client_args(p)
        p.add_argument("--pipeline", choices=pipelines, required=True)
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

    p = verbs.add_parser("report", help="HTML report, CSV, Parquet and LaTeX tables of a run")
    p.add_argument(
        "--run", dest="run_dir", default=None, help="run folder: benchmark/ and results/<model>/"
    )
    p.add_argument("--store", default=None, help="or: a store holding benchmarks/<name>")
    p.add_argument("--name", default=None, help="benchmark name in the store")
    p.add_argument("--out", default="report", help="output folder (default report)")
    p.add_argument("--seed", type=int, default=0, help="seed of the paired bootstraps")
    p.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="RUN",
        help="another generator's run on the same concepts (repeatable; Table 9)",
    )
    p.set_defaults(run=_report)

    p = verbs.add_parser("demo", help="sample every family, build candidate sets, print a summary")
    p.add_argument("--out", default="runs/demo", help="output folder (default runs/demo)")
    p.add_argument("--count", type=int, default=200, help="concepts per family and N (default 200)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.set_defaults(run=_demo)
    return parser


def _quiet_libraries() -> None:
    """Model libraries log per-file loading bars and advice; autocomp shows its own progress."""
    import os

    for name in ("TRANSFORMERS_VERBOSITY", "DIFFUSERS_VERBOSITY"):
        os.environ.setdefault(name, "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def main(argv: Sequence[str] | None = None) -> int:
    _quiet_libraries()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except UsageError as exc:
        print(f"autocomp {args.verb}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
