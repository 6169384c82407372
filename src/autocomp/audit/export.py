"""`autocomp audit export`: a blinded, balanced human study drawn from a benchmark (paper A.10).

Every annotator sees the same items (so inter-annotator agreement is defined), each in their own
random order and option order, in three blocks: Confusion (the positive, the Swap item's negative
and sampled Confusion negatives, at most `confusion_options`), then Swap (2-way: the positive and
one Swap negative), then the validity questions (objects present, attributes right, white
background on Minimal images), which come last because they show the positive caption. The
Confusion options always contain the Swap negative, so seeing both items of an image reveals
nothing the Swap item does not. The validity questions also cover samples the validator rejected,
so concordance with the validator is measured on both of its outcomes. Negatives flagged as
describing the positive's scene (`*_same_scene`) are never offered to people.

Blinding: images are re-encoded to PNG (no generator metadata) under names that are not sample
ids; pages never show sample ids, families, conditions, verdicts or model names. The answer key
(key.parquet) and the tokens (study.json) stay in the study folder and are never served.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import secrets
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from autocomp.audit.config import (
    ANSWERS_DIR,
    IMAGES_DIR,
    ITEMS_DIR,
    KEY_FILE,
    STUDY_FILE,
    AuditConfig,
    annotator_names,
)
from autocomp.errors import UsageError
from autocomp.store.atomic import atomic_folder
from autocomp.store.catalog.benchmarks import Benchmark, as_benchmark
from autocomp.store.catalog.ids import concept_of
from autocomp.store.catalog.schemas import AUDIT_KEY_SCHEMA
from autocomp.store.outputs import check_output
from autocomp.store.paths import check_apart
from autocomp.store.tables import provenance, write_table

NEEDED = ("sample_id", "family", "n", "condition", "caption", "objects", "image")
CHOICE = ("swap_negatives", "confusion_negatives")


# ----------------------------------------------------------------------------- reading


def read_benchmark(benchmark: Benchmark) -> list[dict[str, Any]]:
    """The rows the study draws from (every column but the image)."""
    names = benchmark.schema.names
    missing = [c for c in (*NEEDED, *CHOICE) if c not in names]
    if missing:
        raise UsageError(
            "benchmark", str(benchmark.path), f"missing column(s) {', '.join(missing)}; give a "
            "benchmark with images (autocomp negatives on a curated table, or a published one)"
        )  # fmt: skip
    optional = ["accepted", "swap_same_scene", "confusion_same_scene"]
    columns = [c for c in NEEDED if c != "image"] + [*CHOICE]
    columns += [c for c in optional if c in names]
    return benchmark.read(columns).to_pylist()


def read_images(benchmark: Benchmark, samples: set[str]) -> dict[str, Any]:
    """sample -> image reference (embedded {bytes, path} or a path) for the chosen samples
    only: a published benchmark embeds every image, and a study needs a few hundred."""
    refs: dict[str, Any] = {}
    for batch in benchmark.batches(65536, columns=["sample_id", "image"]):
        for sid, ref in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
            if sid in samples:
                refs[sid] = ref
    return refs


def image_bytes(row: dict[str, Any], images_root: Path) -> bytes:
    """The bytes of a row's image: embedded, or a path that must resolve inside the root."""
    ref = row["image"]
    if ref is None:
        raise UsageError(f"image of {row['sample_id']}", None, "is missing from the benchmark")
    if isinstance(ref, dict):
        if ref.get("bytes"):
            return ref["bytes"]
        ref = ref.get("path") or ""
    root = images_root.resolve()
    path = (root / str(ref)).resolve()
    if not ref or not path.is_relative_to(root):
        raise UsageError(
            f"image of {row['sample_id']}", str(ref), f"must be a path inside {root} (--images)"
        )
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError("images_root", str(path), f"cannot be read ({exc.strerror})") from exc


