"""Verbs that make a benchmark: caption, render, validate, curate. Defaults come from the chosen
profile (autocomp.config: `paper` unless --profile says otherwise); flags given override them."""

from __future__ import annotations

import argparse

from autocomp.cli.settings import parse_settings
from autocomp.cli.table import format_table
from autocomp.config import PROFILES, CurateConfig, get_profile, with_overrides

PAPER = PROFILES["paper"]


def _caption(args: argparse.Namespace) -> None:
    from autocomp.generation.caption import caption_stage
    from autocomp.generation.registry import get_generation_model
    from autocomp.progress import row_progress
    from autocomp.store.shards import check_shard_args
    from autocomp.store.tables import open_parquet

    base = get_profile(args.profile).caption
    name = args.captioner or base.captioner
    entry = get_generation_model("captioner", name)
    settings = parse_settings(args.set, {"captioner": entry.settings}).get("captioner", {})
    config = with_overrides(
        base,
        captioner=name,
        engine=args.engine,
        seed=args.seed,
        num_shards=args.num_shards,
        batch_size=args.batch_size,
        fallback=args.fallback,
        device=args.device,
        settings=settings,
    )
    check_shard_args(args.shard, config.num_shards)  # before the progress bar reads the table
    total = open_parquet(args.concepts, "concepts").metadata.num_rows
    with row_progress(f"caption {name}", total) as advance:
        summary = caption_stage(args.concepts, args.out, config, args.shard, advance)
    print(
        f"captions in {args.out}: {summary['accepted']:,} accepted, {summary['dropped']:,} "
        f"dropped, {summary['fallback']:,} fallback ({summary['attempts']:,} LLM attempts; "
        f"{summary['skipped_shards']} finished shard(s) skipped)"
    )


def _render(args: argparse.Namespace) -> None:
    from autocomp.generation.registry import get_generation_model
    from autocomp.generation.render import render_stage
    from autocomp.progress import row_progress

    base = get_profile(args.profile).render
    name = args.renderer or base.renderer
    entry = get_generation_model("renderer", name)
    settings = parse_settings(args.set, {"renderer": entry.settings}).get("renderer", {})
    config = with_overrides(
        base,
        renderer=name,
        seed=args.seed,
        num_shards=args.num_shards,
        batch_size=args.batch_size,
        device=args.device,
        settings=settings,
    )
    with row_progress(f"render {name}", None) as advance:
        summary = render_stage(args.captions, args.out, config, args.shard, advance)
    print(
        f"images in {args.out}: {summary['images']:,} rendered, {summary['reused']:,} reused; "
        f"{summary['skipped_shards']} finished shard(s) skipped"
    )


def _validate(args: argparse.Namespace) -> None:
    from autocomp.generation.registry import get_generation_model
    from autocomp.generation.validate import validate_stage
    from autocomp.progress import row_progress

    base = get_profile(args.profile).validate
    names = {role: getattr(args, role) or getattr(base, role) for role in ("detector", "segmenter")}
    allowed = {
        role: get_generation_model(role, names[role]).settings for role in ("detector", "segmenter")
    }
    config = with_overrides(
        base,
        **names,
        vqa=args.vqa,
        num_shards=args.num_shards,
        batch_size=args.batch_size,
        masks=args.masks,
        all_checks=args.all_checks or None,
        device=args.device,
        settings=parse_settings(args.set, allowed),
    )
    with row_progress("validate", None) as advance:
        summary = validate_stage(args.render, args.out, config, args.shard, advance)
    print(
        f"verdicts in {args.out}: {summary['passed']:,} of {summary['samples']:,} samples passed "
        f"every check; {summary['skipped_shards']} finished shard(s) skipped"
    )


def _curate(args: argparse.Namespace) -> None:
    import pyarrow.parquet as pq

    from autocomp.generation.curate import curate_stage

    config = CurateConfig(keep_rejected=args.keep_rejected)
    counts = curate_stage(args.render, args.verdicts, args.out, args.captions, config)
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


def _shard_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard", type=int, default=None, help="run only this shard (0-based)")
    p.add_argument("--num-shards", type=int, default=None, help="shards of the run (default 1)")
    p.add_argument("--device", default=None, help="torch device (default: cuda if present)")
    p.add_argument(
        "--profile",
        default="paper",
        help="where the defaults come from: paper (default: the paper's models and settings) "
        "or tiny (random weights, offline CPU)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a model setting (repeatable)",
    )


def add_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register the generation verbs."""
    cap, ren, val = PAPER.caption, PAPER.render, PAPER.validate
    p = verbs.add_parser("caption", help="write Contextual captions with an LLM (checked, retried)")
    p.add_argument("--concepts", required=True, help="concepts table (autocomp sample)")
    p.add_argument("--out", required=True, help="output folder (resumable, sharded)")
    p.add_argument(
        "--captioner", default=None, help=f"caption LLM (paper profile: {cap.captioner})"
    )
    p.add_argument(
        "--engine",
        default=None,
        choices=("transformers", "vllm"),
        help=f"generation engine (paper profile: {cap.engine}; tiny: transformers)",
    )
    p.add_argument("--seed", type=int, default=None, help=f"sampling seed (default {cap.seed})")
    p.add_argument(
        "--batch-size", type=int, default=None, help=f"prompts per batch (default {cap.batch_size})"
    )
    p.add_argument(
        "--fallback",
        default=None,
        choices=("minimal",),
        help="keep concepts whose captions all failed, with the Minimal caption "
        "(marked; for pipeline tests, never for a benchmark; the tiny profile's default)",
    )
    _shard_args(p)
    p.set_defaults(run=_caption)

    p = verbs.add_parser("render", help="render both captions of every concept (diffusers)")
    p.add_argument("--captions", required=True, help="the caption stage's folder")
    p.add_argument("--out", required=True, help="output folder (images + render shards)")
    p.add_argument(
        "--renderer", default=None, help=f"text-to-image model (paper profile: {ren.renderer})"
    )
    p.add_argument("--seed", type=int, default=None, help=f"image seed (default {ren.seed})")
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help=f"images per batch (paper profile: {ren.batch_size}, "
        f"tiny: {PROFILES['tiny'].render.batch_size})",
    )
    _shard_args(p)
    p.set_defaults(run=_render)

    p = verbs.add_parser("validate", help="check objects, background and attributes of images")
    p.add_argument("--render", required=True, help="the render stage's folder")
    p.add_argument("--out", required=True, help="output folder (verdict shards)")
    p.add_argument("--detector", default=None, help=f"object detector (paper: {val.detector})")
    p.add_argument("--segmenter", default=None, help=f"segmenter (paper: {val.segmenter})")
    p.add_argument("--vqa", default=None, help=f"VQA judge, a registered VLM (paper: {val.vqa})")
    p.add_argument(
        "--masks",
        default=None,
        choices=("sam2", "boxes"),
        help=f"background check masks: SAM2 from the boxes or the boxes (default {val.masks})",
    )
    p.add_argument(
        "--all-checks",
        action="store_true",
        help="run every check on every image (audits; the tiny profile's default) instead of "
        "survivors only",
    )
    p.add_argument(
        "--batch-size", type=int, default=None, help=f"images per batch (default {val.batch_size})"
    )
    _shard_args(p)
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
