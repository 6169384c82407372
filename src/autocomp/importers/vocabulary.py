"""Names from other releases onto a family's vocabulary: explicit rules, tried in order.

The Auto-Comp release writes objects as Objects365 class names in Title case ("Potted Plant",
"Cookies", "PC Mouse") and colours / relations in lower case. A release name maps onto our entry
by the first rule that finds exactly one:

1. ``exact``     the same text ("red", "SUV");
2. ``case``      the same text up to case and runs of spaces ("Potted Plant" -> "potted plant");
3. ``renamed``   the entry's recorded release class (`source` in the vocabulary file: "Cookies"
                 -> "cookie", "Frame" -> "picture frame", "PC Mouse" -> "computer mouse");
4. ``synonym``   the table SYNONYMS below ("grey" -> "gray", "below" -> "under");
5. ``plural``    the name with a final "s" / "es" removed or an "s" added, then rules 2-3
                 ("Earphone" -> "earphones", "Chairs" -> "chair").

A name no rule maps (an object our curation dropped, such as "Chips" or "Toy"; the colour
"white", dropped from the shared colours) is unmapped: the importer drops its rows and reports
the name with its count.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from autocomp.protocol.family import Vocabulary

SYNONYMS: dict[str, dict[str, str]] = {
    "attributes": {"grey": "gray"},
    "relations": {
        "below": "under",
        "beneath": "under",
        "underneath": "under",
        "over": "above",
        "left of": "to the left of",
        "right of": "to the right of",
    },
    "objects": {},
}


def _key(name: str) -> str:
    return " ".join(name.split()).lower()


def _inflections(key: str) -> list[str]:
    """Singular and plural variants of a lower-cased name (the last word only)."""
    out = []
    if key.endswith("es"):
        out.append(key[:-2])
    if key.endswith("s"):
        out.append(key[:-1])
    else:
        out.append(key + "s")
    return out


@dataclass
class Mapper:
    """Maps the names of one vocabulary and keeps count of what it did."""

    vocabulary: Vocabulary
    mapped: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (entry, rule)
    unmapped: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._by_key = {_key(e.name): e.name for e in self.vocabulary.entries}
        self._by_source = {_key(e.source): e.name for e in self.vocabulary.entries if e.source}
        synonyms = SYNONYMS.get(self.vocabulary.role, {})
        self._synonyms = {_key(k): v for k, v in synonyms.items() if v in self.vocabulary.by_name}

    def lookup(self, name: str) -> tuple[str, str] | None:
        """(our entry, the rule that found it), or None; nothing is counted."""
        if name in self.vocabulary.by_name:
            return name, "exact"
        key = _key(name)
        for rule, table in (("case", self._by_key), ("renamed", self._by_source)):
            if key in table:
                return table[key], rule
        if key in self._synonyms:
            return self._synonyms[key], "synonym"
        for variant in _inflections(key):
            for table in (self._by_key, self._by_source):
                if variant in table:
                    return table[variant], "plural"
        return None

    def map(self, name: str) -> str | None:
        """Our entry for a release name (counted as mapped or unmapped)."""
        found = self.lookup(name)
        if found is None:
            self.unmapped[name] += 1
            return None
        self.mapped.setdefault(name, found)
        return found[0]

    def report(self) -> dict[str, object]:
        """Distinct names mapped per rule; the names mapped by a rule that changes words
        (renamed, synonym, plural); and the names left unmapped, with their counts."""
        return {
            "by_rule": dict(Counter(rule for _, rule in self.mapped.values())),
            "normalised": {
                name: {"to": entry, "rule": rule}
                for name, (entry, rule) in sorted(self.mapped.items())
                if rule not in ("exact", "case")
            },
            "unmapped": dict(sorted(self.unmapped.items(), key=lambda kv: (-kv[1], kv[0]))),
        }
