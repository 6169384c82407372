"""Hard negatives: the exact Swap and Confusion candidate sets (paper Section 3, Stage 3).

For a concept with N objects, arrangements are indexed in one canonical order, the same for
every caption of a (family kind, N), so that candidate k of a Minimal and of a Contextual caption
describe the same arrangement, and analyses can classify errors from the index alone:

- attribute families: an arrangement gives object slot i the object p_i and the attribute q_i,
  with p and q in range(N)^N; index = base-N number of (p_0..p_{N-1}, q_0..q_{N-1}).
- relation families: p in range(N)^N for the objects, q in range(N-1)^(N-1) for the relations
  (drawn from those present in the caption); index = mixed-radix number of (p, q).

Confusion = every arrangement but the identity: N^(2N) - 1 (attribute) or N^N (N-1)^(N-1) - 1
(relation). Swap = permuted attributes over fixed objects (attribute) or permuted objects over
fixed relations (relation): N! - 1, each also in Confusion. Each candidate is the caption's
template filled at all holes at once (never sequential string replacement), with articles and
"pair of" re-chosen.

A candidate that describes the same scene as the positive (same multiset of object-attribute
pairs; same set of relation facts after inverses and synonyms) is flagged. Protocol "paper" keeps
flagged candidates (as the paper does), protocol "strict" drops them. Chance per item is
1 / (1 + number of negatives).

At N=1 Swap and Confusion are empty; attribute families then get the sanity sets of the paper's
Table 14: the object with every other attribute ("vary attribute") and the attribute with every
other object ("vary object").
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from autocomp.errors import ProtocolError
from autocomp.protocol.binding import Template, bind
from autocomp.protocol.concepts import normalized_triple
from autocomp.protocol.family import Family

PROTOCOLS = ("paper", "strict")


@dataclass(frozen=True)
class Arrangements:
    """The canonical arrangement list of one (kind, N)."""

    n: int
    relation: bool
    objects: tuple[tuple[int, ...], ...]  # p per arrangement
    labels: tuple[tuple[int, ...], ...]  # q per arrangement
    identity: int
    swap: tuple[int, ...]  # arrangement indices of the Swap set, in permutation order

    def __len__(self) -> int:
        return len(self.objects)


@functools.lru_cache(maxsize=32)
def arrangements(relation: bool, n: int) -> Arrangements:
    """All arrangements in canonical order, the identity's index and the Swap indices."""
    label_slots = n - 1 if relation else n
    label_values = n - 1 if relation else n
    obj_list, lab_list = [], []
    for p in itertools.product(range(n), repeat=n):
        for q in itertools.product(range(label_values), repeat=label_slots):
            obj_list.append(p)
            lab_list.append(q)
    index = {(p, q): i for i, (p, q) in enumerate(zip(obj_list, lab_list))}
    ident_p, ident_q = tuple(range(n)), tuple(range(label_slots))
    identity = index[(ident_p, ident_q)]
    if relation:
        swap = [index[(perm, ident_q)] for perm in itertools.permutations(range(n))]
    else:
        swap = [index[(ident_p, perm)] for perm in itertools.permutations(range(n))]
    swap.remove(identity)
    return Arrangements(n, relation, tuple(obj_list), tuple(lab_list), identity, tuple(swap))


def expected_counts(relation: bool, n: int) -> tuple[int, int]:
    """(|Swap|, |Confusion|) under the paper protocol, from the paper's formulas."""
    swap = math.factorial(n) - 1
    if relation:
        return swap, n**n * (n - 1) ** (n - 1) - 1
    return swap, n ** (2 * n) - 1


@dataclass
class CandidateSets:
    """The positive and its candidate sets for one caption."""

    caption: str
    swap: list[str] = field(default_factory=list)
    swap_arrangements: list[int] = field(default_factory=list)
    swap_same_scene: list[bool] = field(default_factory=list)
    swap_in_confusion: list[int] = field(default_factory=list)
    confusion: list[str] = field(default_factory=list)
    confusion_arrangements: list[int] = field(default_factory=list)
    confusion_same_scene: list[bool] = field(default_factory=list)
    vary_attribute: list[str] = field(default_factory=list)
    vary_object: list[str] = field(default_factory=list)


def _hole_codes(template: Template, arr: Arrangements) -> list[list[int]]:
    """Per hole, the index of its piece for each arrangement (see _hole_pieces)."""
    return [_codes_for(arr.relation, arr.n, hole.kind, hole.slot) for hole in template.holes]


@functools.lru_cache(maxsize=256)
def _codes_for(relation: bool, n: int, kind: str, slot: int) -> list[int]:
    arr = arrangements(relation, n)
    if kind == "relation":
        return [q[slot] for q in arr.labels]
    if relation:
        return [p[slot] for p in arr.objects]
    return [p[slot] * n + q[slot] for p, q in zip(arr.objects, arr.labels)]


