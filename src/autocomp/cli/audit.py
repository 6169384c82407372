"""`autocomp audit ...`: the human study and the second-judge audit (paper A.10, A.11)."""

from __future__ import annotations

import argparse
import sys


def _export(args: argparse.Namespace) -> None:
    from autocomp.audit.config import AuditConfig
    from autocomp.audit.export import export_study

    config = AuditConfig(
        concepts=args.concepts,
        annotators=args.annotators,
        confusion_options=args.confusion_options,
        rejected=args.rejected,
        include_rejected=args.include_rejected,
        seed=args.seed,
    )
    study = export_study(args.benchmark, args.out, config, args.images)
    items = ", ".join(f"{n:,} {task}" for task, n in sorted(study["items"].items()))
    drawn = (
        f"{study['images']:,} images of {config.concepts:,} concepts, accepted or not "
        f"(--include-rejected: {study['images_rejected']:,} of them rejected by the validator)"
        if config.include_rejected
        else f"{study['images']:,} accepted images of {config.concepts:,} concepts"
    )
    print(
        f"study in {args.out}: {drawn}, and {study['rejected_images']:,} more rejected images in "
        f"the validity questions; items per annotator: {items}; annotators "
        f"{', '.join(study['annotators'])}. Serve it: autocomp audit serve {args.out}"
    )


def _serve(args: argparse.Namespace) -> None:
    from autocomp.audit.app import is_loopback, links, progress_link, serve

    for name, link in links(args.study, args.host, args.port).items():
        print(f"{name}: {link}", flush=True)
    print(f"progress (organiser): {progress_link(args.study, args.host, args.port)}")
    print(
        "Send each annotator their own link. Stop with Ctrl+C: every answer is saved when it is "
        "clicked, and the same links resume after a restart.",
        flush=True,
    )
    if not is_loopback(args.host):
        print(
            f"warning: serving on {args.host} over plain HTTP: anyone on that network who sees a "
            "link can answer as that annotator; prefer 127.0.0.1 behind an SSH tunnel",
            flush=True,
        )
    serve(args.study, args.host, args.port)


def _collect(args: argparse.Namespace) -> None:
    from autocomp.audit.collect import collect_stage, progress_line

    summary = collect_stage(args.study, args.out, args.partial)
    for name, counts in summary.items():
        print(progress_line(name, counts))
    waiting = [name for name, counts in summary.items() if not counts["complete"]]
    if waiting:
        print(
            f"warning: collected an incomplete study ({', '.join(waiting)} still have open "
            "items); the report marks it incomplete",
            file=sys.stderr,
        )
    print(f"annotations in {args.out} (autocomp report reads them as RUN/human/)")


def _labelstudio_export(args: argparse.Namespace) -> None:
    from autocomp.audit.labelstudio import CONFIG_FILE, TASKS_FILE, export_labelstudio

    counts = export_labelstudio(args.study, args.out, args.force)
    for name, tasks in counts.items():
        print(f"{name}: {tasks:,} tasks in {args.out}/{name}/{TASKS_FILE}")
    print(
        f"Create one Label Studio project per annotator with {args.out}/{CONFIG_FILE} as its "
        "labeling interface, import its tasks.json, and when done export it as JSON: autocomp "
        f"audit labelstudio-import {args.study} --source EXPORTS"
    )


def _labelstudio_import(args: argparse.Namespace) -> None:
    from autocomp.audit.labelstudio import import_labelstudio

    counts = import_labelstudio(args.study, args.source)
    for name, answered in counts.items():
        print(f"{name}: {answered:,} answers read")
    print(f"answers in {args.study}/answers/; collect them: autocomp audit collect {args.study}")


def _judge(args: argparse.Namespace) -> None:
    from autocomp.audit.judge import judge_stage

    done = judge_stage(args.verdicts, args.out, args.name, args.check)
    print(
        f"judge {done['name']} in {args.out}: {done['samples']:,} samples "
        f"({done['reference_rejected']:,} rejected by the reference judge), agreement "
        f"{done['agreement']:.3f}"
    )
    if done["undecided"]:
        print(
            f"note: {done['undecided']:,} shared samples left out: the check was not decided in "
            "both runs (validate --all-checks decides every check on every image)"
        )
    if done["reference_rejected"] == 0 or done["reference_rejected"] == done["samples"]:
        print("warning: the reference judge decided every sample alike; kappa is undefined")


def add_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register `audit` and its sub-verbs."""
    audit = verbs.add_parser("audit", help="human study and second-judge audit (paper A.10, A.11)")
    sub = audit.add_subparsers(dest="audit_verb", metavar="AUDIT_VERB", required=True)

    p = sub.add_parser("export", help="write a blinded, balanced human study from a benchmark")
    p.add_argument(
        "--benchmark",
        required=True,
        help="benchmark table or folder of Parquet parts (published or plain)",
    )
    p.add_argument("--images", help="root of the table's image paths (default: its folder)")
    p.add_argument("--out", required=True, help="the study folder to create")
    p.add_argument("--concepts", type=int, default=200, help="concepts (x2 images; default 200)")
    p.add_argument("--annotators", type=int, default=4, help="annotators (default 4)")
    p.add_argument("--confusion-options", type=int, default=50, help="options (default 50)")
    p.add_argument("--rejected", type=int, default=50, help="rejected images in validity items")
    p.add_argument(
        "--include-rejected",
        action="store_true",
        help="draw choice items from rejected samples too (demo benchmarks)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=_export)

    p = sub.add_parser("serve", help="serve a study to its annotators in the browser")
    p.add_argument("study", help="the study folder")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765)
    p.set_defaults(run=_serve)

    p = sub.add_parser("collect", help="write the study's answers as RUN/human/ CSVs")
    p.add_argument("study", help="the study folder")
    p.add_argument("--out", required=True, help="RUN/human/")
    p.add_argument(
        "--partial",
        action="store_true",
        help="collect although annotators have open items (refused without it); the report "
        "then marks the study incomplete",
    )
    p.set_defaults(run=_collect)

    p = sub.add_parser(
        "labelstudio-export", help="write the study as Label Studio projects (tasks + config)"
    )
    p.add_argument("study", help="the study folder")
    p.add_argument("--out", required=True, help="folder of the projects to create")
    p.add_argument("--force", action="store_true", help="replace an existing --out folder")
    p.set_defaults(run=_labelstudio_export)

    p = sub.add_parser(
        "labelstudio-import", help="read Label Studio's JSON export into the study's answers"
    )
    p.add_argument("study", help="the study folder")
    p.add_argument("--source", required=True, help="Label Studio JSON export(s): file or folder")
    p.set_defaults(run=_labelstudio_import)

    p = sub.add_parser("judge", help="compare two judges' verdicts (RUN/judges/<name>.csv)")
    p.add_argument(
        "--verdicts",
        action="append",
        required=True,
        help="twice: the pipeline's verdicts, then the second judge's",
    )
    p.add_argument("--out", required=True, help="RUN/judges/")
    p.add_argument("--name", help="the judge's name (default: its VQA model)")
    p.add_argument("--check", default="all", help="all (default) or one check, e.g. attributes")
    p.set_defaults(run=_judge)
