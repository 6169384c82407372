"""The candidate sets of a batch of captions as Arrow columns.

The values are those of `negatives.build_candidates`, row for row (tests/protocol/
test_candidate_columns.py checks it), but built column-wise:

- per row, only the few texts each hole can take are rendered (N^2 per object hole of an
  attribute family, N or N-1 otherwise; rendered texts are cached per process);
- every caption of a group of rows with the same (kind, N, hole order) is then assembled by
  Arrow: per hole, a `take` of its texts by the hole's code in each arrangement, and one
  element-wise join; no caption becomes a Python string;
- which arrangements each set keeps (and their flags) come from numpy tables computed once per
  (kind, N, protocol, same-scene set) and process.

The two checks of `build_candidates` are kept: the identity arrangement must give the positive
(compared column-wise), and the captions of one row must be distinct. Distinctness is proved
without hashing every caption when each hole's texts are prefix-free (then the joined caption
decodes back to its arrangement); a row whose texts are not falls back to comparing its
captions as strings.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from autocomp.errors import ProtocolError
from autocomp.protocol.binding import Hole, Template
from autocomp.protocol.family import Family
from autocomp.protocol.negatives import (
    _attribute_same_scene,
    _codes_for,
    _layout,
    _relation_same_scene,
    arrangements,
)

Shape = tuple[tuple[str, int], ...]  # (hole kind, slot) per hole, in text order


@dataclass(frozen=True)
class CaptionRow:
    """One caption of a batch: its concept, its text and the template bound from it."""

    family: Family
    objects: Sequence[str]
    labels: Sequence[str]
    text: str
    template: Template


@dataclass(frozen=True)
class _LayoutArrays:
    """`negatives._Layout` as numpy arrays (one per set and column)."""

    confusion: np.ndarray
    confusion_same_scene: np.ndarray
    swap: np.ndarray
    swap_same_scene: np.ndarray
    swap_in_confusion: np.ndarray


@functools.lru_cache(maxsize=1024)
def _layout_arrays(relation: bool, n: int, protocol: str, same: frozenset[int]) -> _LayoutArrays:
    layout = _layout(relation, n, protocol, same)
    return _LayoutArrays(
        confusion=np.array(layout.confusion, np.int32),
        confusion_same_scene=np.array(layout.confusion_same_scene, np.bool_),
        swap=np.array(layout.swap, np.int32),
        swap_same_scene=np.array(layout.swap_same_scene, np.bool_),
        swap_in_confusion=np.array(layout.swap_in_confusion, np.int32),
    )


@functools.lru_cache(maxsize=256)
def _codes(relation: bool, n: int, kind: str, slot: int) -> np.ndarray:
    return np.array(_codes_for(relation, n, kind, slot), np.int64)


def _width(relation: bool, n: int, kind: str) -> int:
    """How many texts a hole of this kind can take (its code values)."""
    if kind == "relation":
        return n - 1
    return n if relation else n * n


@functools.lru_cache(maxsize=256)
def _shape_injective(relation: bool, n: int, shape: Shape) -> bool:
    """Whether the holes' codes tell every arrangement apart (each slot has a hole)."""
    codes = [_codes_for(relation, n, kind, slot) for kind, slot in shape]
    return len(set(zip(*codes))) == len(arrangements(relation, n))


@functools.lru_cache(maxsize=200_000)
def _render(family: Family, hole_key: tuple, obj: str | None, label: str | None) -> str:
    """A hole's text for a value, cached on what the text depends on."""
    kind, capital, article, article_space, pair, adjective, between = hole_key
    hole = Hole(kind, 0, 0, 0, capital, article, article_space, pair, adjective, between)
    return hole.render(family, obj, label)


def _hole_key(hole: Hole) -> tuple:
    """What a hole's text depends on besides its value (not its place in the caption)."""
    return (
        hole.kind,
        hole.capital,
        hole.article,
        hole.article_space,
        hole.pair,
        hole.adjective,
        hole.between,
    )


