"""Concepts: what a scene should show, sampled reproducibly with a balanced label prior.

A concept is N distinct objects with N distinct attributes (attribute families) or N-1 relations
of distinct meaning chaining the objects (relation families). Concepts in one sample are unique
as scenes: "a blue sphere and a red cube" is the same concept as "a red cube and a blue sphere",
and "A above B" the same as "B under A".

Sampling is seeded with a seed derived from (seed, family, n) by SHA-256, and uses
`random.Random`, whose integer stream is stable across machines, processes and Python's hash
seed. Each vocabulary slot draws from a balanced pool: a value is drawn again only after every
other value has been drawn as often (a shuffled deck, reshuffled when empty), restricted to the
values allowed next to what the concept already holds. The realised counts per object and label
are the *label prior* that later stages measure validation's shift against; they are recorded.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from autocomp.errors import UsageError
from autocomp.protocol.family import Family, Vocabulary

MAX_CONSECUTIVE_DUPLICATES = 200
ENUMERATE_LIMIT = 2_000_000


@dataclass(frozen=True)
class Concept:
    """One scene to render: objects and their attributes (or the relations chaining them)."""

    family: str
    n: int
    objects: tuple[str, ...]
    labels: tuple[str, ...]  # attributes (len N) or relations (len N-1)


def scene_key(family: Family, objects: Sequence[str], labels: Sequence[str]) -> tuple:
    """What the caption says, independent of word order, synonyms and relation direction.

    Attribute families: the multiset of (object, attribute) pairs. Relation families: the set of
    (subject, meaning, object) triples, each written in the direction of the meaning that sorts
    first among it and its inverse ("B under A" -> "A above B"; "bigger" -> "larger").
    """
    if not family.is_relation:
        return tuple(sorted(zip(objects, labels)))
    triples = set()
    for j, relation in enumerate(labels):
        triples.add(normalized_triple(family, objects[j], family.meaning(relation), objects[j + 1]))
    return tuple(sorted(triples))


def normalized_triple(family: Family, subject: str, meaning: str, obj: str) -> tuple[str, str, str]:
    """One relation fact in canonical direction (symmetric relations: subjects sorted)."""
    inverse = family.inverse_meaning(meaning)
    if inverse == meaning:
        return (min(subject, obj), meaning, max(subject, obj))
    if inverse < meaning:
        return (obj, inverse, subject)
    return (subject, meaning, obj)


def concept_id(family: Family, concept: Concept) -> str:
    """`<family>-n<N>-<12 hex>` from the scene key: stable across runs, equal for equal scenes."""
    key = repr((family.name, concept.n, scene_key(family, concept.objects, concept.labels)))
    return f"{family.name}-n{concept.n}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def derive_seed(seed: int, family: str, n: int) -> int:
    """A 64-bit seed for one (family, N) stream, independent of Python's hash seed."""
    digest = hashlib.sha256(f"autocomp/concepts/{seed}/{family}/{n}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


# ----------------------------------------------------------------------------- counting


def _independent_subsets(vocab: Vocabulary, k: int, among: Sequence[str] | None = None) -> int:
    """Number of k-subsets of the vocabulary (or of `among`) with no forbidden pair (exact).

    Entries in no forbidden pair contribute C(free, j); the rest split into connected components
    of the conflict graph, each small, whose independent subsets are enumerated by size.
    """
    if k < 0:
        return 0
    names = tuple(among) if among is not None else vocab.names
    allowed = set(names)
    adjacency: dict[str, set[str]] = {name: set() for name in names}
    for pair in vocab.forbidden:
        a, b = tuple(pair)
        if a in allowed and b in allowed:
            adjacency[a].add(b)
            adjacency[b].add(a)
    free = sum(1 for name in names if not adjacency[name])
    poly = [math.comb(free, j) for j in range(k + 1)]
    seen: set[str] = set()
    for start in names:
        if start in seen or not adjacency[start]:
            continue
        component, stack = [], [start]
        seen.add(start)
        while stack:
            node = stack.pop()
            component.append(node)
            for other in adjacency[node] - seen:
                seen.add(other)
                stack.append(other)
        counts = [0] * (k + 1)
        for size in range(min(k, len(component)) + 1):
            for subset in itertools.combinations(component, size):
                if all(vocab.compatible(a, b) for a, b in itertools.combinations(subset, 2)):
                    counts[size] += 1
        poly = [sum(poly[i] * counts[j - i] for i in range(j + 1)) for j in range(k + 1)]
    return poly[k]


def _relation_meaning_sequences(family: Family, length: int) -> int:
    meanings = {family.meaning(r) for r in family.labels.names}
    return math.perm(len(meanings), length)


def _count_attribute_concepts(family: Family, n: int) -> int:
    """Sum over the objects that conflict with some label (few): for each compatible choice S
    of them, (ways to complete S with other objects) x (label sets allowed next to S) x N!."""
    objects, labels = family.objects, family.labels
    conflicted = sorted({o for o, _ in family.cross_forbidden}, key=objects.names.index)
    others = [o for o in objects.names if o not in set(conflicted)]
    total = 0
    for size in range(min(n, len(conflicted)) + 1):
        for chosen in itertools.combinations(conflicted, size):
            if not all(objects.compatible(a, b) for a, b in itertools.combinations(chosen, 2)):
                continue
            rest = [o for o in others if all(objects.compatible(o, c) for c in chosen)]
            allowed_labels = [lab for lab in labels.names if family.label_allowed(lab, chosen)]
            total += _independent_subsets(objects, n - size, rest) * _independent_subsets(
                labels, n, allowed_labels
            )
    return total * math.factorial(n)


def count_concepts(family: Family, n: int) -> int:
    """The exact number of distinct concepts (scenes) of this family at this N."""
    check_n(family, n)
    if not family.is_relation:
        return _count_attribute_concepts(family, n)
    object_sets = _independent_subsets(family.objects, n)
    # Ordered objects x ordered relation meanings; each scene has exactly two such descriptions
    # (read from either end of the chain, with every relation inverted).
    return object_sets * math.factorial(n) * _relation_meaning_sequences(family, n - 1) // 2


def check_n(family: Family, n: int) -> None:
    if not family.n_min <= n <= family.n_max:
        fix = f"family {family.name!r} supports N from {family.n_min} to {family.n_max}"
        if family.is_relation and n == 1:
            fix += " (a relation joins two objects; use color or shape_color for the N=1 split)"
        raise UsageError("n", n, fix)


def check_concept_row(
    family: Family, row: dict[str, Any], where: str, caption_column: str | None = None
) -> None:
    """A table row states a concept of `family`: n a whole number in the family's range,
    `objects` n known objects, `attributes` the right number of known labels, and (when given)
    a non-empty caption. `where` names the row in the error ("input_path row 3 (c-12)")."""
    n = row.get("n")
    if not isinstance(n, int) or isinstance(n, bool):
        raise UsageError(where, n, "column n must be a whole number (the number of objects)")
    if not family.n_min <= n <= family.n_max:
        raise UsageError(
            where, n, f"n is outside {family.name}'s range {family.n_min}-{family.n_max}"
        )
    k_labels = n - 1 if family.is_relation else n
    for column, vocabulary, size in (
        ("objects", family.objects, n),
        ("attributes", family.labels, k_labels),
    ):
        values = row.get(column)
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise UsageError(where, values, f"column {column} must be a list of words, not null")
        if len(values) != size:
            raise UsageError(
                where, values, f"{column} must hold {size} entries for n = {n} ({family.name})"
            )
        unknown = [v for v in values if v not in vocabulary.by_name]
        if unknown:
            known = ", ".join(vocabulary.names[:6])
            raise UsageError(
                where,
                unknown[0],
                f"is not in {family.name}'s {column} vocabulary (e.g. {known}, ...); fix the "
                "table or add the word to the family",
            )
    if caption_column is not None:
        text = row.get(caption_column)
        if not isinstance(text, str) or not text.strip():
            raise UsageError(where, text, f"column {caption_column} must hold a caption")


# ----------------------------------------------------------------------------- sampling


class _BalancedPool:
    """Draws vocabulary indices so that no value is drawn k+1 times before all are drawn k times,
    as far as the concept's constraints allow."""

    def __init__(self, size: int, rng: random.Random) -> None:
        self.size = size
        self.rng = rng
        self.counts = [0] * size
        self.level = 0
        self.pool: list[int] = list(range(size))

    def pick(self, allowed: Callable[[int], bool]) -> int | None:
        """A random allowed value of the lowest available count (not yet committed)."""
        if not self.pool:
            self.level += 1
            self.pool = [v for v in range(self.size) if self.counts[v] == self.level]
        for _ in range(8):
            value = self.pool[self.rng.randrange(len(self.pool))]
            if allowed(value):
                return value
        candidates = [v for v in self.pool if allowed(v)]
        if candidates:
            return self.rng.choice(candidates)
        spill = [v for v in range(self.size) if self.counts[v] > self.level and allowed(v)]
        if not spill:
            return None
        lowest = min(self.counts[v] for v in spill)
        return self.rng.choice([v for v in spill if self.counts[v] == lowest])

    def commit(self, value: int) -> None:
        if self.counts[value] == self.level:
            self.pool.remove(value)
        self.counts[value] += 1


def _draw_distinct(
    pool: _BalancedPool,
    vocab: Vocabulary,
    k: int,
    same: Callable[[int, int], bool],
    fits: Callable[[str], bool] | None = None,
) -> list[int] | None:
    """k values, pairwise compatible; `same(a, b)` says two values count as one (synonyms);
    `fits(name)` is an extra condition on each value."""
    names = vocab.names
    chosen: list[int] = []

    def allowed(v: int) -> bool:
        if fits is not None and not fits(names[v]):
            return False
        return all(vocab.compatible(names[v], names[c]) and not same(v, c) for c in chosen)

    for _ in range(k):
        value = pool.pick(allowed)
        if value is None:
            return None
        chosen.append(value)
    return chosen


def _label_fits(family: Family, objects: Sequence[str], label: str) -> bool:
    return family.label_allowed(label, objects)


def sample_concepts(family: Family, n: int, count: int, seed: int) -> list[Concept]:
    """`count` unique concepts of `family` at `n`, reproducible from `seed`."""
    check_n(family, n)
    total = count_concepts(family, n)
    if count < 1:
        raise UsageError("count", count, "must be at least 1")
    if count > total:
        raise UsageError(
            "count",
            count,
            f"family {family.name!r} has only {total:,} distinct concepts at N={n}; "
            f"ask for at most {total:,}",
        )
    rng = random.Random(derive_seed(seed, family.name, n))
    objects, labels = family.objects, family.labels
    object_pool = _BalancedPool(len(objects), rng)
    label_pool = _BalancedPool(len(labels), rng)
    k_labels = n - 1 if family.is_relation else n
    if family.is_relation:
        meanings = [family.meaning(r) for r in labels.names]

        def same(a: int, b: int) -> bool:
            return meanings[a] == meanings[b]
    else:

        def same(a: int, b: int) -> bool:
            return a == b

    concepts: list[Concept] = []
    seen: set[tuple] = set()
    duplicates = 0
    while len(concepts) < count:
        if duplicates >= MAX_CONSECUTIVE_DUPLICATES:
            concepts.extend(_complete_by_enumeration(family, n, count - len(concepts), seen, rng))
            break
        obj_idx = _draw_distinct(object_pool, objects, n, lambda a, b: a == b)
        lab_idx = None
        if obj_idx is not None:
            chosen = [objects.names[i] for i in obj_idx]
            fits = functools.partial(_label_fits, family, chosen)
            lab_idx = _draw_distinct(label_pool, labels, k_labels, same, fits)
        if obj_idx is None or lab_idx is None:
            duplicates += 1
            continue
        concept = Concept(
            family.name,
            n,
            tuple(objects.names[i] for i in obj_idx),
            tuple(labels.names[i] for i in lab_idx),
        )
        key = scene_key(family, concept.objects, concept.labels)
        if key in seen:
            duplicates += 1
            continue
        duplicates = 0
        seen.add(key)
        for i in obj_idx:
            object_pool.commit(i)
        for i in lab_idx:
            label_pool.commit(i)
        concepts.append(concept)
    return concepts


def _complete_by_enumeration(
    family: Family, n: int, missing: int, seen: set[tuple], rng: random.Random
) -> list[Concept]:
    """When the space is nearly exhausted, draw the rest uniformly from the unused scenes."""
    if count_concepts(family, n) > ENUMERATE_LIMIT:
        raise RuntimeError("sampling stalled on a large concept space; this is a bug")
    unused = [
        c
        for c in enumerate_concepts(family, n)
        if scene_key(family, c.objects, c.labels) not in seen
    ]
    picked = rng.sample(unused, missing)
    for c in picked:
        seen.add(scene_key(family, c.objects, c.labels))
    return picked


def enumerate_concepts(family: Family, n: int) -> Iterator[Concept]:
    """Every distinct concept once (one description per scene), in a deterministic order."""
    objects, labels = family.objects, family.labels
    object_sets = [
        s
        for s in itertools.combinations(objects.names, n)
        if all(objects.compatible(a, b) for a, b in itertools.combinations(s, 2))
    ]
    if not family.is_relation:
        label_sets = [
            s
            for s in itertools.combinations(labels.names, n)
            if all(labels.compatible(a, b) for a, b in itertools.combinations(s, 2))
        ]
        for objs in object_sets:
            for labs in label_sets:
                if not all(family.label_allowed(lab, objs) for lab in labs):
                    continue
                for perm in itertools.permutations(labs):
                    yield Concept(family.name, n, objs, perm)
        return
    seen: set[tuple] = set()
    for objs in object_sets:
        for order in itertools.permutations(objs):
            for rels in itertools.permutations(labels.names, n - 1):
                if len({family.meaning(r) for r in rels}) < n - 1:
                    continue
                key = scene_key(family, order, rels)
                if key in seen:
                    continue
                seen.add(key)
                yield Concept(family.name, n, order, rels)


def label_prior(concepts: Sequence[Concept]) -> dict[str, dict[str, int]]:
    """Counts per object and per label in a concept set (the target prior of later stages)."""
    objects = Counter(o for c in concepts for o in c.objects)
    labels = Counter(lab for c in concepts for lab in c.labels)
    return {
        "objects": dict(sorted(objects.items())),
        "labels": dict(sorted(labels.items())),
    }
