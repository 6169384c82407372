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
    pieces = []
    for hole, after in zip(template.holes, template.segments[1:]):
        key = _hole_key(hole)
        if hole.kind == "relation":
            texts = [_render(family, key, None, lab) for lab in labels]
        elif family.is_relation:
            texts = [_render(family, key, obj, None) for obj in objects]
        else:
            texts = [_render(family, key, obj, lab) for obj in objects for lab in labels]
        pieces.append([t + after for t in texts])
    if not pieces:
        raise ProtocolError("a caption template without holes")
    head = template.segments[0]
    if head:
        pieces[0] = [head + t for t in pieces[0]]
    return pieces


def _own_code(relation: bool, n: int, kind: str, slot: int) -> int:
    """The code of a hole's own value (its slot's object and label): what the identity
    arrangement puts there."""
    return slot if relation or kind == "relation" else slot * n + slot


def _positive_from(row: CaptionRow, pieces: list[list[str]]) -> str:
    """The positive from the row's pieces: each hole's own text (as `_positive`, the head and the
    fixed text included, without rendering again)."""
    relation, n = row.family.is_relation, len(row.objects)
    return "".join(
        texts[_own_code(relation, n, hole.kind, hole.slot)]
        for hole, texts in zip(row.template.holes, pieces)
    )


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
    return not any(map(str.startswith, ordered[1:], ordered))


def _check_distinct(row: CaptionRow, pieces: list[list[str]], shape: Shape) -> None:
    relation, n = row.family.is_relation, len(row.objects)
    if _shape_injective(relation, n, shape) and all(map(_prefix_free, pieces)):
        return
    codes = [_codes_for(relation, n, kind, slot) for kind, slot in shape]
    texts = ["".join(p[c] for p, c in zip(pieces, cs)) for cs in zip(*codes)]
    if len(set(texts)) != len(texts):
        raise ProtocolError(f"candidate captions collapsed for {row.text!r}")


class _Group:
    """Rows of one (kind, N, hole order): per hole, every row's texts in one Arrow array, from
    which the caption of any (row, arrangement) is one `take` per hole and a join."""

    def __init__(self, relation: bool, n: int, shape: Shape, pieces: list[list[list[str]]]):
        self.rows = len(pieces)
        self.holes = []  # (texts, codes, width) per hole
        for h, (kind, slot) in enumerate(shape):
            width = _width(relation, n, kind)
            texts = pa.array([text for row in pieces for text in row[h]], pa.string())
            if len(texts) != width * self.rows:
                raise ProtocolError(
                    f"a {kind} hole with {len(texts) // self.rows} texts, not {width}"
                )
            self.holes.append((texts, _codes(relation, n, kind, slot), width))

    def fill(self, rows: np.ndarray, chosen: np.ndarray) -> pa.Array:
        """The caption of arrangement chosen[k] of the group's row rows[k], for each k."""
        columns = [texts.take(rows * width + codes[chosen]) for texts, codes, width in self.holes]
        return pc.binary_join_element_wise(*columns, "")


def _same_scene(row: CaptionRow) -> frozenset[int]:
    if row.family.is_relation:
        return _relation_same_scene(row.family, row.labels)
    return _attribute_same_scene(len(row.objects))


_NO_SETS = _LayoutArrays(  # N = 1: no Swap, no Confusion
    confusion=np.zeros(0, np.int32),
    confusion_same_scene=np.zeros(0, np.bool_),
    swap=np.zeros(0, np.int32),
    swap_same_scene=np.zeros(0, np.bool_),
    swap_in_confusion=np.zeros(0, np.int32),
)


def _row_layout(row: CaptionRow, protocol: str) -> _LayoutArrays:
    return _layout_arrays(row.family.is_relation, len(row.objects), protocol, _same_scene(row))


