"""A release caption kept as written: the concept is mapped onto our names, the caption's words
are never changed.

The release names its objects in its own words ("Cookies", "Frame", "grey", "below"); our
vocabulary says "cookie", "picture frame", "gray", "under". The concept (objects, attributes:
what `concept_id`, the analyses and the same-scene flags read) takes our names; the caption
keeps the release's words, so "Some brown cookies are piled" stays grammatical in the positive
and in every negative ("Some gold cookies are piled ...").

For each slot of the concept, the word the caption uses is found (the release's name, else ours;
the text as the caption writes it, a capital that only starts the sentence lowered) and the
family is given that word as the slot's entry, in place of ours: its "pair of" as the caption
uses it, its relation meaning as ours. The caption is bound with those words
(autocomp.protocol.binding, as for our own captions) and must come back unchanged when its
template is filled with its own concept (articles and "pair of" as written): the negatives then
differ from it only in the bound words. A caption that names a slot two ways ("cookies" and
"cookie"), that does not bind, or that filling would change, is dropped with that reason.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from autocomp.protocol.binding import BindingError, Template, bind, word_pattern
from autocomp.protocol.family import Entry, Family, Vocabulary


@dataclass(frozen=True)
class Written:
    """A caption bound with the words it writes: the family holding those words as entries, the
    words per slot, and the caption's template."""

    family: Family
    objects: tuple[str, ...]
    labels: tuple[str, ...]
    template: Template


def _key(name: str) -> str:
    return " ".join(name.split()).lower()


def _spans(word: str, caption: str) -> list[tuple[int, int]]:
    return [m.span() for m in word_pattern(word).finditer(caption)]


def _as_written(caption: str, start: int, end: int) -> str:
    """The word at caption[start:end]; a capital that only starts the sentence is lowered
    ("Cookies are ..." -> "cookies"; "SUV" stays)."""
    text = caption[start:end]
    if start == 0 and text[:1].isupper() and text[1:2].islower():
        return text[:1].lower() + text[1:]
    return text


def slot_word(caption: str, names: Sequence[str]) -> str | None:
    """The word the caption uses for a slot named `names` (the release's name, then ours):
    None when it names the slot two ways; the first name when it names it not at all (binding
    then says so)."""
    found = [(name, _spans(name, caption)) for name in dict.fromkeys(names)]
    found = [(name, spans) for name, spans in found if spans]
    if not found:
        return names[0]
    # the longest name that covers every other's mentions ("picture frame" covers "frame")
    found.sort(key=lambda f: -len(f[0]))
    chosen, spans = found[0]
    for _, others in found[1:]:
        if not all(any(a <= s and e <= b for a, b in spans) for s, e in others):
            return None
    return _as_written(caption, *spans[0])


_PAIR = r"pair\s+of\s+(?:[\w'’-]+\s+)?"
_ARTICLE = r"(?<![\w-])(?:an?|the)\s+(?:[\w'’-]+\s+)?"


def _pair_as_written(caption: str, word: str, default: bool) -> bool:
    """Whether the caption says "pair of" before `word` (an article with no "pair of": no;
    neither: our entry's rule)."""
    pattern = word_pattern(word).pattern
    if re.search(_PAIR + pattern, caption, re.IGNORECASE):
        return True
    if re.search(_ARTICLE + pattern, caption, re.IGNORECASE):
        return False
    return default


def _replaced(vocabulary: Vocabulary, words: dict[str, Entry]) -> Vocabulary:
    """The vocabulary with entry `ours` replaced, in place, by `words[ours]`."""
    entries = tuple(words.get(e.name, e) for e in vocabulary.entries)
    return Vocabulary(vocabulary.role, entries, vocabulary.forbidden, {e.name: e for e in entries})


class WrittenFamilies:
    """The family with a caption's words as entries, one per distinct set of changed entries
    (most captions write our own names: they share the family itself)."""

    def __init__(self, family: Family) -> None:
        self.family = family
        self._made: dict[tuple, Family] = {}

    def get(self, objects: dict[str, Entry], labels: dict[str, Entry]) -> Family:
        base = self.family
        changed = {
            role: {ours: e for ours, e in words.items() if vocab.by_name[ours] != e}
            for role, words, vocab in (("o", objects, base.objects), ("l", labels, base.labels))
        }
        key = tuple(sorted((role, ours, e) for role, d in changed.items() for ours, e in d.items()))
        if not key:
            return base
        if key not in self._made:
            self._made[key] = dataclasses.replace(
                base,
                objects=_replaced(base.objects, changed["o"]),
                labels=_replaced(base.labels, changed["l"]),
            )
        return self._made[key]


def as_written(
    families: WrittenFamilies,
    ours: tuple[Sequence[str], Sequence[str]],
    release: tuple[Sequence[str], Sequence[str]],
    caption: str,
) -> Written | str:
    """The caption bound with its own words for the concept `ours` (objects, labels), whose
    release names are `release`; or the reason it cannot be kept as written."""
    family = families.family
    words: list[list[str]] = [[], []]
    entries: list[dict[str, Entry]] = [{}, {}]
    for k, vocab in enumerate((family.objects, family.labels)):
        for name, release_name in zip(ours[k], release[k]):
            word = slot_word(caption, [release_name, name])
            if word is None:
                return f"names {name} two ways"
            other = vocab.by_name.get(word)
            if other is not None and other.name != name:
                return f"writes {word!r}, another {vocab.role[:-1]} of our vocabulary"
            entry = vocab.by_name[name]
            pair = _pair_as_written(caption, word, entry.pair) if k == 0 else False
            entries[k][name] = dataclasses.replace(entry, name=word, pair=pair)
            words[k].append(word)
    written = families.get(entries[0], entries[1])
    try:
        template = bind(written, words[0], words[1], caption)
    except BindingError as exc:
        return f"does not bind ({exc.reason})"
    if template.fill(written, words[0], words[1]) != caption:
        return "would change when rebuilt (an article or 'pair of')"
    return Written(written, tuple(words[0]), tuple(words[1]), template)
