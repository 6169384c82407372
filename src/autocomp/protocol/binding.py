"""The semantic preservation check, and the caption templates it yields.

`bind` verifies that a caption (Minimal or Contextual) states its concept, with the paper's
patterns (Section 3):

- attribute binding: each attribute is followed by its object with at most one word between
  ("a red leather cup" binds red to cup);
- relational binding: each relation occurs between its two objects, in order
  ("a chair ... above ... a table").

It is stricter than the paper in one way, and says so in its reasons: every occurrence of a
concept word (object, attribute or relation) must be part of a verified binding. A caption that
also says "red" of something else ("a red cup by a red wall") is rejected, because a hard
negative built from it would change the wall too, or leave "the chair" behind after the chair was
swapped out: negatives must differ from the positive only in the bound words.

On success it returns a `Template`: the caption cut into fixed text and holes at the verified
spans. Each object hole also covers the article and "pair of" in front of it, so that filling it
with another object re-chooses the article ("a red cup" -> "an orange cup") and adds or drops
"pair of" ("a green cup" -> "a pair of green gloves"). Filling every hole at once is the
simultaneous substitution that builds Swap and Confusion negatives; filling it with the concept
itself gives the positive, normalised the same way as its negatives.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from autocomp.protocol.family import Family
from autocomp.protocol.grammar import capitalize_first, indefinite_article, match_case

_GAP = re.compile(r"\s+(?:[\w'’-]+\s+)?")
_DETERMINER = re.compile(
    r"(?P<art>(?<![\w-])(?:an?|the)(?P<ws>\s+))?(?P<pair>pair\s+of\s+)?(?P<adj>[\w'’-]+\s+)?\Z",
    re.IGNORECASE,
)
# Read backwards from a hole: up to four whitespace runs, each with the word before it. A
# determiner match consists of such characters only and holds at most four words ("the pair of
# red"), so it starts inside this tail: `_DETERMINER` need not be tried left of it.
_TAIL_REVERSED = re.compile(r"(?:\s+[\w'’-]*){0,4}")


class BindingError(ValueError):
    """The caption does not state its concept; `reason` is a short code, the message says why."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


