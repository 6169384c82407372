"""The fine-tuning verb group, as `audit` is one: `finetune train` (one checkpoint), `finetune
split`, `finetune score`, `finetune report` (Table 8) and `finetune local` (the finetune_models
pipeline under kfp.local). The spellings before the group (`finetune --model ...`,
`finetune-split`, ...) are kept for one release: `respell` turns them into the new ones and the
CLI prints a one-line pointer (OLD_SPELLINGS)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SUB_VERBS = ("train", "split", "score", "report", "local")
# the old spelling (kept one release) -> the new one
OLD_SPELLINGS: dict[str, tuple[str, str]] = {
    "finetune-split": ("finetune", "split"),
    "finetune-score": ("finetune", "score"),
    "finetune-report": ("finetune", "report"),
    "finetune-local": ("finetune", "local"),
}


def respell(argv: Sequence[str]) -> tuple[list[str], str | None]:
    """`argv` in the group's spelling, and a one-line pointer when it used an old one:
    `finetune-score ...` -> `finetune score ...`; `finetune --model ...` (training before the
    group) -> `finetune train ...`. Anything else comes back as it is, with no pointer."""
    args = list(argv)
    if args and args[0] in OLD_SPELLINGS:
        new = [*OLD_SPELLINGS[args[0]], *args[1:]]
    elif args[:1] == ["finetune"] and len(args) > 1 and args[1].startswith("-"):
        if args[1] in ("-h", "--help"):
            return args, None
        new = ["finetune", "train", *args[1:]]
    else:
        return args, None
    old = args[0] if args[0] != "finetune" else "finetune --model ..."
    note = (
        f"autocomp: note: `autocomp {old}` is now `autocomp {' '.join(new[:2])}`; the old "
        "spelling is kept for this release only"
    )
    return new, note


def _config(args: argparse.Namespace) -> Any:
    from autocomp.config import get_profile, with_overrides

    return with_overrides(get_profile(args.profile).finetune, k=args.k, steps=args.steps)


def _split(args: argparse.Namespace) -> None:
    from autocomp.finetune.split import SPLITS, read_split
    from autocomp.finetune.stage import split

    paths = split(args.benchmark, args.out, _config(args), args.split_seed)
    mapping = read_split(paths["split"])
    counts = ", ".join(f"{s} {sum(v == s for v in mapping.values())}" for s in SPLITS)
    print(f"concepts: {counts}; split and evaluation benchmark in {args.out}")


def _train(args: argparse.Namespace) -> None:
    from autocomp.finetune.stage import train
    from autocomp.progress import row_progress

    config = _config(args)
    with row_progress(f"finetune {args.model} ({args.negatives})", config.steps) as advance:
        result = train(
            args.model,
            args.benchmark,
            args.split,  # None: made in OUT/split first
            args.negatives,
            args.seed,
            args.out,
            config,
            images_root=args.images,
            device=args.device,
            progress=advance,
            split_seed=args.split_seed,
        )
    print(
        f"{result.entry}: {result.steps} steps ({result.steps_per_second:.2f} steps/s), best "
        f"validation Confusion accuracy {100 * result.best_confusion:.1f} % at step "
        f"{result.best_step}{' (stopped early)' if result.stopped_early else ''}"
    )
    print(
        f"checkpoint, curve.csv/svg and registry.yaml in {args.out}; score it with "
        f"`autocomp finetune score --model {args.out}` or "
        f"`AUTOCOMP_MODEL_REGISTRY={Path(args.out) / 'registry.yaml'} autocomp score "
        f"--model {result.entry}`"
    )


def _score(args: argparse.Namespace) -> None:
    from autocomp.finetune.stage import check_inputs, score_checkpoint
    from autocomp.progress import row_progress
    from autocomp.store.catalog.benchmarks import open_benchmark

    check_inputs(args.out, args.model, args.benchmark, args.images)  # before the progress bar
    total = open_benchmark(args.benchmark).rows
    with row_progress(f"score {args.model}", total) as advance:
        score_checkpoint(args.model, args.benchmark, args.out, args.images, args.device, advance)
    print(f"scores, predictions and summary in {args.out}")


def _report(args: argparse.Namespace) -> None:
    from autocomp.analysis.finetune import write_report

    paths = write_report(args.runs, args.out, args.checkpoints or [], args.seed)
    if args.benchmark:
        from autocomp.analysis.finetune import full_report

        print(f"whole report: {full_report(args.runs, args.benchmark, args.out, args.seed)}")
    print(_table8(paths["table8"]))
    _why_empty(args.runs)
    print(f"Table 8 and deltas (Parquet, CSV) and report.html in {args.out}")


def _why_empty(folders: list[str]) -> None:
    """Under an empty Table 8, the reason (which variant the runs lack)."""
    from autocomp.analysis.finetune_tables import load_runs, table8_empty_reason

    reason = table8_empty_reason(load_runs(folders))
    if reason:
        print(f"note: {reason}")


def _table8(path: Path) -> str:
    """Table 8 as the terminal shows it: one row per model x family x N x condition."""
    import pyarrow.parquet as pq

    from autocomp.cli.table import format_table

    table = pq.read_table(path)
    rows = [
        [
            r["model"],
            r["family"],
            str(r["n"]),
            r["condition"],
            str(r["seeds"]),
            f"{100 * r['delta_c']:+.1f}",
            f"[{100 * r['ci_low']:+.1f}, {100 * r['ci_high']:+.1f}]",
        ]
        for r in table.to_pylist()
    ]
    return format_table(["model", "family", "N", "condition", "seeds", "dC %", "95 % CI"], rows)


def _local(args: argparse.Namespace) -> None:
    from autocomp.pipelines.local.run import run_finetune_local  # checks before kfp starts

    done = run_finetune_local(args.out, profile=args.profile, models=args.model or None)
    print()
    print(_table8(Path(done["report"]).parent / "table8.parquet"))
    if done["warnings"]:
        print(f"{len(done['warnings'])} warnings while running: see {done['logs']}/kfp.log")
    print(f"logs:        {done['logs']}")
    print(f"full report: {done['full_report']}")
    print(f"report:      {done['report']}")


def add_parsers(verbs: Any) -> None:
    """Register `finetune` and its sub-verbs on the CLI's sub-parsers."""
    group = verbs.add_parser(
        "finetune",
        help="fine-tune contrastive models on hard negatives (paper A.9, Table 8)",
        description="train one checkpoint, split a benchmark, score checkpoints, write Table 8, "
        "or run the finetune_models pipeline under kfp.local (docs/usage/finetune.md)",
    )
    sub = group.add_subparsers(dest="finetune_verb", metavar="FINETUNE_VERB", required=True)
    _train_parser(sub)
    _split_parser(sub)
    _score_parser(sub)
    _report_parser(sub)
    _local_parser(sub)


