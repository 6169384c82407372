"""The validate stage: every rendered sample through the checks, cheapest first.

Order (paper Section 3 and A.12): `image` (decode and normalise) -> `objects` (Grounding DINO,
one query per class; checks.py) -> `background` (Minimal only: SAM2 masks from the kept
boxes, then the white-pixel share) -> `attributes` (VQA by option likelihood, vqa.py).
A check runs only on the samples that passed every earlier one, so the expensive VLM sees only
the survivors. Each sample gets one verdict row per check: pass, fail (with the reason),
skipped (an earlier check failed) or n/a (background on a Contextual image).

verdicts table (a folder of shards, autocomp.store.shards):
    sample_id, concept_id, family, n, condition, check, step (int8: 1..4), outcome, reason,
    detail (JSON: counts found, white share, answers...)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from autocomp.config import ValidateConfig
from autocomp.devices import check_device
from autocomp.errors import UsageError
from autocomp.generation import checks
from autocomp.generation.registry import GenerationModel, check_settings, get_generation_model
from autocomp.protocol.family import load_family
from autocomp.scoring.registry import ModelEntry, get_model
from autocomp.store.catalog.schemas import VERDICTS_SCHEMA
from autocomp.store.images import ImageFolder, Images
from autocomp.store.paths import OutsideRoot
from autocomp.store.shards import (
    check_shard_args,
    input_digest,
    prepare_folder,
    read_stage,
    shard_of,
    shard_path,
    unfinished,
)
from autocomp.store.tables import provenance, require_columns, write_table

CHECKS = ("image", "objects", "background", "attributes")
MASKS = ("sam2", "boxes")
COMMIT_EVERY = 16  # batches per committed part of a shard (with a `journal`: the pipelines)


class Journal(Protocol):
    """Where a shard's verdicts are committed as it goes (store.work.VerdictJournal), so a
    killed shard resumes after its last committed part."""

    def resume(self, shard: int, record: dict[str, Any]) -> list[dict[str, Any]]: ...
    def commit(self, shard: int, record: dict[str, Any], rows: list[dict[str, Any]]) -> None: ...


class Models:
    """The validation models, loaded on first use (a shard whose samples all fail early never
    loads the VLM)."""

    def __init__(
        self,
        detector: str,
        segmenter: str,
        vqa: str,
        device: str | None,
        overrides: dict[str, dict[str, Any]],
    ) -> None:
        self.names = {"detector": detector, "segmenter": segmenter, "vqa": vqa}
        self.device = device
        self.overrides = overrides
        self._loaded: dict[str, Any] = {}

    def get(self, role: str) -> Any:
        if role not in self._loaded:
            from autocomp.generation import detection, vqa

            loaders = {
                "detector": lambda: detection.load_detector(
                    self.names["detector"], self.device, **self.overrides.get("detector", {})
                ),
                "segmenter": lambda: detection.load_segmenter(
                    self.names["segmenter"], self.device, **self.overrides.get("segmenter", {})
                ),
                "vqa": lambda: vqa.VqaJudge(self.names["vqa"], self.device),
            }
            self._loaded[role] = loaders[role]()
        return self._loaded[role]


def _row(sample: dict[str, Any], verdict: checks.Verdict) -> dict[str, Any]:
    return {
        "sample_id": sample["sample_id"],
        "concept_id": sample["concept_id"],
        "family": sample["family"],
        "n": sample["n"],
        "condition": sample["condition"],
        "check": verdict.check,
        "step": CHECKS.index(verdict.check) + 1,
        "outcome": verdict.outcome,
        "reason": verdict.reason,
        "detail": json.dumps(verdict.detail, sort_keys=True) if verdict.detail else "",
    }


def validate_batch(
    batch: list[dict[str, Any]],
    root: Path | Images,
    models: Models,
    settings: dict[str, Any],
    all_checks: bool = False,
) -> list[dict[str, Any]]:
    """Verdict rows for a batch of render rows: checks cheapest first, each on the survivors of
    the earlier ones (`all_checks`: every check on every decodable image, for audits). `root`:
    the render folder, or where its images are (a folder or a store prefix: store.images)."""

    def survivors(check: str) -> list[dict[str, Any]]:
        return [
            s
            for s in alive
            if all_checks or verdicts[s["sample_id"]].get(check, _NA).outcome != checks.FAIL
        ]

    verdicts: dict[str, dict[str, checks.Verdict]] = {s["sample_id"]: {} for s in batch}
    images: dict[str, Any] = {}
    source = root if not isinstance(root, Path) else ImageFolder(root)
    opened = source.open_many([s["image"] for s in batch])  # a store's: fetched in parallel
    for s, image in zip(batch, opened):
        try:
            if isinstance(image, OutsideRoot):
                raise image
            if isinstance(image, FileNotFoundError):
                raise checks.ImageRejected("image file is missing")
            images[s["sample_id"]], note = checks.normalize_image(image)
            detail = {"normalized": note} if note else None
            verdicts[s["sample_id"]]["image"] = checks.Verdict("image", checks.PASS, "", detail)
        except (checks.ImageRejected, OutsideRoot) as exc:
            verdicts[s["sample_id"]]["image"] = checks.Verdict("image", checks.FAIL, str(exc))
    alive = [s for s in batch if s["sample_id"] in images]

    kept_boxes: dict[str, list[list[float]]] = {}
    if alive:
        families = {s["family"]: load_family(s["family"]) for s in alive}
        pairs, owners = [], []
        for s in alive:
            expected = checks.expected_counts(families[s["family"]], s["objects"])
            for name in expected:
                pairs.append((images[s["sample_id"]], name))
                owners.append((s["sample_id"], name))
        found: dict[str, dict[str, int]] = {s["sample_id"]: {} for s in alive}
        detections = models.get("detector").detect(pairs)
        for (sid, name), (boxes, scores) in zip(owners, detections):
            keep = checks.merge_boxes(boxes, scores, settings["merge_iou"])
            found[sid][name] = len(keep)
            kept_boxes.setdefault(sid, []).extend(boxes[i] for i in keep)
        for s in alive:
            expected = checks.expected_counts(families[s["family"]], s["objects"])
            verdicts[s["sample_id"]]["objects"] = checks.count_verdict(
                expected, found[s["sample_id"]]
            )
    alive = survivors("objects")

    for s in alive:
        if s["condition"] != "minimal":
            continue
        image, boxes = images[s["sample_id"]], kept_boxes.get(s["sample_id"], [])
        if settings["masks"] == "sam2":
            mask = models.get("segmenter").union_mask(image, boxes)
        else:
            mask = checks.box_mask(image.size, boxes)
        verdicts[s["sample_id"]]["background"] = checks.background_verdict(
            image, mask, settings["brightness"], settings["min_white_fraction"]
        )
    alive = survivors("background")

    if alive:
        asked, askers = [], []
        for s in alive:
            family = load_family(s["family"])
            for q in checks.questions(family, s["objects"], s["attributes"]):
                asked.append((s["sample_id"], images[s["sample_id"]], q))
                askers.append(s["sample_id"])
        scores = models.get("vqa").option_scores(asked)
        per_sample: dict[str, tuple[list, list]] = {s["sample_id"]: ([], []) for s in alive}
        for sid, (_, _, q), values in zip(askers, asked, scores):
            per_sample[sid][0].append(q)
            per_sample[sid][1].append(values)
        for sid, (qs, values) in per_sample.items():
            verdicts[sid]["attributes"] = checks.answer_verdict(qs, values)

    rows = []
    for s in batch:
        failed = None
        for check in CHECKS:
            verdict = verdicts[s["sample_id"]].get(check)
            if verdict is None:
                if check == "background" and s["condition"] != "minimal":
                    verdict = checks.Verdict(
                        check, "n/a", "background is checked on Minimal images"
                    )
                else:
                    verdict = checks.Verdict(check, "skipped", f"failed {failed}")
            elif verdict.outcome == checks.FAIL and failed is None:
                # with all_checks, later checks still ran; the first failure decides
                failed = check
            rows.append(_row(s, verdict))
    return rows


_NA = checks.Verdict("background", "n/a")


def check_detector_vocabulary(models: Models, names: set[str]) -> None:
    """Every object class must fit the detector's text query (else: stop before any work)."""
    detector = models.get("detector")
    too_long = detector.too_long(sorted(names))
    if too_long:
        raise UsageError(
            "render",
            ", ".join(too_long[:5]),
            f"object name(s) too long for the detector's text query ({detector.max_text_len} "
            "tokens); shorten them in the vocabulary",
        )


