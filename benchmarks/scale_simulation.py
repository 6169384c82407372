"""The data flow at scale, on this machine: generate_benchmark then evaluate_models through
kfp.local against an S3 store (moto_server on 127.0.0.1), at sizes a factor of 10 apart, with the
tiny models at their cheapest settings (32 px, one inference step, 8-token captions, the checks
stopping at the first failure). The compute is not what is measured; the data flow is: each
step's peak disk (its scratch and its output artifacts, polled), peak memory (RSS), the bytes it
moved to and from the store, and its wall time (benchmarks/scale_probe: a per-task probe), and
what the store holds at the end. A step whose disk or memory grows with the benchmark beyond its
stated bound (autocomp.pipelines.cluster.capacity) shows as a ratio far above 1 between sizes.

    python benchmarks/scale_simulation.py --concepts 50 500 --out /tmp/scale   # both sizes
    python benchmarks/scale_simulation.py --concepts 500 --ranges 1 4 --out /tmp/k  # K=1 and 4
    python benchmarks/scale_simulation.py --concepts 20 --out /tmp/rate        # the chain's rate

evaluate_models runs once per `--ranges` value K (score pods per model, each a contiguous range
of its parts; the results of the run before are removed from the store first). Prints one table
per size and the large/small ratios, and writes OUT/figures.json (OUT/figures-<size>.json as
each size ends). The machine
is shared (2 cores): the load average is sampled and printed with the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).resolve().parent / "scale_probe"
SPECS = ("color:2", "position:2")
MODELS = ("tiny-clip", "tiny-siglip")
CHEAPEST = {  # the tiny models at their cheapest settings, in large batches
    "render_settings": {"height": 32, "width": 32, "num_inference_steps": 1},
    "caption_settings": {"max_new_tokens": 8},
    "caption_batch_size": 128,
    "render_batch_size": 64,
    "validate_batch_size": 64,
    "all_checks": False,  # the random detector rejects every image: later checks are skipped
    "masks": "boxes",
    "num_shards": 2,
    "max_candidates": 512,  # parts of 512 candidates: many parts to cut into ranges
}
PIPELINES = ("generate_benchmark", "evaluate_models")
RANGES = (1, 4)  # score pods per model: the evaluation is run once per value
STEP = re.compile(r"^(?P<step>[a-z0-9_.-]+?)(?:-\d+)?$")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def moto_store(bucket: str = "autocomp", endpoint: str = "") -> Iterator[str]:
    """An S3 store on a moto_server of its own on 127.0.0.1 (or on the S3 server already at
    `endpoint`, which outlives the run: a generation and its evaluations in separate runs);
    yields its URI (the environment holds the endpoint and keys the steps read)."""
    if endpoint:
        os.environ.update({"AUTOCOMP_S3_ENDPOINT": endpoint,
                           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"})  # fmt: skip
        _make_bucket(endpoint, bucket)
        yield f"s3://{bucket}/scale"
        return
    port = _free_port()
    binary = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen([str(binary), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.time() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.time() > deadline:
                raise RuntimeError("moto_server did not start")
            time.sleep(0.1)
        os.environ.update({"AUTOCOMP_S3_ENDPOINT": f"http://127.0.0.1:{port}",
                           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"})  # fmt: skip
        _make_bucket(f"http://127.0.0.1:{port}", bucket)
        yield f"s3://{bucket}/scale"
    finally:
        proc.terminate()
        proc.wait(10)


def _make_bucket(endpoint: str, bucket: str) -> None:
    """The store's bucket, made as an administrator would (autocomp never creates one)."""
    from minio import Minio

    admin = Minio(endpoint.split("://", 1)[1], "admin", "admin", secure=False, region="us-east-1")
    if not admin.bucket_exists(bucket):
        admin.make_bucket(bucket)


