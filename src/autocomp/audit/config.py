"""The audit's one typed configuration, and the study folder's layout."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from autocomp.errors import UsageError

# The study folder (written by `audit export`, served by `audit serve`, read by `audit collect`):
STUDY_FILE = "study.json"  # config, provenance, annotators and their tokens (keep it private)
KEY_FILE = "key.parquet"  # the answer key: item -> sample, task, options, correct (never served)
IMAGES_DIR = "images"  # re-encoded PNGs under random names (no sample id, no metadata)
ITEMS_DIR = "items"  # items/<annotator>.json: what that annotator sees, in order
ANSWERS_DIR = "answers"  # answers/<annotator>.jsonl: append-only journal, fsync per click

TASKS = ("confusion", "swap", "valid")  # the order of the blocks an annotator sees


@dataclass(frozen=True)
class AuditConfig:
    """How a human study is drawn from a benchmark (paper A.10: 4 evaluators, 200 concepts,
    400 images, Confusion limited to 50 options).

    concepts:          concepts per study, stratified over family x N; both of each concept's
                       images (Minimal and Contextual) are shown, so 2 x concepts images
    annotators:        evaluators; every one sees the same items (agreement needs that), in
                       their own random order with their own option order
    confusion_options: options of a Confusion item (the positive, the Swap item's negative and
                       sampled Confusion negatives), or all candidates when there are fewer
    rejected:          samples the validator rejected, added to the validity questions so that
                       concordance with the validator is measured on both outcomes
    include_rejected:  draw the choice items from rejected samples too (demo benchmarks made by
                       random-weight models accept nothing)
    seed:              every random choice of the export follows from it
    """

    concepts: int = 200
    annotators: int = 4
    confusion_options: int = 50
    rejected: int = 50
    include_rejected: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "concepts": (self.concepts, self.concepts >= 1, "must be at least 1"),
            "annotators": (self.annotators, 1 <= self.annotators <= 26, "must be 1 to 26"),
            "confusion_options": (
                self.confusion_options,
                self.confusion_options >= 3,
                "must be at least 3 (the positive, the Swap negative and one more)",
            ),
            "rejected": (self.rejected, self.rejected >= 0, "must be 0 or more"),
            "seed": (self.seed, self.seed >= 0, "must be 0 or more"),  # as every stage's seed
        }
        for field, (value, ok, fix) in checks.items():
            if not ok:
                raise UsageError(field, value, fix)

    def record(self) -> dict[str, Any]:
        return asdict(self)


def annotator_names(count: int) -> list[str]:
    """V1..Vk, as in the paper's Table 20."""
    return [f"V{i + 1}" for i in range(count)]
