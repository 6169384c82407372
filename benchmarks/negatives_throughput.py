"""Candidate-set generation at paper scale: throughput and peak memory, against naive baselines.

The input mixes positives as in the paper's Table 2 (validated Minimal + Contextual samples per
family and N, about 260,000 rows and 15 million candidate captions). Minimal rows carry the
template caption; Contextual rows a scene sentence around the same bindings, so the binding check
and the span substitution run on free text. The whole table is streamed through
`negatives_stage` (bind, fill every arrangement, flag, write Parquet) and the figures printed.

Baselines, measured in the same run on a sample of the same rows:
- release-style: the public release's sequential `str.replace` per slot (wrong: it collapses
  Color N=3 to 196 unique captions and never produces the true swap), for speed only;
- fill-per-candidate: the exact method without the per-hole piece tables (one `Template.fill`
  per arrangement).

The stage runs once per `--workers` value (default: 2, the former default, then `auto`, the
count that fits the cores); every run must write the same bytes, and the ratio to the first run
is printed.

Usage: python benchmarks/negatives_throughput.py [--scale 1.0] [--workers 2 auto] [--keep DIR]
"""

from __future__ import annotations

import argparse
import itertools
import resource
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
from autocomp.protocol.negatives import arrangements, build_candidates
from autocomp.protocol.stages import default_workers, negatives_stage

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


def time_per_candidate(rows, fn) -> tuple[float, int, int]:
    start, total, unique = time.perf_counter(), 0, 0
    for r in rows:
        out = fn(r)
        total += len(out)
        unique += len(set(out))
    return time.perf_counter() - start, total, unique


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def peak_rss_mb() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, children


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of Table 2 (default 1)")
    parser.add_argument("--workers", nargs="+", default=["2", "auto"], help="counts or 'auto'")
    parser.add_argument("--sample", type=int, default=300, help="rows per family/N for baselines")
    parser.add_argument("--keep", type=Path, help="keep the input and output here")
    args = parser.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="autocomp-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    source, target = work / "positives.parquet", work / "benchmark.parquet"
    t0 = time.perf_counter()
    rows = build_input(source, args.scale)
    print(
        f"input: {rows:,} positives (Table 2 mix x {args.scale}) built in {time.perf_counter() - t0:.1f} s"
    )

    first_rate, first_bytes = None, None
    for value in args.workers:
        workers = default_workers() if value == "auto" else int(value)
        out = target.with_name(f"benchmark-{value}.parquet")
        t0 = time.perf_counter()
        cpu0 = _cpu_seconds()
        summary = negatives_stage(source, out, NegativesConfig(workers=workers))
        wall, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
        candidates = summary["swap"] + summary["confusion"]
        rate = candidates / wall
        data = out.read_bytes()
        first_rate, first_bytes = first_rate or rate, first_bytes or data
        own, children = peak_rss_mb()
        print(
            f"autocomp negatives, workers {value} ({workers}): {summary['rows']:,} rows, "
            f"{summary['confusion']:,} confusion + {summary['swap']:,} swap = {candidates:,} "
            f"captions in {wall:.1f} s ({rate:,.0f} captions/s, {rate / first_rate:.2f}x the "
            f"first run; CPU {cpu:.1f} s); same bytes as the first run: {data == first_bytes}"
        )
        print(
            f"  peak RSS: parent {own:,.0f} MB, largest worker {children:,.0f} MB; "
            f"output {len(data) / 2**20:,.0f} MB (zstd)"
        )

    # Baselines on a sample of the same rows (both conditions, every family and N).
    table = pq.read_table(source).to_pylist()
    sample = []
    for key in TABLE_2:
        group = [r for r in table if (r["family"], r["n"]) == key]
        sample += group[: args.sample // 2] + group[-args.sample // 2 :]
    families = {name: load_family(name) for name, _ in TABLE_2}

    def exact(r):
        sets = build_candidates(families[r["family"]], r["objects"], r["attributes"], r["caption"])
        return [sets.caption, *sets.confusion]

    def naive(r):
        f = families[r["family"]]
        return release_style(r["caption"], r["objects"], r["attributes"], f.is_relation)

    def per_candidate(r):
        return fill_per_candidate(
            families[r["family"]], r["objects"], r["attributes"], r["caption"]
        )

    t_exact, n_exact, u_exact = time_per_candidate(sample, exact)
    t_naive, n_naive, u_naive = time_per_candidate(sample, naive)
    t_fill, n_fill, _ = time_per_candidate(sample, per_candidate)
    print(f"\nbaselines on {len(sample):,} rows (one process, no Parquet):")
    print(f"  {'method':<34}{'captions/s':>12}{'unique share':>14}{'vs autocomp':>13}")
    for name, t, n, u in (
        ("autocomp (piece tables)", t_exact, n_exact, u_exact),
        ("fill per candidate (exact)", t_fill, n_fill, n_fill),
        ("release-style str.replace (wrong)", t_naive, n_naive, u_naive),
    ):
        print(f"  {name:<34}{n / t:>12,.0f}{u / n:>14.1%}{(n / t) / (n_exact / t_exact):>12.2f}x")
    print(f"\nfiles in {work}" if args.keep else "")


if __name__ == "__main__":
    sys.exit(main())
