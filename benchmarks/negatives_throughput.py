"""Candidate-set generation at paper scale: the stage before and after, in one run.

The input mixes positives as in the paper's Table 2 (validated Minimal + Contextual samples per
family and N: 259,579 rows and 14,961,307 candidate captions at `--mode paper`). Minimal rows
carry the template caption; Contextual rows a scene sentence around the same bindings, so the
binding check and the span substitution run on free text. The whole table is streamed through
the stage (bind, fill every arrangement, flag, write Parquet).

Paths, timed on the same input in the same run, interleaved, each repeat in a fresh process (so
its peak RSS is its own):
- before: the stage at commit 1d80954 (`negatives_before.py`: Python rows, result batches
  pickled back to the parent, which writes the Parquet), with its default worker count for this
  machine (1 on two cores or fewer) unless `--before-workers` says otherwise;
- now: `negatives_stage` (column-wise candidate building; workers write their own Parquet
  parts, joined without decoding), with each `--workers` value.

Medians of `--repeats` runs (default 3) are printed with the ratio to the first "before"
configuration, the load (the load average and the cores other processes kept busy during each
path's runs, benchmarks/common.py), each path's peak RSS, and whether every output holds the
same rows as the first "before" output. The caption count of every run is checked against the
paper's formulas (|Swap| = N! - 1, |Confusion| = N^(2N) - 1 or N^N (N-1)^(N-1) - 1 per row)
before anything is printed.

Then the generators a peer would compare with, on a subset of the same input (`--sample` rows
per family and N; skip with `--skip-baselines`), interleaved, medians of `--repeats`: the stage
itself on that subset (1 worker, a fresh process, Parquet written), `build_candidates` in memory,
the exact fill per candidate, and the public release's `str.replace` generator (wrong: it
collapses captions and loses the true swap). The last line is the figure to quote: the stage's
rate, its ratio against the faster of the two generators (the release's `str.replace` and the
fill per candidate), and its peak memory.

Usage: python benchmarks/negatives_throughput.py [--mode paper|quick] [--scale S]
       [--workers 1 auto] [--before-workers auto] [--repeats 3] [--sample 300]
       [--skip-baselines] [--keep DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.config import NegativesConfig
from autocomp.protocol.binding import bind
from autocomp.protocol.concepts import count_concepts, sample_concepts
from autocomp.protocol.family import load_family
from autocomp.protocol.minimal import minimal_caption, spec_text
from autocomp.protocol.negatives import arrangements, build_candidates, expected_counts
from autocomp.protocol.stages import default_workers, negatives_stage, usable_cores

sys.path.insert(0, str(Path(__file__).parent))
import negatives_before  # noqa: E402  (the stage before, beside this script)
from common import Meter, Reading, cpu_model, load_text, require  # noqa: E402

# Table 2 of the paper: validated samples (Minimal, Contextual) per benchmark.
TABLE_2 = {
    ("color", 2): (26_388, 36_200),
    ("color", 3): (3_074, 2_930),
    ("position", 2): (38_393, 30_694),
    ("position", 3): (7_478, 5_234),
    ("shape_color", 2): (18_642, 15_388),
    ("shape_color", 3): (4_286, 3_761),
    ("relative_size", 2): (31_574, 24_912),
    ("relative_size", 3): (6_118, 4_507),
}
PLACES = ["sunlit kitchen", "quiet office", "busy workshop", "hotel lobby", "garden shed"]


def contextual_text(family, objects, labels, i: int) -> str:
    place = PLACES[i % len(PLACES)]
    return f"In a {place}, {spec_text(family, objects, labels)} in warm evening light."


def build_input(path: Path, scale: float) -> int:
    columns: dict[str, list] = {
        k: [] for k in ("family", "n", "objects", "attributes", "condition", "caption")
    }
    for (name, n), (k_min, k_ctx) in TABLE_2.items():
        family = load_family(name)
        k_min, k_ctx = round(k_min * scale), round(k_ctx * scale)
        distinct = min(max(k_min, k_ctx), count_concepts(family, n))
        concepts = sample_concepts(family, n, distinct, seed=0)
        # Shape-Color N=2 has fewer distinct concepts (3,380) than the paper's split: cycle them.
        for condition, k in (("minimal", k_min), ("contextual", k_ctx)):
            for i, c in enumerate(itertools.islice(itertools.cycle(concepts), k)):
                if condition == "minimal":
                    text = minimal_caption(family, c.objects, c.labels)
                else:
                    text = contextual_text(family, c.objects, c.labels, i)
                columns["family"].append(name)
                columns["n"].append(n)
                columns["objects"].append(list(c.objects))
                columns["attributes"].append(list(c.labels))
                columns["condition"].append(condition)
                columns["caption"].append(text)
    table = pa.table(columns).cast(
        pa.schema([
            ("family", pa.string()), ("n", pa.int8()), ("objects", pa.list_(pa.string())),
            ("attributes", pa.list_(pa.string())), ("condition", pa.string()), ("caption", pa.string()),
        ])
    )  # fmt: skip
    pq.write_table(table, path)
    return table.num_rows


def release_style(caption: str, objects, labels, relation: bool) -> list[str]:
    n = len(objects)
    label_values = n - 1 if relation else n
    out = []
    for p in itertools.product(range(n), repeat=n):
        for q in itertools.product(range(label_values), repeat=len(labels)):
            c = caption
            for i in range(n):
                c = c.replace(objects[i], objects[p[i]])
            for j in range(len(labels)):
                c = c.replace(labels[j], labels[q[j]])
            out.append(c)
    return out


def fill_per_candidate(family, objects, labels, caption: str) -> list[str]:
    template = bind(family, objects, labels, caption)
    arr = arrangements(family.is_relation, len(objects))
    return [
        template.fill(family, [objects[i] for i in p], [labels[j] for j in q])
        for p, q in zip(arr.objects, arr.labels)
    ]


def expected_captions(source: Path) -> int:
    """Swap + Confusion captions the paper's formulas give for every row of `source`."""
    table = pq.read_table(source, columns=["family", "n"])
    relation = {name: load_family(name).is_relation for name, _ in TABLE_2}
    return sum(
        sum(expected_counts(relation[f], n))
        for f, n in zip(table.column("family").to_pylist(), table.column("n").to_pylist())
    )