def _lists(lengths: np.ndarray, values: pa.Array) -> pa.ListArray:
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values)


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
    """The benchmark columns (`store.catalog.schemas.BENCHMARK_FIELDS`) for a batch of rows."""
    positives: list[str] = [""] * len(rows)
    groups: dict[tuple[bool, int, Shape], list[int]] = {}
    pieces: dict[int, list[list[str]]] = {}  # per row of N > 1
    for i, row in enumerate(rows):
        n = len(row.objects)
        if n == 1:
            positives[i] = _positive(row)
            continue
        shape = tuple((hole.kind, hole.slot) for hole in row.template.holes)
        pieces[i] = row_pieces = _pieces(row)
        positives[i] = _positive_from(row, row_pieces)
        _check_distinct(row, row_pieces, shape)
        groups.setdefault((row.family.is_relation, n, shape), []).append(i)

    which = np.full(len(rows), -1, np.int64)  # each row's group (-1: N = 1, no group)
    local = np.zeros(len(rows), np.int64)  # its place in the group
    built = []
    for g, ((relation, n, shape), members) in enumerate(groups.items()):
        built.append(_Group(relation, n, shape, [pieces[i] for i in members]))
        which[members], local[members] = g, np.arange(len(members))
        _check_identity(built[-1], arrangements(relation, n).identity, members, positives)

    layouts: dict[int, tuple[int, _LayoutArrays]] = {id(_NO_SETS): (0, _NO_SETS)}
    ids = np.zeros(len(rows), np.int64)  # each row's layout, numbered in `layouts`
    for members in groups.values():
        for i in members:
            layout = _row_layout(rows[i], protocol)
            ids[i] = layouts.setdefault(id(layout), (len(layouts), layout))[0]
    table = [layout for _, layout in layouts.values()]
    columns: dict[str, pa.Array] = {
        "caption": pa.array(positives, pa.string()),
        "caption_rewritten": pa.array([p != r.text for p, r in zip(positives, rows)], pa.bool_()),
        "protocol": pa.array([protocol] * len(rows), pa.string()),
    }
    for name in ("swap", "confusion"):
        chosen, lengths = _gather([getattr(t, name) for t in table], ids)
        texts = _fill(built, np.repeat(which, lengths), np.repeat(local, lengths), chosen)
        columns[f"{name}_negatives"] = _lists(lengths, texts)
        columns[f"{name}_arrangements"] = _lists(lengths, pa.array(chosen))
        same, _ = _gather([getattr(t, f"{name}_same_scene") for t in table], ids)
        columns[f"{name}_same_scene"] = _lists(lengths, pa.array(same))
        if name == "swap":
            position, _ = _gather([t.swap_in_confusion for t in table], ids)
            columns["swap_in_confusion"] = _lists(lengths, pa.array(position))
        columns[f"{name}_chance"] = _chance(lengths)
    sanity = [_sanity_sets(row) if len(row.objects) == 1 else ([], []) for row in rows]
    for k, name in enumerate(("vary_attribute", "vary_object")):
        values = [s[k] for s in sanity]
        columns[f"{name}_negatives"] = pa.array(values, pa.list_(pa.string()))
        columns[f"{name}_chance"] = _chance(np.array([len(v) for v in values], np.int64))
    return columns


def _gather(table: list[np.ndarray], ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`table[i]` for each i of `ids`, concatenated, and each one's length (no loop per row)."""
    sizes = np.array([len(t) for t in table], np.int64)
    firsts = np.cumsum(sizes) - sizes  # where each table entry starts in `flat`
    flat = np.concatenate(table)
    lengths = sizes[ids]
    row_starts = np.cumsum(lengths) - lengths  # where each row starts in the result
    within = np.arange(int(lengths.sum())) - np.repeat(row_starts, lengths)
    return flat[np.repeat(firsts[ids], lengths) + within], lengths


def _fill(
    groups: list[_Group], which: np.ndarray, local: np.ndarray, chosen: np.ndarray
) -> pa.Array:
    """Captions of (group which[k], its row local[k], arrangement chosen[k]), in order: one fill
    when one group holds them all (a batch of one family and N), else per group, then put back
    in order with one take."""
    if len(groups) == 1 or not len(chosen):
        return groups[0].fill(local, chosen) if groups else pa.array([], pa.string())
    places = [np.flatnonzero(which == g) for g in range(len(groups))]
    parts = [group.fill(local[p], chosen[p]) for group, p in zip(groups, places)]
    order = np.empty(len(chosen), np.int64)
    order[np.concatenate(places)] = np.arange(len(chosen))
    return pa.concat_arrays(parts).take(order)


def _check_identity(group: _Group, identity: int, members: list[int], positives: list[str]) -> None:
    """The identity arrangement of every row of a group gives its positive."""
    filled = group.fill(np.arange(len(members)), np.full(len(members), identity))
    expected = pa.array([positives[i] for i in members], pa.string())
    same = pc.equal(filled, expected)
    if pc.all(same).as_py():
        return
    bad = same.to_pylist().index(False)
    raise ProtocolError(
        f"identity arrangement {filled[bad].as_py()!r} != {expected[bad].as_py()!r}"
    )