def reencode(data: bytes, sample_id: str) -> bytes:
    """A clean PNG of the image (drops text chunks, EXIF and generator parameters)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            clean = image.convert("RGB")
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise UsageError(
            f"image of {sample_id}", "<bytes>", f"is not a readable image ({exc})"
        ) from exc
    out = io.BytesIO()
    clean.save(out, format="PNG")
    return out.getvalue()


# ----------------------------------------------------------------------------- drawing


def _round_robin(groups: dict[Any, list[Any]], count: int) -> list[Any]:
    """Up to `count` members taken one per group in turn (groups and members already shuffled)."""
    queues = {k: list(v) for k, v in sorted(groups.items(), key=lambda kv: str(kv[0]))}
    taken: list[Any] = []
    while len(taken) < count and any(queues.values()):
        for queue in queues.values():
            if queue and len(taken) < count:
                taken.append(queue.pop(0))
    return taken


def draw(rows: list[dict[str, Any]], config: AuditConfig) -> tuple[list[dict], list[dict]]:
    """The study's images (both conditions of the chosen concepts, stratified over family x N)
    and the rejected samples added to the validity questions (stratified over family x N x
    condition)."""
    rng = random.Random(config.seed)
    by_concept: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in sorted(rows, key=lambda r: r["sample_id"]):
        by_concept[concept_of(r["sample_id"])][r["condition"]] = r
    cells: dict[tuple, list[str]] = defaultdict(list)
    for concept, pair in by_concept.items():
        both = [pair.get("minimal"), pair.get("contextual")]
        usable = all(
            s is not None
            and distinct(s, "swap")
            and len(distinct(s, "confusion")) >= 2
            and (config.include_rejected or s.get("accepted", True))
            for s in both
        )
        if usable:
            cells[(pair["minimal"]["family"], pair["minimal"]["n"])].append(concept)
    for members in cells.values():
        rng.shuffle(members)
    available = sum(len(v) for v in cells.values())
    if available < config.concepts:
        which = "present, accepted or not" if config.include_rejected else "accepted"
        raise UsageError(
            "concepts", config.concepts, f"this benchmark has {available} usable concept(s) "
            f"(Minimal and Contextual samples both {which}, each with a Swap negative and 2 or "
            "more distinct Confusion negatives); ask for at most that many"
            + ("" if config.include_rejected else " (or --include-rejected for a demo)")
        )  # fmt: skip
    chosen = _round_robin(cells, config.concepts)
    images = [by_concept[c][cond] for c in chosen for cond in ("minimal", "contextual")]
    used = {s["sample_id"] for s in images}
    rejected_cells: dict[tuple, list[dict]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: r["sample_id"]):
        if r.get("accepted", True) is False and r["sample_id"] not in used:
            rejected_cells[(r["family"], r["n"], r["condition"])].append(r)
    for group in rejected_cells.values():
        rng.shuffle(group)
    return images, _round_robin(rejected_cells, config.rejected)


def distinct(sample: dict[str, Any], kind: str) -> list[str]:
    """A sample's negatives of one kind without those that describe the positive's scene (the
    paper protocol keeps them for models; a person reading them would be right to pick them)."""
    negatives = sample[f"{kind}_negatives"]
    same = sample.get(f"{kind}_same_scene") or [False] * len(negatives)
    return [c for c, flagged in zip(negatives, same) if not flagged]


def _validity(sample: dict[str, Any]) -> Iterator[tuple[str, str]]:
    objects = ", ".join(sample["objects"])
    yield "objects", f"Does the image show each of these objects: {objects}?"
    yield "attributes", f"Does the image match this description: {sample['caption']}"
    if sample["condition"] == "minimal":
        yield "background", "Is the background plain white?"


def build_key(
    images: list[dict], rejected: list[dict], names: dict[str, str], config: AuditConfig
) -> list[dict[str, Any]]:
    """One row per shared item (the same for every annotator), options in canonical order."""
    rng = random.Random(f"{config.seed}:options")
    key: list[dict[str, Any]] = []

    def add(s: dict, task: str, question: str, prompt: str, options: list, correct: str) -> None:
        key.append({
            "key": len(key), "sample_id": s["sample_id"], "family": s["family"], "n": s["n"],
            "condition": s["condition"], "accepted": bool(s.get("accepted", True)), "task": task,
            "question": question, "prompt": prompt, "options": options, "correct": correct,
            "image": names[s["sample_id"]],
        })  # fmt: skip

    for s in images:
        positive = s["caption"]
        swap = rng.choice(sorted(set(distinct(s, "swap")) - {positive}))
        others = sorted(set(distinct(s, "confusion")) - {positive, swap})
        extra = rng.sample(others, min(len(others), config.confusion_options - 2))
        add(s, "confusion", "", "Which caption describes the image?", [positive, swap, *extra],
            positive)  # fmt: skip
        add(s, "swap", "", "Which caption describes the image?", [positive, swap], positive)
    for s in images + rejected:
        for question, prompt in _validity(s):
            add(s, "valid", question, prompt, ["yes", "no"], "yes" if s.get("accepted", True)
                else "no")  # fmt: skip
    return key


def annotator_items(key: list[dict[str, Any]], annotator: str, seed: int) -> list[dict[str, Any]]:
    """What one annotator sees, in order: Confusion block, Swap block, validity block (the
    questions of one image together); everything shuffled with the annotator's own stream."""
    rng = random.Random(f"{seed}:{annotator}")
    items: list[dict[str, Any]] = []
    for task in ("confusion", "swap"):
        block = [k for k in key if k["task"] == task]
        rng.shuffle(block)
        items += block
    by_image: dict[str, list[dict]] = defaultdict(list)
    for k in key:
        if k["task"] == "valid":
            by_image[k["sample_id"]].append(k)
    groups = list(by_image.values())
    rng.shuffle(groups)
    items += [k for group in groups for k in group]
    out = []
    for k in items:
        options = list(k["options"])
        if k["task"] != "valid":
            rng.shuffle(options)
        out.append({"key": k["key"], "task": k["task"], "prompt": k["prompt"],
                    "options": options, "image": k["image"]})  # fmt: skip
    return out


