"""The validation checks as pure functions (the models that feed them are in detection.py
and autocomp.generation.vqa; the stage that runs them is autocomp.generation.validate).

Image input: `normalize_image` turns what a generator or a user hands us into 8-bit RGB, or
rejects it with a reason: grayscale and palette images are converted; RGBA/LA with every pixel
opaque lose the alpha channel; images with any transparent pixel are rejected (what lies behind
them is undefined, so the background check could not be answered); a truncated or corrupt file is
rejected.

Object presence and count (paper: V_obj): the detector runs once per object class with that
class's name as the whole text query, so every box it returns belongs to that class. Boxes of one
class whose IoU exceeds `merge_iou` are one object (greedy, highest score first: the duplicate
boxes a DETR-style detector emits for one object). Boxes of *different* classes are never merged:
each query counts only its own class. A pair noun ("gloves") expects two objects. The check
passes only if every class's count equals the concept's exactly.

Background (Minimal only): pixels outside the union of the object masks whose grayscale
brightness (PIL's "L": 0.299 R + 0.587 G + 0.114 B) is >= `brightness` must be at least
`min_white_fraction` of the non-object pixels (paper: 190 and 70 %).

Attribute / relation correctness (paper: V_attr): one question per object (attribute families,
"What color is the monitor?") or per relation (relation families), answered by choosing among the
family's vocabulary (relations: one option per meaning); every answer must be right.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autocomp.protocol.family import Family

PASS, FAIL = "pass", "fail"


class ImageRejected(ValueError):
    """An input image that cannot be validated; the message is the reason."""


def normalize_image(path: Any) -> tuple[Any, str]:
    """(RGB PIL image, what was done to it) or ImageRejected."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            image.load()
            mode = image.mode
            if mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in image.info):
                rgba = image.convert("RGBA")
                if rgba.getchannel("A").getextrema()[0] < 255:
                    raise ImageRejected(f"image has transparent pixels (mode {mode})")
                return rgba.convert("RGB"), f"{mode}->RGB (opaque alpha dropped)"
            if mode == "RGB":
                return image.copy(), ""
            if mode in ("I;16", "I", "F"):
                raise ImageRejected(f"image mode {mode} is not an 8-bit image")
            return image.convert("RGB"), f"{mode}->RGB"
    except FileNotFoundError:
        raise ImageRejected("image file is missing") from None
    except (UnidentifiedImageError, OSError, SyntaxError, Image.DecompressionBombError) as exc:
        raise ImageRejected(f"image cannot be decoded ({exc})") from None


# ----------------------------------------------------------------------------- counts