def check_config(config: ValidateConfig) -> tuple[GenerationModel, GenerationModel, ModelEntry]:
    """The validate settings are valid (before any work; the pipelines check their parameters
    with it too); returns the detector's, the segmenter's and the VQA judge's entries."""
    if config.masks not in MASKS:
        raise UsageError("masks", config.masks, f"must be one of {', '.join(MASKS)}")
    overrides = config.settings
    det = get_generation_model("detector", config.detector)
    seg = get_generation_model("segmenter", config.segmenter)
    unknown_roles = sorted(set(overrides) - {"detector", "segmenter"})
    if unknown_roles:
        raise UsageError("settings", unknown_roles[0], "settings belong to detector or segmenter")
    check_settings(det, overrides.get("detector", {}))
    check_settings(seg, overrides.get("segmenter", {}))
    if config.batch_size < 1:
        raise UsageError("batch_size", config.batch_size, "must be at least 1")
    check_device(config.device)
    try:
        judge = get_model(config.vqa)
    except UsageError as exc:
        raise UsageError("vqa", config.vqa, exc.fix) from None
    if not judge.kind.prompts:  # the judge asks each question as the request's prompt
        raise UsageError("vqa", config.vqa, "must be a generative VLM (see `autocomp models`)")
    check_shard_args(None, config.num_shards)
    return det, seg, judge