def _common(p: argparse.ArgumentParser) -> None:
    from autocomp.config import PROFILES

    p.add_argument(
        "--profile",
        default="paper",
        choices=list(PROFILES),
        help="settings: paper (A.9) or tiny (a few CPU steps); default paper",
    )
    p.add_argument("--k", type=int, default=None, help="hard negatives per positive")
    p.add_argument("--steps", type=int, default=None, help="override the profile's steps")
    p.add_argument("--split-seed", type=int, default=0, help="seed of the concept split")


def _train_parser(sub: Any) -> None:
    from autocomp.config import NEGATIVE_KINDS

    p = sub.add_parser("train", help="fine-tune a contrastive model with hard negatives")
    p.add_argument("--model", required=True, help="registered open_clip model")
    p.add_argument(
        "--benchmark",
        required=True,
        help="benchmark with images: a table or a folder of Parquet parts",
    )
    p.add_argument("--negatives", required=True, choices=list(NEGATIVE_KINDS))
    p.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    p.add_argument("--out", required=True, help="checkpoint folder (resumable)")
    p.add_argument("--split", default=None, help="split table (default: made in OUT/split)")
    p.add_argument("--images", default=None, help="folder the benchmark's image paths are under")
    p.add_argument("--device", default=None, help="torch device (default: cuda if present)")
    _common(p)
    p.set_defaults(run=_train)


def _split_parser(sub: Any) -> None:
    p = sub.add_parser("split", help="concept-disjoint train/validation/held-out split")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--out", required=True, help="folder for split.parquet, evaluation.parquet")
    _common(p)
    p.set_defaults(run=_split)


def _score_parser(sub: Any) -> None:
    p = sub.add_parser("score", help="score a checkpoint folder or registered model")
    p.add_argument("--model", required=True, help="checkpoint folder or registered model name")
    p.add_argument("--benchmark", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--images", default=None)
    p.add_argument("--device", default=None)
    p.set_defaults(run=_score)


def _report_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="Table 8 from fine-tuning score runs")
    p.add_argument("--runs", nargs="+", required=True, help="`finetune score` output folders")
    p.add_argument("--checkpoints", nargs="*", help="checkpoint folders (training curves)")
    p.add_argument(
        "--benchmark", default=None, help="the runs' evaluation benchmark: adds the whole report"
    )
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.set_defaults(run=_report)


def _local_parser(sub: Any) -> None:
    from autocomp.config import PROFILES

    p = sub.add_parser(
        "local",
        help="the finetune_models pipeline under kfp.local (tiny: about 4 min on 2 cores)",
        description="finetune_models through kfp.local, with the tiny profile unless --profile "
        "says otherwise; without the benchmark in <out>/store, generate_benchmark makes a tiny one "
        "first (Color and Shape-Color N=2, 10 concepts each). Shows one line per task (as "
        "`autocomp run`); each task's output is in <out>/logs; ends with Table 8 and "
        "<out>/report/report.html (the whole report: <out>/report/full/index.html). The tiny "
        "profile takes about 4 minutes on 2 CPU cores.",
    )
    p.add_argument("--out", default="runs/finetune", help="output folder (default runs/finetune)")
    p.add_argument(
        "--profile", default="tiny", choices=list(PROFILES), help="run profile (default tiny)"
    )
    p.add_argument("--model", action="append", help="model to fine-tune (repeatable)")
    p.set_defaults(run=_local)