@functools.lru_cache(maxsize=4096)
def word_pattern(phrase: str) -> re.Pattern[str]:
    """Whole-word, case-insensitive pattern for a phrase; hyphenated compounds do not match."""
    words = [re.escape(w) for w in phrase.split()]
    return re.compile(r"(?<![\w-])" + r"\s+".join(words) + r"(?![\w-])", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def _finditer(phrase: str) -> Callable[[str], Iterator[re.Match[str]]]:
    return word_pattern(phrase).finditer


def _occurrences(phrase: str, text: str) -> list[tuple[int, int]]:
    return list(map(_SPAN, _finditer(phrase)(text)))


_SPAN = re.Match.span


@dataclass(frozen=True)
class Hole:
    """A place in a caption that a slot value fills.

    kind "object": the region from the determiner to the noun; `slot` is the object index.
    kind "relation": the relation phrase; `slot` is the relation index.
    """

    kind: str
    slot: int
    start: int
    end: int
    capital: bool
    article: str = ""  # "a", "An", "the" as written, or ""
    article_space: str = ""
    pair: str = ""  # "pair of " as written, or ""
    adjective: str = ""  # words kept between the determiner and the bound words
    between: str = ""  # attribute families: text between attribute and noun (" " or " leather ")

    def render(self, family: Family, obj: str | None = None, label: str | None = None) -> str:
        """This hole's text for an object (and its attribute), or for a relation."""
        if self.kind == "relation":
            assert label is not None
            return capitalize_first(label) if self.capital else label
        assert obj is not None
        entry = family.objects.by_name[obj]
        if entry.pair:
            pair = self.pair or ("pair of " if self.article else "")
        else:
            pair = ""
        head = f"{label}{self.between}{obj}" if label is not None else obj
        body = pair + self.adjective + head
        if not self.article:
            return capitalize_first(body) if self.capital else body
        article = self.article
        if article.lower() in ("a", "an"):
            article = match_case(self.article, indefinite_article(body))
        return article + self.article_space + body


@dataclass(frozen=True)
class Template:
    """A caption as fixed text around holes, in text order (len(segments) == len(holes) + 1)."""

    segments: tuple[str, ...]
    holes: tuple[Hole, ...]

    def fill(self, family: Family, objects: Sequence[str], labels: Sequence[str]) -> str:
        """Substitute every hole at once: objects[i] into object slot i, labels likewise."""
        attribute = not family.is_relation
        parts = [self.segments[0]]
        for hole, segment in zip(self.holes, self.segments[1:]):
            if hole.kind == "object":
                label = labels[hole.slot] if attribute else None
                parts.append(hole.render(family, objects[hole.slot], label))
            else:
                parts.append(hole.render(family, label=labels[hole.slot]))
            parts.append(segment)
        return "".join(parts)


def bind(family: Family, objects: Sequence[str], labels: Sequence[str], text: str) -> Template:
    """Check that `text` states the concept; return its template or raise BindingError."""
    if family.is_relation:
        spans = _bind_relations(objects, labels, text)
    else:
        spans = _bind_attributes(objects, labels, text)
    return _template(text, spans)


# A raw span: (kind, slot, start, end, attribute_end_or_-1, noun_start_or_-1)
_Span = tuple[str, int, int, int, int, int]


def _bind_attributes(objects: Sequence[str], labels: Sequence[str], text: str) -> list[_Span]:
    spans: list[_Span] = []
    bound_attr: dict[tuple[int, int], int] = {}
    bound_noun: dict[tuple[int, int], int] = {}
    found_at: dict[str, list[tuple[int, int]]] = {}  # each word's occurrences, found once

    def occurrences(word: str) -> list[tuple[int, int]]:
        if word not in found_at:
            found_at[word] = _occurrences(word, text)
        return found_at[word]

    for i, (obj, attr) in enumerate(zip(objects, labels)):
        nouns = occurrences(obj)
        found = 0
        for a_start, a_end in occurrences(attr):
            for n_start, n_end in nouns:
                if n_start > a_end and _GAP.fullmatch(text, a_end, n_start):
                    spans.append(("object", i, a_start, n_end, a_end, n_start))
                    bound_attr[(a_start, a_end)] = i
                    bound_noun[(n_start, n_end)] = i
                    found += 1
                    break
        if not found:
            raise BindingError(
                "missing_binding",
                f"no '{attr} [word] {obj}' in the caption (attribute must precede its object "
                "with at most one word between)",
            )
    for i, (obj, attr) in enumerate(zip(objects, labels)):
        for word, bound in ((attr, bound_attr), (obj, bound_noun)):
            for span in occurrences(word):
                if bound.get(span) != i:
                    raise BindingError(
                        "unbound_mention",
                        f"'{word}' at character {span[0]} is not part of a verified binding",
                    )
    return spans


def _bind_relations(objects: Sequence[str], labels: Sequence[str], text: str) -> list[_Span]:
    nouns = [_occurrences(obj, text) for obj in objects]
    bound: dict[tuple[int, int], int] = {}
    spans: list[_Span] = []
    for j, relation in enumerate(labels):
        found = _occurrences(relation, text)
        if len(found) != 1:
            what = "is missing" if not found else f"occurs {len(found)} times"
            raise BindingError(
                "relation_count", f"relation '{relation}' {what} (needs exactly one)"
            )
        r_start, r_end = found[0]
        before = [s for s in nouns[j] if s[1] <= r_start]
        after = [s for s in nouns[j + 1] if s[0] >= r_end]
        if not before or not after:
            raise BindingError(
                "missing_binding",
                f"no '{objects[j]} ... {relation} ... {objects[j + 1]}' in this order",
            )
        spans.append(("relation", j, r_start, r_end, -1, -1))
        for slot, span in ((j, before[-1]), (j + 1, after[0])):
            if bound.setdefault(span, slot) != slot:
                raise BindingError("overlap", f"'{text[span[0] : span[1]]}' is bound twice")
    for span, slot in bound.items():
        spans.append(("object", slot, span[0], span[1], -1, span[0]))
    for i, obj in enumerate(objects):
        for span in nouns[i]:
            if bound.get(span) != i:
                raise BindingError(
                    "unbound_mention",
                    f"'{obj}' at character {span[0]} is not part of a verified relation",
                )
    return spans


def _determiner(text: str, reversed_text: str, cursor: int, start: int) -> re.Match[str] | None:
    """`_DETERMINER.search(text, cursor, start)`, tried only from where a match can start (the
    tail before `start`, read in `reversed_text`): the same leftmost match, since the lookbehind
    sees the text left of where a search starts either way."""
    at = len(text) - start
    found = _TAIL_REVERSED.match(reversed_text, at)  # never None: the pattern matches ''
    tail = found.end() - at if found else 0
    return _DETERMINER.search(text, max(cursor, start - tail), start)


def _start(span: _Span) -> int:
    return span[2]


def _template(text: str, spans: list[_Span]) -> Template:
    if len(spans) > 1:
        spans = sorted(spans, key=_start)
    segments: list[str] = []
    holes: list[Hole] = []
    cursor = 0
    reversed_text = text[::-1]
    for kind, slot, start, end, attr_end, noun_start in spans:
        if start < cursor:
            raise BindingError("overlap", f"bindings overlap at character {start}")
        region_start = start
        article = article_space = pair = adjective = between = ""
        if kind == "object":
            det = _determiner(text, reversed_text, cursor, start)
            if det:
                art, ws, pair, adj = det.group("art", "ws", "pair", "adj")
                if art or pair:
                    region_start = det.start()
                    article_space = ws or ""
                    article = art[: len(art) - len(article_space)] if art else ""
                    pair = pair or ""
                    adjective = adj or ""
                else:
                    pair = ""
            if attr_end >= 0:
                between = text[attr_end:noun_start]
        segments.append(text[cursor:region_start])
        holes.append(
            Hole(
                kind,
                slot,
                region_start,
                end,
                text[region_start].isupper(),
                article,
                article_space,
                pair,
                adjective,
                between,
            )
        )
        cursor = end
    segments.append(text[cursor:])
    return Template(tuple(segments), tuple(holes))