# ----------------------------------------------------------------------------- writing


def _fingerprint(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def export_study(
    benchmark: str | Path | Benchmark,
    out: str | Path,
    config: AuditConfig,
    images_root: str | Path | None,
) -> dict[str, Any]:
    """Write the study folder `out` (which must not exist yet) from `benchmark` (a table, a
    folder of parts or an opened Benchmark, autocomp.store.catalog.benchmarks); return the
    annotators' tokens and the item counts."""
    out = Path(out)
    local = benchmark if isinstance(benchmark, (str, Path)) else None
    check_apart(out, {"benchmark": local, "images_root": images_root})
    if out.exists():
        raise UsageError("out", str(out), "already exists; give a new folder for the study")
    check_output(out)
    source = as_benchmark(benchmark)
    where = Path(source.path)
    files = [f for f in source.files if isinstance(f, Path)]
    if len(files) < len(source.files):
        raise UsageError("benchmark", str(source.path), "is in a store; fetch it into a folder")
    root = Path(images_root) if images_root else (where if where.is_dir() else where.parent)
    rows = read_benchmark(source)
    images, rejected = draw(rows, config)
    names = {
        s["sample_id"]: hashlib.sha256(f"{config.seed}:{s['sample_id']}".encode()).hexdigest()[:20]
        + ".png"
        for s in images + rejected
    }
    key = build_key(images, rejected, names, config)
    with atomic_folder(out) as work:
        for sub in (IMAGES_DIR, ITEMS_DIR, ANSWERS_DIR):
            (work / sub).mkdir(parents=True)
        refs = read_images(source, set(names))
        for s in images + rejected:
            row = {"sample_id": s["sample_id"], "image": refs.get(s["sample_id"])}
            (work / IMAGES_DIR / names[s["sample_id"]]).write_bytes(
                reencode(image_bytes(row, root), s["sample_id"])
            )
        document = provenance(
            "audit_key",
            config=config.record(),
            benchmark={"name": where.name, "sha256": _fingerprint(files)},
        )
        write_table(pa.Table.from_pylist(key, AUDIT_KEY_SCHEMA), work / KEY_FILE, document)
        annotators = {}
        for name in annotator_names(config.annotators):
            items = annotator_items(key, name, config.seed)
            (work / ITEMS_DIR / f"{name}.json").write_text(json.dumps(items), encoding="utf-8")
            annotators[name] = {"token": secrets.token_urlsafe(24), "items": len(items)}
        counts: dict[str, int] = defaultdict(int)
        for k in key:
            counts[k["task"]] += 1
        study = {
            **document,
            "table": "audit_study",
            "annotators": annotators,
            "images": len(images),
            "images_rejected": sum(not s.get("accepted", True) for s in images),
            "rejected_images": len(rejected),
            "concepts": config.concepts,
            "items": dict(counts),
        }
        (work / STUDY_FILE).write_text(json.dumps(study, indent=1, sort_keys=True), "utf-8")
        os.chmod(work / STUDY_FILE, 0o600)  # it holds the tokens
    return study