def _hole_pieces(
    family: Family, template: Template, objects: Sequence[str], labels: Sequence[str]
) -> list[list[str]]:
    """Per hole, its text for each code, followed by the fixed text after it."""
    n = len(objects)
    pieces = []
    for hole, after in zip(template.holes, template.segments[1:]):
        if hole.kind == "relation":
            texts = [hole.render(family, label=lab) for lab in labels]
        elif family.is_relation:
            texts = [hole.render(family, obj) for obj in objects]
        else:
            texts = [hole.render(family, objects[c // n], labels[c % n]) for c in range(n * n)]
        pieces.append([t + after for t in texts])
    return pieces


def _fill_all(
    family: Family,
    template: Template,
    objects: Sequence[str],
    labels: Sequence[str],
    arr: Arrangements,
) -> list[str]:
    """The caption for every arrangement, in canonical order."""
    columns = []
    for pieces, codes in zip(
        _hole_pieces(family, template, objects, labels), _hole_codes(template, arr)
    ):
        columns.append(list(map(pieces.__getitem__, codes)))
    if not columns:
        raise ProtocolError("a caption template without holes")
    head = template.segments[0]
    if head:
        columns[0] = [head + c for c in columns[0]]
    return list(map("".join, zip(*columns)))


@functools.lru_cache(maxsize=256)
def _attribute_same_scene(n: int) -> frozenset[int]:
    """Arrangements that only reorder the positive's (object, attribute) pairs."""
    arr = arrangements(False, n)
    return frozenset(
        i
        for i, (p, q) in enumerate(zip(arr.objects, arr.labels))
        if p == q and sorted(p) == list(range(n)) and i != arr.identity
    )


def _relation_same_scene(family: Family, labels: Sequence[str]) -> frozenset[int]:
    meanings = tuple(family.meaning(lab) for lab in labels)
    return _relation_same_scene_cached(family, meanings)


@functools.lru_cache(maxsize=1024)
def _relation_same_scene_cached(family: Family, meanings: tuple[str, ...]) -> frozenset[int]:
    n = len(meanings) + 1
    arr = arrangements(True, n)

    def facts(p: tuple[int, ...], q: tuple[int, ...]) -> frozenset:
        return frozenset(
            normalized_triple(family, str(p[j]), meanings[q[j]], str(p[j + 1]))
            for j in range(n - 1)
        )

    positive = facts(tuple(range(n)), tuple(range(n - 1)))
    return frozenset(
        i
        for i, (p, q) in enumerate(zip(arr.objects, arr.labels))
        if i != arr.identity and facts(p, q) == positive
    )


@dataclass(frozen=True)
class _Layout:
    """Which arrangements each set keeps, in order: the same for every caption of one
    (kind, N, protocol, same-scene set), so it is computed once, not per caption."""

    confusion: tuple[int, ...]
    confusion_same_scene: tuple[bool, ...]
    swap: tuple[int, ...]
    swap_same_scene: tuple[bool, ...]
    swap_in_confusion: tuple[int, ...]


@functools.lru_cache(maxsize=1024)
def _layout(relation: bool, n: int, protocol: str, same: frozenset[int]) -> _Layout:
    arr = arrangements(relation, n)
    keep = [
        i for i in range(len(arr)) if i != arr.identity and not (protocol == "strict" and i in same)
    ]
    position = {i: k for k, i in enumerate(keep)}
    swap = [i for i in arr.swap if i in position]
    return _Layout(
        confusion=tuple(keep),
        confusion_same_scene=tuple(i in same for i in keep),
        swap=tuple(swap),
        swap_same_scene=tuple(i in same for i in swap),
        swap_in_confusion=tuple(position[i] for i in swap),
    )


def build_candidates(
    family: Family,
    objects: Sequence[str],
    labels: Sequence[str],
    caption: str,
    protocol: str = "paper",
    template: Template | None = None,
) -> CandidateSets:
    """Swap and Confusion sets (and the N=1 sanity sets) for one caption of one concept.

    Raises binding.BindingError if the caption does not state the concept.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, not {protocol!r}")
    template = template or bind(family, objects, labels, caption)
    n = len(objects)
    positive = template.fill(family, objects, labels)
    out = CandidateSets(caption=positive)
    if n == 1:
        if not family.is_relation:
            out.vary_attribute = [
                template.fill(family, objects, [a]) for a in family.labels.names if a != labels[0]
            ]
            out.vary_object = [
                template.fill(family, [o], labels) for o in family.objects.names if o != objects[0]
            ]
        return out

    arr = arrangements(family.is_relation, n)
    texts = _fill_all(family, template, objects, labels, arr)
    if texts[arr.identity] != positive:
        raise ProtocolError(f"identity arrangement {texts[arr.identity]!r} != {positive!r}")
    if len(set(texts)) != len(texts):
        raise ProtocolError(f"candidate captions collapsed for {caption!r}")
    same = _relation_same_scene(family, labels) if family.is_relation else _attribute_same_scene(n)

    layout = _layout(family.is_relation, n, protocol, same)
    out.confusion = [texts[i] for i in layout.confusion]
    out.confusion_arrangements = list(layout.confusion)
    out.confusion_same_scene = list(layout.confusion_same_scene)
    out.swap = [texts[i] for i in layout.swap]
    out.swap_arrangements = list(layout.swap)
    out.swap_same_scene = list(layout.swap_same_scene)
    out.swap_in_confusion = list(layout.swap_in_confusion)
    return out


def chance(negatives: int) -> float | None:
    """Chance accuracy of one item: 1 / (1 + negatives); None when there is no negative."""
    return 1.0 / (1 + negatives) if negatives else None