def expected_counts(family: Family, objects: Sequence[str]) -> dict[str, int]:
    """Object class -> number of instances the concept puts in the image."""
    counts: Counter[str] = Counter()
    for name in objects:
        counts[name] += family.objects.by_name[name].instances
    return dict(counts)


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two (x0, y0, x1, y1) boxes."""
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def merge_boxes(
    boxes: Sequence[Sequence[float]], scores: Sequence[float], merge_iou: float
) -> list[int]:
    """Indices of the boxes kept after merging overlaps of one class (greedy by score)."""
    order = sorted(range(len(boxes)), key=lambda i: (-scores[i], i))
    kept: list[int] = []
    for i in order:
        if all(iou(boxes[i], boxes[j]) <= merge_iou for j in kept):
            kept.append(i)
    return sorted(kept)


@dataclass(frozen=True)
class Verdict:
    check: str
    outcome: str  # pass | fail
    reason: str = ""
    detail: dict[str, Any] | None = None


def count_verdict(expected: dict[str, int], found: dict[str, int]) -> Verdict:
    """Pass only if every class is found exactly as often as the concept has it."""
    wrong = [
        f"{name}: expected {want}, found {found.get(name, 0)}"
        for name, want in expected.items()
        if found.get(name, 0) != want
    ]
    detail = {"expected": expected, "found": {k: found.get(k, 0) for k in expected}}
    if wrong:
        return Verdict("objects", FAIL, "; ".join(wrong), detail)
    return Verdict("objects", PASS, "", detail)


# ----------------------------------------------------------------------------- background


def white_fraction(image: Any, object_mask: Any, brightness: int) -> float | None:
    """Share of non-object pixels with grayscale >= brightness (None: no such pixels)."""
    import numpy as np

    gray = np.asarray(image.convert("L"))
    mask = np.asarray(object_mask, dtype=bool)
    if mask.shape != gray.shape:
        raise ValueError(f"mask shape {mask.shape} != image shape {gray.shape}")
    background = ~mask
    total = int(background.sum())
    if total == 0:
        return None
    return float((gray[background] >= brightness).sum()) / total


def background_verdict(
    image: Any, object_mask: Any, brightness: int = 190, min_white_fraction: float = 0.7
) -> Verdict:
    fraction = white_fraction(image, object_mask, brightness)
    if fraction is None:
        return Verdict("background", FAIL, "the objects cover the whole image")
    detail = {
        "white_fraction": round(fraction, 6),
        "brightness": brightness,
        "min_white_fraction": min_white_fraction,
    }
    if fraction >= min_white_fraction:
        return Verdict("background", PASS, "", detail)
    reason = (
        f"{100 * fraction:.1f} % of the background is white (>= {brightness}); "
        f"{100 * min_white_fraction:g} % needed"
    )
    return Verdict("background", FAIL, reason, detail)


def box_mask(size: tuple[int, int], boxes: Sequence[Sequence[float]]) -> Any:
    """A boolean (height, width) mask of the union of boxes (the no-segmenter fallback)."""
    import numpy as np

    width, height = size
    mask = np.zeros((height, width), dtype=bool)
    for x0, y0, x1, y1 in boxes:
        mask[
            max(0, int(y0)) : min(height, int(round(y1))),
            max(0, int(x0)) : min(width, int(round(x1))),
        ] = True
    return mask


# ----------------------------------------------------------------------------- questions


@dataclass(frozen=True)
class Question:
    """One VQA question: the prompt, the answer options, and which options are right."""

    text: str
    options: tuple[str, ...]
    correct: frozenset[str]
    about: str  # what it asks about, for reasons ("monitor", "cup -> lamp")


def _noun(family: Family, name: str) -> tuple[str, str]:
    return name, "are" if family.objects.by_name[name].pair else "is"


def questions(family: Family, objects: Sequence[str], labels: Sequence[str]) -> list[Question]:
    """The questions of one concept, with the family's vocabulary as the answer options."""
    out = []
    if not family.is_relation:
        options = family.labels.names
        for obj, label in zip(objects, labels):
            noun, be = _noun(family, obj)
            text = family.question.format(label=family.attribute_label, be=be, object=noun)
            out.append(Question(text, options, frozenset([label]), obj))
        return out
    by_meaning: dict[str, str] = {}
    for entry in family.labels.entries:  # one option per meaning: synonyms are not answers
        by_meaning.setdefault(str(entry.meaning), entry.name)
    options = tuple(by_meaning.values())
    for j, relation in enumerate(labels):
        subject, be = _noun(family, objects[j])
        right = frozenset(o for o in options if family.meaning(o) == family.meaning(relation))
        text = family.question.format(subject=subject, be=be, object=objects[j + 1])
        out.append(Question(text, options, right, f"{objects[j]} -> {objects[j + 1]}"))
    return out


def answer_verdict(asked: Sequence[Question], scores: Sequence[Sequence[float]]) -> Verdict:
    """Pick each question's best-scoring option (a tie at the top is not an answer)."""
    wrong, answers = [], []
    for question, values in zip(asked, scores):
        best = max(values)
        top = [o for o, v in zip(question.options, values) if v == best]
        answer = top[0] if len(top) == 1 else None
        answers.append(answer)
        if answer not in question.correct:
            said = answer if answer is not None else f"a tie of {', '.join(top)}"
            wrong.append(
                f"{question.about}: answered {said}, expected {sorted(question.correct)[0]}"
            )
    detail = {"answers": answers}
    if wrong:
        return Verdict("attributes", FAIL, "; ".join(wrong), detail)
    return Verdict("attributes", PASS, "", detail)