def validate_stage(
    render: str | Path,
    out: str | Path,
    config: ValidateConfig,
    shard: int | None = None,
    progress: Callable[[int], None] | None = None,
    models: Models | None = None,
    images: Images | None = None,
    journal: Journal | None = None,
) -> dict[str, int]:
    """`autocomp validate`: verdict rows for the selected shards; returns counts. `images`:
    where the render table's images are (default: the render folder); `journal`: where each
    shard's verdicts are committed every COMMIT_EVERY batches (a killed shard then resumes
    after its last committed part, with the same batches: the same bytes)."""
    det, seg, judge = check_config(config)
    overrides = config.settings
    shards = check_shard_args(shard, config.num_shards)
    folder = prepare_folder(out)
    table, _ = read_stage(render, "render", "render", only=shard)
    require_columns(
        render,
        table.schema,
        ("sample_id", "image", "condition", "objects"),
        "give the render stage's output folder",
    )
    root = images or ImageFolder(Path(render) if Path(render).is_dir() else Path(render).parent)
    settings = {
        **det.settings,
        **overrides.get("detector", {}),
        **seg.settings,
        **overrides.get("segmenter", {}),
        "masks": config.masks,
    }
    record = validate_record(config, input_digest(render, "render", "render", only=shard))
    todo = unfinished(folder, "verdicts", shards, config.num_shards, record)
    summary = {"samples": 0, "passed": 0, "skipped_shards": len(shards) - len(todo)}
    if not todo:
        return summary
    models = models or Models(
        config.detector, config.segmenter, config.vqa, config.device, overrides
    )
    rows = table.to_pylist()
    check_detector_vocabulary(models, {o for r in rows for o in r["objects"]})
    for s in todo:
        mine = [r for r in rows if shard_of(r["concept_id"], config.num_shards) == s]
        out_rows = journal.resume(s, record) if journal else []  # whole batches, in order
        done = {r["sample_id"] for r in out_rows}
        pending = [r for r in mine if r["sample_id"] not in done]
        since: list[dict[str, Any]] = []
        for number, start in enumerate(range(0, len(pending), config.batch_size), 1):
            batch = pending[start : start + config.batch_size]
            got = validate_batch(batch, root, models, settings, config.all_checks)
            out_rows += got
            since += got
            summary["samples"] += len(batch)
            failed = {r["sample_id"] for r in got if r["outcome"] == checks.FAIL}
            summary["passed"] += len({r["sample_id"] for r in got} - failed)
            last = start + config.batch_size >= len(pending)
            if journal and (number % COMMIT_EVERY == 0 or last):
                journal.commit(s, record, since)
                since = []
            if progress:
                progress(len(batch))
        write_table(
            pa.Table.from_pylist(out_rows, VERDICTS_SCHEMA),
            shard_path(folder, "verdicts", s, config.num_shards),
            provenance("verdicts", config=record, shard=s),
        )
    return summary


def validate_record(config: ValidateConfig, input_sha256: str | None) -> dict[str, Any]:
    """What a verdicts shard is made with (recorded in every shard; resume keys on it): the
    models and their settings, the mask mode, all_checks, the shard count and the render
    input's content (`input_sha256`; None: what every shard of a run shares)."""
    det, seg, judge = check_config(config)
    overrides = config.settings
    record = {
        "detector": det.record(overrides.get("detector")),
        "segmenter": seg.record(overrides.get("segmenter")) if config.masks == "sam2" else None,
        "vqa": judge.record(),
        "masks": config.masks,
        "all_checks": config.all_checks,
        "num_shards": config.num_shards,
        "input_sha256": input_sha256,
    }
    return record if input_sha256 is not None else {k: v for k, v in record.items()
                                                    if k != "input_sha256"}  # fmt: skip
