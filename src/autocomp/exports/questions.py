"""What every export shares: a benchmark's items as multiple-choice questions, their images as
bytes, the output folder (never replaced without `force`, never half-written) and the record of
what was exported (config, seed, version, the benchmark's digest).

A question is one benchmark item and one candidate set under the paper protocol (every negative
of the set): the positive and the set's negatives, at most `negatives` of them drawn, in an order
fixed by a seeded hash of (seed, sample id, set) -- the draw of the blind choice test
(scoring/choice.py), so an export and `score --blind choice` under one seed show the same
options in the same order. `answer` is the positive's position among the options.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autocomp import __version__
from autocomp.config import ExportConfig
from autocomp.errors import UsageError
from autocomp.scoring.choice import draw_options
from autocomp.scoring.items import Item, stream_items
from autocomp.store.atomic import atomic_folder, sweep_stale
from autocomp.store.catalog.benchmarks import Benchmark
from autocomp.store.catalog.ids import parse_sample_id
from autocomp.store.outputs import check_output
from autocomp.store.paths import resolve_inside

SETS = ("swap", "confusion", "vary_attribute", "vary_object")  # every set an item can have
RECORD = "autocomp_export.json"  # the export's record, in every export folder


@dataclass(frozen=True)
class Question:
    """One item and set as a multiple-choice question (options in the order shown)."""

    number: int  # 0.. in export order
    sample_id: str
    concept_id: str
    family: str
    n: int
    condition: str
    set_name: str
    options: list[str]  # captions, in the order shown
    candidates: list[int]  # each option's candidate index in the item (0 = the positive)
    answer: int  # the positive's position among the options
    image: bytes
    image_name: str  # the image's file name (its suffix names the format)

    @property
    def qid(self) -> str:
        """The question's id: <sample id>|<set> (unique in an export)."""
        return f"{self.sample_id}|{self.set_name}"


def check_sets(sets: tuple[str, ...]) -> None:
    """Refuse a set name that no item has, naming the known ones."""
    unknown = [s for s in sets if s not in SETS]
    if unknown or not sets:
        raise UsageError(
            "sets",
            ",".join(unknown) or "(none)",
            f"is not a candidate set; use some of {', '.join(SETS)}",
        )


def image_bytes(item: Item, root: Path | None) -> tuple[bytes, str]:
    """(bytes, file name) of an item's image: embedded bytes, or the file under `root`."""
    ref = item.image
    if isinstance(ref, dict):
        if ref.get("bytes"):
            return bytes(ref["bytes"]), Path(str(ref.get("path") or "image.png")).name
        ref = ref.get("path")
    if ref is None:
        raise UsageError("benchmark", item.sample_id, "has no image; export a rendered benchmark")
    if root is None:
        raise UsageError(
            "images", str(ref), "is an image path but no images folder was given; pass --images"
        )
    path = resolve_inside(root, str(ref))
    if not path.is_file():
        raise UsageError("images", str(path), f"is missing (item {item.sample_id}); check --images")
    return path.read_bytes(), path.name


def questions(
    source: Benchmark, config: ExportConfig, max_options: int | None
) -> Iterator[Question]:
    """Every item x set of `source` (first `config.limit` rows) as a question; at most
    `max_options` options (the harness's limit) unless `config.negatives` asks for more."""
    check_sets(config.sets)
    count = config.negatives
    for name, value in (("negatives", count), ("limit", config.limit)):
        if value is not None and value < 1:
            raise UsageError(name, str(value), "must be at least 1")
    if max_options is not None:
        if count is not None and count + 1 > max_options:
            raise UsageError(
                "negatives", str(count), f"gives more options than this harness shows "
                f"({max_options}); use at most {max_options - 1}"
            )  # fmt: skip
        count = max_options - 1 if count is None else count
    root = Path(config.images) if config.images else None
    number = 0
    for item in stream_items(source, config.limit):
        image, name = image_bytes(item, root)
        for set_name in config.sets:
            negatives = item.sets.get(set_name)
            if not negatives:
                continue
            shown = draw_options(
                negatives, len(negatives) if count is None else count, config.seed,
                item.sample_id, set_name,
            )  # fmt: skip
            yield Question(
                number=number, sample_id=item.sample_id,
                concept_id=parse_sample_id(item.sample_id)[0], family=item.family, n=item.n,
                condition=item.condition, set_name=set_name,
                options=[item.candidates[c] for c in shown], candidates=shown,
                answer=shown.index(0), image=image, image_name=name,
            )  # fmt: skip
            number += 1


def record(
    harness: str, source: Benchmark, config: ExportConfig, extra: dict[str, Any]
) -> dict[str, Any]:
    """What an export records (its config, seed, version and the benchmark it came from)."""
    return {
        "harness": harness, "autocomp_version": __version__, "config": asdict(config),
        "seed": config.seed, "benchmark": {"source": source.source(), "digest": source.digest},
        **extra,
    }  # fmt: skip


def write_record(folder: Path, document: dict[str, Any]) -> None:
    (folder / RECORD).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")


def check_out(out: str | Path, force: bool) -> Path:
    """The export folder, checked before any work: not under a file, not a file, and not there
    yet unless `force`."""
    path = check_output(out)
    if path.exists() and not path.is_dir():
        raise UsageError("out", str(path), "is a file; give a folder path for the export")
    if path.exists() and not force:
        raise UsageError(
            "out", str(path), "exists; choose a new folder, or pass --force to replace it"
        )
    if path.parent.is_dir():  # temporaries a killed export left beside it
        sweep_stale(path.parent)
    return path


@contextlib.contextmanager
def building(out: Path, force: bool) -> Iterator[Path]:
    """A temporary folder beside `out` that becomes `out` when the block succeeds (replacing an
    old one only with `force`) and is removed when it fails: an export is whole or absent."""
    try:
        with atomic_folder(out, replace=force) as folder:
            yield folder
    except FileExistsError:
        raise UsageError(
            "out", str(out), "was written by another export while this one ran; choose a new "
            "folder, or pass --force to replace it"
        ) from None  # fmt: skip


def slug(name: str) -> str:
    """A family name as a task / file name part: [a-z0-9_] only, plus a short hash when that
    changed the name (two names never share a slug)."""
    kept = "".join(c if c.isascii() and c.isalnum() else "_" for c in name.lower()).strip("_")
    if kept == name:
        return kept
    return f"{kept or 'family'}_{hashlib.sha256(name.encode()).hexdigest()[:6]}"
