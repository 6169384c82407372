"""Verbs of the Kubeflow pipelines on this machine: run (both pipelines through kfp.local),
compile and prefetch; the verbs that talk to a cluster (upload, doctor, resume, submit, schedule)
are in cli/cluster.py. They need the `pipelines` extra (kfp); the definitions ship inside the
package, so they work from any folder and inside the images."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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

    import yaml

    from autocomp.pipelines.cluster.backends import check_server

    for name in PIPELINES:
        spec = next(yaml.safe_load_all(done[name].read_text(encoding="utf-8")))
        refusals, _ = check_server(spec, target.first)
        for why in refusals:
            print(f"autocomp compile: note: {name} on KFP {target.range}: {why}", file=sys.stderr)


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
    print("".join(f"{n}\n" for n in random_weights_note((out / "results").iterdir())), end="")
    print(f"report:    {out / 'report' / 'index.html'}")  # the last line: where to look


def add_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register the pipeline verbs, in the order `autocomp --help` lists them."""
    _add_run(verbs)
    _add_compile(verbs)
    _add_prefetch(verbs)


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