class LoadSampler:
    """The 1-minute load average, sampled every few seconds while a run goes."""

    def __init__(self, every: float = 5.0) -> None:
        self.samples: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(every,), daemon=True)

    def _run(self, every: float) -> None:
        while not self.stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self.stop.wait(every)

    def __enter__(self) -> LoadSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join()

    def summary(self) -> dict[str, float]:
        s = self.samples or [os.getloadavg()[0]]
        return {"min": min(s), "median": sorted(s)[len(s) // 2], "max": max(s)}


def arguments(concepts: int, models: tuple[str, ...], **given: Any) -> tuple[dict, dict]:
    """generate_benchmark's and evaluate_models' arguments: the tiny profile, `concepts`
    concepts over SPECS, the cheapest settings, `models` scored (`given`: more overrides)."""
    from autocomp.pipelines.local.run import local_arguments

    count = max(1, concepts // len(SPECS))
    overrides = {**CHEAPEST, **given}
    return local_arguments("tiny", list(models), specs=",".join(SPECS), count=count, **overrides)


def run(
    concepts: int,
    out: Path,
    store: str,
    models: tuple[str, ...] = MODELS,
    pipelines: tuple[str, ...] = PIPELINES,
    ranges: tuple[int, ...] = RANGES,
    **given: Any,
) -> dict[str, Any]:
    """Both pipelines at one size with the probe on every task, evaluate_models once per
    number of score ranges (the results of the one before removed from the store first);
    returns the figures (an evaluation's steps and wall are named with its K)."""
    from autocomp.pipelines import checks
    from autocomp.pipelines.local.run import LocalRun

    generate, evaluate = arguments(concepts, models, **given)
    name = f"scale-{concepts}"
    run_args = {"name": name, "store": store}
    checks.check("generate_benchmark", {**run_args, "unique_name": False, **generate})
    checks.check("evaluate_models", {**run_args, **evaluate})
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PROBE), str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p
    )
    runs: list[tuple[str, str, dict[str, Any]]] = []
    for pipeline in pipelines:
        if pipeline == "generate_benchmark":
            runs.append((pipeline, "", {"unique_name": False, **generate}))
        else:
            runs += [(pipeline, f" K={k}", {**evaluate, "score_ranges": k}) for k in ranges]
    walls, steps, stored = {}, {}, {}
    with LoadSampler() as load, LocalRun(out, offline=True, tty=False) as session:
        for pipeline, tag, extra in runs:
            if pipeline == "evaluate_models" and len(ranges) > 1:
                _clear_scores(store)  # each K scores from nothing (one K: resume as it is)
            probe = out / f"probe{tag.strip().replace('=', '')}"
            os.environ["AUTOCOMP_SCALE_PROBE"] = str(probe)
            started = time.time()
            session.run(pipeline, **run_args, **extra)
            walls[pipeline + tag] = time.time() - started
            tasks = [json.loads(p.read_text()) for p in (probe / "tasks").glob("*.json")]
            tasks.sort(key=lambda t: t["started"])
            steps.update({name + tag: s for name, s in by_step(tasks).items()})
            stored = stored_bytes(store)
    os.environ.pop("AUTOCOMP_SCALE_PROBE")
    return {
        "concepts": concepts, "samples": 2 * concepts, "name": name, "walls": walls,
        "load": load.summary(), "steps": steps, "store": stored, "ranges": list(ranges),
        "max_candidates": evaluate["max_candidates"],
    }  # fmt: skip


def _clear_scores(store: str) -> None:
    """The store without any score run: published results and committed score parts."""
    from autocomp.store.stores import open_store

    opened = open_store(store)
    for prefix in ("results", "work/score"):
        opened.delete(prefix)


def by_step(tasks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per step (render-0 and render-1 are one step; score-cpu for every model too): pods, the
    largest peak disk and RSS of one pod, the bytes all its pods moved, and the wall time of the
    slowest pod."""
    steps: dict[str, dict[str, Any]] = {}
    for t in tasks:
        name = STEP.match(t["task"])["step"] if STEP.match(t["task"]) else t["task"]  # type: ignore[index]
        s = steps.setdefault(name, {"pods": 0, "peak_disk": 0, "peak_rss": 0, "read": 0,
                                    "written": 0, "requests": 0, "wall_s": 0.0})  # fmt: skip
        s["pods"] += 1
        for key in ("peak_disk", "peak_rss"):
            s[key] = max(s[key], t[key])
        for key in ("read", "written", "requests"):
            s[key] += t[key]
        s["wall_s"] = max(s["wall_s"], t["wall_s"])
    return steps


def stored_bytes(store: str) -> dict[str, int]:
    """What the store holds at the end, by top-level area (work/<stage>, benchmarks, results)."""
    from autocomp.store.stores import open_store

    areas: dict[str, int] = {}
    for item in open_store(store).list(""):
        parts = item.key.split("/")
        area = "/".join(parts[:2]) if parts[0] == "work" else parts[0]
        areas[area] = areas.get(area, 0) + item.size
    return dict(sorted(areas.items()))


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f}"


def table(figures: dict[str, Any]) -> str:
    """One size's per-step figures as a Markdown table."""
    lines = [
        f"{figures['concepts']:,} concepts ({figures['samples']:,} images); walls: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in figures["walls"].items())
        + "; load average {min:.1f}-{max:.1f} (median {median:.1f})".format(**figures["load"]),
        "",
        "| step | pods | peak disk MB (one pod) | peak RSS MB (one pod) | read MB | written MB "
        "| requests | wall s (slowest pod) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in figures["steps"].items():
        lines.append(
            f"| {name} | {s['pods']} | {_mb(s['peak_disk'])} | {_mb(s['peak_rss'])} | "
            f"{_mb(s['read'])} | {_mb(s['written'])} | {s['requests']:,} | {s['wall_s']:.1f} |"
        )
    lines += ["", "store: " + ", ".join(f"{k} {_mb(v)} MB" for k, v in figures["store"].items())]
    ranges = figures.get("ranges") or []
    if len(ranges) > 1:
        first, last = (
            figures["walls"].get(f"evaluate_models K={k}") for k in (ranges[0], ranges[-1])
        )
        if first and last:
            lines.append(f"evaluate_models wall K={ranges[-1]} / K={ranges[0]}: {last / first:.2f}")
    return "\n".join(lines)


def ratios(small: dict[str, Any], large: dict[str, Any]) -> str:
    """Large / small per step: what grows with the benchmark and what stays flat."""
    lines = ["| step | disk x | RSS x | bytes moved x |", "|---|---:|---:|---:|"]
    for name, s in large["steps"].items():
        t = small["steps"].get(name)
        if not t:
            continue
        moved = (s["read"] + s["written"]) / max(1, t["read"] + t["written"])
        lines.append(
            f"| {name} | {s['peak_disk'] / max(1, t['peak_disk']):.2f} | "
            f"{s['peak_rss'] / max(1, t['peak_rss']):.2f} | {moved:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concepts", type=int, nargs="+", default=[50, 500])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--ranges", type=int, nargs="+", default=list(RANGES),
                        help="score pods per model; evaluate_models runs once per value")  # fmt: skip
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=PIPELINES,
                        help="which pipelines run (an evaluation alone needs --endpoint)")  # fmt: skip
    parser.add_argument("--endpoint", default="",
                        help="an S3 server already running (e.g. a moto_server started by hand) "
                        "instead of one of the run's own")  # fmt: skip
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    with moto_store(endpoint=args.endpoint) as store:
        for concepts in args.concepts:
            models = tuple(args.models.split(","))
            figures = run(concepts, args.out / f"c{concepts}", store, models,
                          pipelines=tuple(args.pipelines), ranges=tuple(args.ranges))  # fmt: skip
            results.append(figures)
            print(table(figures), "\n", flush=True)
            (args.out / f"figures-{concepts}.json").write_text(json.dumps(figures, indent=1))
    if len(results) > 1:
        print(ratios(results[0], results[-1]))
    (args.out / "figures.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