def count_per_candidate(rows, fn) -> tuple[int, int]:
    total, unique = 0, 0
    for r in rows:
        out = fn(r)
        total += len(out)
        unique += len(set(out))
    return total, unique


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_once(path: str, workers: str, source: Path, out: Path) -> dict:
    """One timed run of one path (in this process, which the parent started for it)."""
    if path == "before":
        count = before_default_workers() if workers == "auto" else int(workers)
    else:
        count = default_workers() if workers == "auto" else int(workers)
    t0, cpu0, meter = time.perf_counter(), _cpu_seconds(), Meter()
    if path == "before":
        captions = negatives_before.negatives_stage(source, out, NegativesConfig(workers=count))
    else:
        summary = negatives_stage(source, out, NegativesConfig(workers=count, force=True))
        captions = summary["swap"] + summary["confusion"]
    wall, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
    own = _high_water_mb()
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    reading = meter.stop()
    return {"workers": count, "captions": captions, "wall": wall, "cpu": cpu,
            "rss": own, "worker_rss": children, "load": reading.load,
            "others": reading.others}  # fmt: skip


def _high_water_mb() -> float:
    """This process's peak RSS since it started its program (VmHWM; `ru_maxrss` would also
    count the benchmark process it was forked from). A worker's figure (`ru_maxrss` of the
    children) is an upper bound: it includes this process's size when the worker was started."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def before_default_workers() -> int:
    """The default worker count at commit 1d80954: the parent kept a core for the Parquet."""
    cores = len(os.sched_getaffinity(0))
    return 1 if cores <= 2 else min(cores - 1, 16)


def timed(path: str, workers: str, source: Path, out: Path) -> dict:
    """`run_once` in a fresh process (its own peak RSS, no warm caches from other runs)."""
    command = [sys.executable, __file__, "--one", path, "--workers", workers,
               "--input", str(source), "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{path} run failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def same_rows(a: Path, b: Path) -> bool:
    """Both files hold the same rows and values (row group by row group, never all at once)."""
    fa, fb = pq.ParquetFile(a), pq.ParquetFile(b)
    if fa.metadata.num_rows != fb.metadata.num_rows:
        return False
    if fa.schema_arrow.remove_metadata() != fb.schema_arrow.remove_metadata():
        return False
    left = fa.iter_batches(batch_size=4096)
    right = fb.iter_batches(batch_size=4096)
    return all(x.equals(y) for x, y in zip(left, right))


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def sample_rows(source: Path, per_key: int) -> list[dict]:
    """Up to `per_key` rows of each (family, N), half Minimal and half Contextual."""
    table = pq.read_table(source).to_pylist()
    sample = []
    for key in TABLE_2:
        group = [r for r in table if (r["family"], r["n"]) == key]
        sample += group[: per_key // 2] + group[-per_key // 2 :]
    return sample


def _reading(run: dict) -> Reading:
    return Reading(run["wall"], tuple(run["load"]), run["others"])


def baselines(source: Path, work: Path, per_key: int, repeats: int, peak_mb: float) -> None:
    """The stage on a subset of the input against the generators a peer would compare with, on
    the same rows, interleaved; then the one line to quote."""
    sample = sample_rows(source, per_key)
    subset = work / "subset.parquet"
    pq.write_table(pa.Table.from_pylist(sample, schema=pq.read_schema(source)), subset)
    expected = expected_captions(subset)
    families = {name: load_family(name) for name, _ in TABLE_2}

    def exact(r):
        sets = build_candidates(families[r["family"]], r["objects"], r["attributes"], r["caption"])
        return [*sets.swap, *sets.confusion]

    def naive(r):
        f = families[r["family"]]
        return release_style(r["caption"], r["objects"], r["attributes"], f.is_relation)

    def per_candidate(r):
        return fill_per_candidate(
            families[r["family"]], r["objects"], r["attributes"], r["caption"]
        )

    methods = {
        "build_candidates (in memory)": exact,
        "fill per candidate (exact)": per_candidate,
        "release's str.replace (wrong)": naive,
    }
    stage = "the stage (1 worker, Parquet)"
    walls: dict[str, list[float]] = {stage: [], **{name: [] for name in methods}}
    readings: list[Reading] = []
    counts: dict[str, tuple[int, int]] = {}
    for _ in range(repeats):  # interleaved, as the paper-scale runs
        out = work / "subset-out.parquet"
        out.unlink(missing_ok=True)
        run = timed("now", "1", subset, out)
        require(run["captions"] == expected, f"subset: {run['captions']:,} captions, "
                f"the formulas give {expected:,}")  # fmt: skip
        walls[stage].append(run["wall"])
        readings.append(_reading(run))
        for name, fn in methods.items():
            meter = Meter()
            counts[name] = count_per_candidate(sample, fn)
            readings.append(meter.stop())
            walls[name].append(readings[-1].wall)
    total = counts["build_candidates (in memory)"][0]
    require(total == expected, f"build_candidates: {total:,} captions, formulas {expected:,}")
    made = {stage: expected, **{name: c[0] for name, c in counts.items()}}
    rates = {name: made[name] / statistics.median(w) for name, w in walls.items()}
    print(f"\ngenerators on a subset: {len(sample):,} rows ({per_key} per family and N), "
          f"{expected:,} Swap + Confusion captions; medians of {repeats}, interleaved; "
          f"{load_text(readings)}")  # fmt: skip
    print(f"  {'method':<34}{'captions/s':>12}{'distinct':>10}{'the stage is':>14}  walls")
    for name, w in walls.items():
        right = "wrong" not in name  # the exact ones: Swap and Confusion, each set distinct
        unique = "all" if right else f"{counts[name][1] / counts[name][0]:.1%}"
        print(f"  {name:<34}{rates[name]:>12,.0f}{unique:>10}"
              f"{rates[stage] / rates[name]:>13.2f}x  {' '.join(f'{x:.2f}' for x in w)}")  # fmt: skip
    peers = ("fill per candidate (exact)", "release's str.replace (wrong)")
    faster = max(peers, key=rates.__getitem__)
    print(f"\nmake bench: the stage makes {rates[stage]:,.0f} captions/s on the subset, "
          f"{rates[stage] / rates[faster]:.2f}x the faster generator ({faster}, "
          f"{rates[faster]:,.0f} captions/s in memory, no Parquet); peak memory "
          f"{peak_mb:,.0f} MB (peak RSS of the stage at 1 worker, the runs above)")  # fmt: skip


MODES = {"paper": 1.0, "quick": 0.05}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mode",
        choices=sorted(MODES),
        default="paper",
        help="paper: Table 2 at full size (259,579 positives); quick: 5 %%",
    )
    parser.add_argument("--scale", type=float, help="fraction of Table 2 (overrides --mode)")
    parser.add_argument(
        "--workers",
        nargs="+",
        default=["1", "auto"],
        help="worker counts of the new stage ('auto': default_workers)",
    )
    parser.add_argument(
        "--before-workers",
        nargs="+",
        default=["auto"],
        help="worker counts of the stage before ('auto': its default)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per path (medians)")
    parser.add_argument("--skip-baselines", action="store_true", help="no generator baselines")
    parser.add_argument("--sample", type=int, default=300, help="rows per family/N for baselines")
    parser.add_argument("--keep", type=Path, help="keep the input and outputs here")
    parser.add_argument("--one", choices=["before", "now"], help=argparse.SUPPRESS)
    parser.add_argument("--input", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # a child run: one path, its figures as JSON on the last line
        print(json.dumps(run_once(args.one, args.workers[0], args.input, args.out)))
        return

    scale = args.scale if args.scale is not None else MODES[args.mode]
    work = args.keep or Path(tempfile.mkdtemp(prefix="autocomp-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    source = work / "positives.parquet"
    t0 = time.perf_counter()
    rows = build_input(source, scale)
    expected = expected_captions(source)
    if scale == 1.0:
        require(rows == 259_579 and expected == 14_961_307,
                f"paper scale: {rows:,} positives, {expected:,} captions")  # fmt: skip
    print(f"input: {rows:,} positives (Table 2 mix x {scale}), {expected:,} captions by the "
          f"paper's formulas, built in {time.perf_counter() - t0:.1f} s")  # fmt: skip
    print(f"machine: {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable, "
          f"{usable_cores()} after any cgroup quota), {cpu_model()}; load average {load()}")  # fmt: skip

    paths = [("before", w) for w in args.before_workers] + [("now", w) for w in args.workers]
    runs: dict[tuple[str, str], list[dict]] = {p: [] for p in paths}
    for repeat in range(args.repeats):
        for path, workers in paths:  # interleaved: a change of load hits every path alike
            out = work / f"benchmark-{path}-{workers}.parquet"
            out.unlink(missing_ok=True)
            run = timed(path, workers, source, out)
            require(run["captions"] == expected, f"{path}/{workers}: {run['captions']:,} "
                    f"captions, the formulas give {expected:,}")  # fmt: skip
            runs[(path, workers)].append(run)
        print(f"  repeat {repeat + 1}/{args.repeats} done; load average {load()}", flush=True)

    reference = work / f"benchmark-{paths[0][0]}-{paths[0][1]}.parquet"
    first_rate = None
    readings = [_reading(r) for done in runs.values() for r in done]
    print(f"\n{load_text(readings)} (medians of {args.repeats}, interleaved)")
    print(f"{'path':<8}{'workers':>9}{'wall s':>9}{'captions/s':>13}{'ratio':>8}{'CPU s':>8}"
          f"{'peak RSS MB':>20}{'same rows':>11}{'other cores':>13}")  # fmt: skip
    for path, workers in paths:
        done = runs[(path, workers)]
        wall = statistics.median(r["wall"] for r in done)
        rate = done[0]["captions"] / wall
        first_rate = first_rate or rate
        cpu = statistics.median(r["cpu"] for r in done)
        rss = max(r["rss"] for r in done)
        worker_rss = max(r["worker_rss"] for r in done)
        others = [r["others"] for r in done if r["others"] is not None]
        busy = f"{statistics.median(others):.1f}" if others else "n/a"
        out = work / f"benchmark-{path}-{workers}.parquet"
        same = "ref" if out == reference else ("yes" if same_rows(reference, out) else "NO")
        memory = f"{rss:,.0f}" + (f" + {worker_rss:,.0f}/worker" if done[0]["workers"] > 1 else "")
        label = f"{workers} ({done[0]['workers']})" if workers == "auto" else workers
        print(f"{path:<8}{label:>9}{wall:>9.1f}{rate:>13,.0f}{rate / first_rate:>7.2f}x{cpu:>8.1f}"
              f"{memory:>20}{same:>11}{busy:>13}")  # fmt: skip
    print(f"({done[0]['captions']:,} captions per run; walls: "
          + "; ".join(f"{p}/{w} " + " ".join(f"{r['wall']:.1f}" for r in runs[(p, w)])
                      for p, w in paths) + f"; load average now {load()})")  # fmt: skip
    if not args.skip_baselines:
        one = runs.get(("now", "1")) or next(v for (p, _), v in runs.items() if p == "now")
        baselines(source, work, args.sample, args.repeats, max(r["rss"] for r in one))
    print(f"\nfiles in {work}" if args.keep else "")


if __name__ == "__main__":
    sys.exit(main())