def _pieces(row: CaptionRow) -> list[list[str]]:
    """Per hole, its text for each code followed by the fixed text after it (the caption's head
    in front of the first hole's texts); as `negatives._hole_pieces`."""
    family, objects, labels, template = row.family, row.objects, row.labels, row.template
    n = len(objects)
    pieces = []
    for hole, after in zip(template.holes, template.segments[1:]):
        key = _hole_key(hole)
        if hole.kind == "relation":
            texts = [_render(family, key, None, lab) for lab in labels]
        elif family.is_relation:
            texts = [_render(family, key, obj, None) for obj in objects]
        else:
            texts = [_render(family, key, objects[c // n], labels[c % n]) for c in range(n * n)]
        pieces.append([t + after for t in texts])
    if not pieces:
        raise ProtocolError("a caption template without holes")
    head = template.segments[0]
    if head:
        pieces[0] = [head + t for t in pieces[0]]
    return pieces


def _positive(row: CaptionRow) -> str:
    """The caption filled with its own concept (as `Template.fill`, with cached texts)."""
    family, objects, labels, template = row.family, row.objects, row.labels, row.template
    attribute = not family.is_relation
    parts = [template.segments[0]]
    for hole, segment in zip(template.holes, template.segments[1:]):
        if hole.kind == "object":
            label = labels[hole.slot] if attribute else None
            parts.append(_render(family, _hole_key(hole), objects[hole.slot], label))
        else:
            parts.append(_render(family, _hole_key(hole), None, labels[hole.slot]))
        parts.append(segment)
    return "".join(parts)


def _prefix_free(texts: list[str]) -> bool:
    """No text is a prefix of another (nor equal to one): in sorted order, a prefix of any
    later text is a prefix of the text right after it."""
    ordered = sorted(texts)
    return not any(b.startswith(a) for a, b in zip(ordered, ordered[1:]))


def _check_distinct(row: CaptionRow, pieces: list[list[str]], shape: Shape) -> None:
    relation, n = row.family.is_relation, len(row.objects)
    if _shape_injective(relation, n, shape) and all(map(_prefix_free, pieces)):
        return
    codes = [_codes_for(relation, n, kind, slot) for kind, slot in shape]
    texts = ["".join(p[c] for p, c in zip(pieces, cs)) for cs in zip(*codes)]
    if len(set(texts)) != len(texts):
        raise ProtocolError(f"candidate captions collapsed for {row.text!r}")


def _group_texts(relation: bool, n: int, shape: Shape, pieces: list[list[list[str]]]) -> pa.Array:
    """Every arrangement's caption for each row of one group, rows one after the other, each
    in canonical order."""
    rows = np.arange(len(pieces), dtype=np.int64)[:, None]
    columns = []
    for h, (kind, slot) in enumerate(shape):
        width = _width(relation, n, kind)
        flat = pa.array([text for row in pieces for text in row[h]], pa.string())
        if len(flat) != width * len(pieces):
            raise ProtocolError(f"a {kind} hole with {len(flat) // len(pieces)} texts, not {width}")
        columns.append(flat.take((rows * width + _codes(relation, n, kind, slot)).ravel()))
    return pc.binary_join_element_wise(*columns, "")


def _same_scene(row: CaptionRow) -> frozenset[int]:
    if row.family.is_relation:
        return _relation_same_scene(row.family, row.labels)
    return _attribute_same_scene(len(row.objects))


def _row_layout(row: CaptionRow, protocol: str) -> _LayoutArrays:
    return _layout_arrays(row.family.is_relation, len(row.objects), protocol, _same_scene(row))


def _lists(lengths: np.ndarray, values: pa.Array) -> pa.ListArray:
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def _chance(lengths: np.ndarray) -> pa.Array:
    """1 / (1 + negatives) per row, null where there is none (as `negatives.chance`)."""
    return pa.array(1.0 / (1 + lengths.astype(np.float64)), pa.float64(), mask=lengths == 0)


def _sanity_sets(row: CaptionRow) -> tuple[list[str], list[str]]:
    """N=1 (attribute families): the object with every other attribute, and the attribute with
    every other object."""
    family, objects, labels, template = row.family, row.objects, row.labels, row.template
    if len(objects) != 1 or family.is_relation:
        return [], []
    vary_attribute = [
        template.fill(family, objects, [a]) for a in family.labels.names if a != labels[0]
    ]
    vary_object = [
        template.fill(family, [o], labels) for o in family.objects.names if o != objects[0]
    ]
    return vary_attribute, vary_object


def candidate_columns(rows: Sequence[CaptionRow], protocol: str) -> dict[str, pa.Array]:
    """The benchmark columns (`store.tables.BENCHMARK_FIELDS`) for a batch of rows."""
    positives = [_positive(row) for row in rows]
    groups: dict[tuple[bool, int, Shape], list[int]] = {}
    pieces: list[list[list[str]] | None] = [None] * len(rows)
    for i, row in enumerate(rows):
        n = len(row.objects)
        if n == 1:
            continue
        shape = tuple((hole.kind, hole.slot) for hole in row.template.holes)
        pieces[i] = _pieces(row)
        _check_distinct(row, pieces[i], shape)
        groups.setdefault((row.family.is_relation, n, shape), []).append(i)

    starts = np.zeros(len(rows), np.int64)  # where each row's captions start in `pool`
    pool_parts, offset = [], 0
    for (relation, n, shape), members in groups.items():
        pool_parts.append(_group_texts(relation, n, shape, [pieces[i] for i in members]))
        size = len(arrangements(relation, n))
        starts[members] = offset + size * np.arange(len(members))
        offset += size * len(members)
    pool = pa.concat_arrays(pool_parts) if pool_parts else pa.array([], pa.string())
    multi = [i for i, row in enumerate(rows) if len(row.objects) > 1]
    _check_identity(rows, positives, pool, starts, multi)

    layouts = {
        i: _layout_arrays(
            rows[i].family.is_relation, len(rows[i].objects), protocol, _same_scene(rows[i])
        )
        for i in multi
    }
    columns: dict[str, pa.Array] = {
        "caption": pa.array(positives, pa.string()),
        "caption_rewritten": pa.array([p != r.text for p, r in zip(positives, rows)], pa.bool_()),
        "protocol": pa.array([protocol] * len(rows), pa.string()),
    }
    for name in ("swap", "confusion"):
        lengths = np.zeros(len(rows), np.int32)
        index, arrangement, same, position = [], [], [], []
        for i, layout in layouts.items():
            chosen = getattr(layout, name)
            lengths[i] = len(chosen)
            arrangement.append(chosen)
            index.append(starts[i] + chosen)
            same.append(getattr(layout, f"{name}_same_scene"))
            if name == "swap":
                position.append(layout.swap_in_confusion)
        columns[f"{name}_negatives"] = _lists(lengths, pool.take(_concat(index, np.int64)))
        columns[f"{name}_arrangements"] = _lists(lengths, pa.array(_concat(arrangement, np.int32)))
        columns[f"{name}_same_scene"] = _lists(lengths, pa.array(_concat(same, np.bool_)))
        if name == "swap":
            columns["swap_in_confusion"] = _lists(lengths, pa.array(_concat(position, np.int32)))
        columns[f"{name}_chance"] = _chance(lengths)
    sanity = [_sanity_sets(row) for row in rows]
    for k, name in enumerate(("vary_attribute", "vary_object")):
        values = [s[k] for s in sanity]
        columns[f"{name}_negatives"] = pa.array(values, pa.list_(pa.string()))
        columns[f"{name}_chance"] = _chance(np.array([len(v) for v in values], np.int64))
    return columns


def _check_identity(
    rows: Sequence[CaptionRow],
    positives: list[str],
    pool: pa.Array,
    starts: np.ndarray,
    multi: list[int],
) -> None:
    """The identity arrangement of every row gives its positive."""
    if not multi:
        return
    identity = np.array(
        [arrangements(rows[i].family.is_relation, len(rows[i].objects)).identity for i in multi],
        np.int64,
    )
    filled = pool.take(starts[multi] + identity)
    expected = pa.array([positives[i] for i in multi], pa.string())
    if pc.all(pc.equal(filled, expected)).as_py():
        return
    bad = next(k for k, ok in enumerate(pc.equal(filled, expected).to_pylist()) if not ok)
    raise ProtocolError(
        f"identity arrangement {filled[bad].as_py()!r} != {positives[multi[bad]]!r}"
    )
