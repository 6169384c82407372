"""Task families as data: YAML files loaded and validated into one typed schema.

A family is one YAML file. The package ships color, shape_color, position and relative_size in
`autocomp/protocol/families/`; more are found in the folders listed in the AUTOCOMP_FAMILY_PATH
environment variable (separated like PATH), so a new family ("material": wooden/metal/glass) needs
one YAML file and nothing else. Vocabularies can be written inline or shared by name from a
`vocabularies/` folder (the family folder's own first, then the package's).

Schema (every key is checked; unknown keys are errors, so a typo is never silently ignored):

    name: color                  # equals the file name without .yaml
    kind: attribute              # attribute (N objects, N attributes) or relation (N-1 relations)
    title: Color binding         # optional, for reports
    description: ...             # optional
    notes: ...                   # optional: curation choices, in words
    n: {min: 1, max: 3}          # the N this family supports
    attribute_label: color       # attribute families: the word for the attribute type
    objects: {vocabulary: objects}          # or {entries: [...], never_together: [[...], ...]}
    attributes: {vocabulary: colors}        # attribute families
    relations: {entries: [{name: above, meaning: above, inverse: under}, ...]}  # relation families
    caption: {suffix: " on a white background."}                     # attribute families
    caption: {first: "{subject} is {relation} {object}",             # relation families
              next: ", which is {relation} {object}", suffix: " on a white background."}
    contextual:
      system: ...                # the LLM's system prompt
      user: ...                  # user prompt template with {examples} and {spec}
      example: "...{spec}...{caption}..."   # how one few-shot example is written
      examples: [{objects: [...], attributes: [...], caption: ...}, ...]

Over 450 lines because a family's schema and every check of a family file (keys, vocabularies,
word containment, relations, N ranges, few-shot examples) stay together: each check reads the
same parsed YAML and reports through one checker."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autocomp.datafiles import check_keys
from autocomp.errors import UsageError

PACKAGE_DIR = Path(__file__).parent
PACKAGE_FAMILIES = PACKAGE_DIR / "families"
PACKAGE_VOCABULARIES = PACKAGE_DIR / "vocabularies"
FAMILY_PATH_ENV = "AUTOCOMP_FAMILY_PATH"
KINDS = ("attribute", "relation")

_FAMILY_KEYS = {
    "required": {"name", "kind", "n", "objects", "caption", "contextual"},
    "optional": {
        "title",
        "description",
        "notes",
        "attribute_label",
        "attributes",
        "relations",
        "validation",
    },  # fmt: skip
}
_ENTRY_KEYS = {
    "objects": ({"name"}, {"pair", "source"}),
    "attributes": ({"name"}, {"source"}),
    "relations": ({"name", "meaning", "inverse"}, {"source"}),
}
_CAPTION_KEYS: dict[str, tuple[set[str], set[str]]] = {
    "attribute": ({"suffix"}, set()),
    "relation": ({"first", "next", "suffix"}, set()),
}
_CONTEXTUAL_KEYS: tuple[set[str], set[str]] = ({"system", "user", "example", "examples"}, set())
# The VQA question of the attribute/relation check (autocomp.generation.checks): slots per kind.
DEFAULT_QUESTIONS = {
    "attribute": "What {label} {be} the {object}? Answer with one word.",
    "relation": "Complete the sentence with what the image shows: the {subject} {be} ___ the "
    "{object}. Answer with the missing words only.",
}
_QUESTION_SLOTS = {"attribute": ("{object}",), "relation": ("{subject}", "{object}")}


@dataclass(frozen=True)
class Entry:
    """One vocabulary word or phrase. Objects may be pair nouns; relations carry their meaning."""

    name: str
    pair: bool = False
    meaning: str | None = None
    inverse: str | None = None
    source: str | None = None

    @property
    def instances(self) -> int:
        """How many physical instances the noun names ("a pair of gloves" is two)."""
        return 2 if self.pair else 1


@dataclass(frozen=True)
class Vocabulary:
    """An ordered, duplicate-free list of entries and the pairs that never share a concept."""

    role: str
    entries: tuple[Entry, ...]
    forbidden: frozenset[frozenset[str]]
    by_name: dict[str, Entry] = field(compare=False, repr=False)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def compatible(self, a: str, b: str) -> bool:
        """Whether two entries may appear in one concept."""
        return a != b and frozenset((a, b)) not in self.forbidden


@dataclass(frozen=True, eq=False)
class Family:
    """A validated task family (compared and hashed by identity: loads are cached)."""

    name: str
    kind: str
    n_min: int
    n_max: int
    objects: Vocabulary
    labels: Vocabulary  # attributes (attribute families) or relations (relation families)
    caption: dict[str, str]
    contextual: dict[str, Any]
    question: str
    title: str
    attribute_label: str
    path: str
    config: dict[str, Any] = field(repr=False, compare=False)
    sha256: str = ""
    # (object, label) pairs that never share a concept: one's words hold the other's
    # ("wine glass" / "glass"), so a caption holding both could not be parsed unambiguously.
    cross_forbidden: frozenset[tuple[str, str]] = frozenset()

    @property
    def is_relation(self) -> bool:
        return self.kind == "relation"

    def meaning(self, relation: str) -> str:
        entry = self.labels.by_name[relation]
        assert entry.meaning is not None
        return entry.meaning

    def inverse_meaning(self, meaning: str) -> str:
        for entry in self.labels.entries:
            if entry.meaning == meaning:
                assert entry.inverse is not None
                return entry.inverse
        raise KeyError(meaning)

    def label_allowed(self, label: str, objects: Iterable[str]) -> bool:
        """Whether a label may join a concept holding these objects."""
        return not any((o, label) in self.cross_forbidden for o in objects)

    def summary(self) -> dict[str, Any]:
        """A small dict for listings and metadata."""
        return {
            "name": self.name,
            "kind": self.kind,
            "n": [self.n_min, self.n_max],
            "objects": len(self.objects),
            "labels": len(self.labels),
            "sha256": self.sha256,
            "path": self.path,
        }


# ----------------------------------------------------------------------------- loading


def family_dirs() -> list[Path]:
    """Folders searched for family files: AUTOCOMP_FAMILY_PATH entries first, then the package."""
    extra = [Path(p) for p in os.environ.get(FAMILY_PATH_ENV, "").split(os.pathsep) if p]
    return [*extra, PACKAGE_FAMILIES]


def _family_files(dirs: Iterable[Path]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder in dirs:
        if not folder.is_dir():
            raise UsageError(
                f"{FAMILY_PATH_ENV} entry", str(folder), "it is not a folder; fix or unset it"
            )
        for path in sorted(folder.glob("*.yaml")):
            if path.stem in found:
                raise UsageError(
                    f"family {path.stem!r}",
                    f"{found[path.stem]} and {path}",
                    "a family name must be defined once: rename or remove one file",
                )
            found[path.stem] = path
    return found


def available_families() -> dict[str, Path]:
    """Family name -> file, over the whole search path."""
    return _family_files(family_dirs())


def load_family(name: str) -> Family:
    """Load one family by name; unknown names get the list of known ones (and a suggestion)."""
    files = available_families()
    if name not in files:
        raise UsageError("family", name, _suggest(name, sorted(files)))
    return _load_cached(str(files[name]), _mtime(files[name]))


def load_all() -> list[Family]:
    """Every family on the search path, sorted by name."""
    return [_load_cached(str(p), _mtime(p)) for _, p in sorted(available_families().items())]


def load_family_file(path: str | Path) -> Family:
    """Load and validate one family file."""
    path = Path(path)
    return _load_cached(str(path), _mtime(path))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError as exc:
        raise UsageError("family file", str(path), f"cannot be read ({exc.strerror})") from exc


@functools.lru_cache(maxsize=64)
def _load_cached(path_str: str, _mtime: float) -> Family:
    path = Path(path_str)
    try:
        text = path.read_text(encoding="utf-8")
        raw = yaml.safe_load(text)
    except OSError as exc:
        raise UsageError("family file", str(path), f"cannot be read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise UsageError("family file", str(path), f"is not valid YAML: {exc}") from exc
    return _build_family(raw, path)


def _suggest(name: str, known: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown family{hint}; known families: {', '.join(known)}"


# ----------------------------------------------------------------------------- validation


class _Checker:
    """Collects the context of a family file so that every error names file, key and fix."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, value: object, fix: str) -> UsageError:
        return UsageError(f"family file {self.path}: {key}", value, fix)

    def keys(self, where: str, mapping: object, required: set[str], optional: set[str]) -> dict:
        return check_keys(f"family file {self.path}: {where}", mapping, required, optional)

    def text(self, where: str, value: object) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, value, "must be a non-empty string")
        return value


def _build_family(raw: object, path: Path) -> Family:
    check = _Checker(path)
    raw = check.keys("top level", raw, _FAMILY_KEYS["required"], _FAMILY_KEYS["optional"])
    name = check.text("name", raw["name"])
    if name != path.stem:
        raise check.fail("name", name, f"must equal the file name {path.stem!r}")
    kind = raw["kind"]
    if kind not in KINDS:
        raise check.fail("kind", kind, f"must be one of {', '.join(KINDS)}")
    label_role = "attributes" if kind == "attribute" else "relations"
    other_role = "relations" if kind == "attribute" else "attributes"
    if label_role not in raw:
        raise check.fail(label_role, None, f"a {kind} family needs a {label_role!r} vocabulary")
    if other_role in raw:
        raise check.fail(other_role, "present", f"a {kind} family has no {other_role!r}; remove it")

    objects = _vocabulary(check, "objects", raw["objects"])
    labels = _vocabulary(check, label_role, raw[label_role])
    if kind == "relation":
        _check_relations(check, labels)
    cross = _cross_containment(check, kind, objects, labels)
    n_min, n_max = _n_range(check, raw["n"], kind, objects, labels)

    caption = check.keys("caption", raw["caption"], *_CAPTION_KEYS[kind])
    for key, value in caption.items():
        check.text(f"caption.{key}", value)
    if kind == "relation":
        for key in ("first", "next"):
            for slot in ("{relation}", "{object}"):
                if slot not in caption[key]:
                    raise check.fail(f"caption.{key}", caption[key], f"must contain {slot}")
        if "{subject}" not in caption["first"]:
            raise check.fail("caption.first", caption["first"], "must contain {subject}")

    contextual = check.keys("contextual", raw["contextual"], *_CONTEXTUAL_KEYS)
    for key in ("system", "user", "example"):
        check.text(f"contextual.{key}", contextual[key])
    for slot in ("{spec}", "{examples}"):
        if slot not in contextual["user"]:
            raise check.fail("contextual.user", contextual["user"][:60], f"must contain {slot}")
    for slot in ("{spec}", "{caption}"):
        if slot not in contextual["example"]:
            raise check.fail("contextual.example", contextual["example"], f"must contain {slot}")
    _check_examples(check, contextual["examples"], objects, labels, kind, n_min, n_max)
    validation = check.keys("validation", raw.get("validation") or {}, set(), {"question"})
    question = check.text(
        "validation.question", validation.get("question", DEFAULT_QUESTIONS[kind])
    )
    for slot in _QUESTION_SLOTS[kind]:
        if slot not in question:
            raise check.fail("validation.question", question, f"must contain {slot}")

    config = dict(raw)
    config["objects"] = _vocabulary_config(objects)
    config[label_role] = _vocabulary_config(labels)
    config["never_together_across"] = sorted(list(p) for p in cross)
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()
    return Family(
        name=name,
        kind=kind,
        n_min=n_min,
        n_max=n_max,
        objects=objects,
        labels=labels,
        caption=dict(caption),
        contextual=dict(contextual),
        question=question,
        title=str(raw.get("title") or name),
        attribute_label=str(
            raw.get("attribute_label") or ("relation" if kind == "relation" else "attribute")
        ),
        path=str(path),
        config=config,
        sha256=digest,
        cross_forbidden=cross,
    )


def _vocabulary(check: _Checker, role: str, spec: object) -> Vocabulary:
    if isinstance(spec, dict) and set(spec) == {"vocabulary"}:
        ref = spec["vocabulary"]
        spec = _resolve_vocabulary(check, role, ref)
        check = _Checker(Path(f"{check.path} -> vocabulary {ref!r}"))
    spec = check.keys(role, spec, {"entries"}, {"never_together", "notes"})
    items = spec["entries"]
    if not isinstance(items, list) or not items:
        raise check.fail(f"{role}.entries", items, "must be a non-empty list")
    required, optional = _ENTRY_KEYS[role]
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        if isinstance(item, str):
            item = {"name": item}
        item = check.keys(f"{role}.entries[{i}]", item, required, optional)
        entry_name = check.text(f"{role}.entries[{i}].name", item["name"]).strip()
        key = entry_name.lower()
        if key in seen:
            raise check.fail(
                f"{role}.entries[{i}].name",
                entry_name,
                f"duplicate of entries[{seen[key]}]; each entry must appear once",
            )
        seen[key] = i
        pair = item.get("pair", False)
        if not isinstance(pair, bool):
            raise check.fail(f"{role}.entries[{i}].pair", pair, "must be true or false")
        entries.append(
            Entry(
                name=entry_name,
                pair=pair,
                meaning=item.get("meaning"),
                inverse=item.get("inverse"),
                source=item.get("source"),
            )
        )
    by_name = {e.name: e for e in entries}
    forbidden: set[frozenset[str]] = set()
    for g, group in enumerate(spec.get("never_together") or []):
        if not isinstance(group, list) or len(group) < 2:
            raise check.fail(f"{role}.never_together[{g}]", group, "must list two or more names")
        for member in group:
            if member not in by_name:
                raise check.fail(
                    f"{role}.never_together[{g}]", member, f"is not a {role} entry; fix the name"
                )
        forbidden.update(frozenset((a, b)) for a in group for b in group if a != b)
    forbidden.update(_containment_pairs(entries))
    return Vocabulary(
        role=role, entries=tuple(entries), forbidden=frozenset(forbidden), by_name=by_name
    )


def _resolve_vocabulary(check: _Checker, role: str, ref: object) -> object:
    if not isinstance(ref, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", ref):
        raise check.fail(f"{role}.vocabulary", ref, "must be a vocabulary file name (no path)")
    for folder in (check.path.parent / "vocabularies", PACKAGE_VOCABULARIES):
        candidate = folder / f"{ref}.yaml"
        if candidate.is_file():
            try:
                return yaml.safe_load(candidate.read_text(encoding="utf-8"))
            except yaml.YAMLError as exc:
                raise UsageError("vocabulary file", str(candidate), f"invalid YAML: {exc}") from exc
    known = sorted(p.stem for p in PACKAGE_VOCABULARIES.glob("*.yaml"))
    raise check.fail(f"{role}.vocabulary", ref, f"no such vocabulary; shipped: {', '.join(known)}")


def _words(text: str) -> tuple[str, ...]:
    return tuple(re.findall(r"[a-z0-9]+", text.lower()))


def _contains(outer: tuple[str, ...], inner: tuple[str, ...]) -> bool:
    k = len(inner)
    return any(outer[i : i + k] == inner for i in range(len(outer) - k + 1))


def _containment_pairs(entries: list[Entry]) -> set[frozenset[str]]:
    """Pairs of which one name holds the other as whole words ("pot" in "tea pot").

    In a caption holding both, a search for the shorter name would also hit the longer one, so
    the binding check and the substitution could not tell them apart: they never share a concept.
    """
    words = [(e.name, _words(e.name)) for e in entries]
    pairs = set()
    for a, wa in words:
        for b, wb in words:
            if a != b and len(wa) < len(wb) and _contains(wb, wa):
                pairs.add(frozenset((a, b)))
    return pairs


def _cross_containment(
    check: _Checker, kind: str, objects: Vocabulary, labels: Vocabulary
) -> frozenset[tuple[str, str]]:
    """(object, label) pairs of which one's words hold the other's ("wine glass" / "glass").

    Attribute families keep such pairs out of a concept. Relation phrases inside object names
    are not supported (they would make the concept count depend on the objects): an error.
    """
    pairs = set()
    for o in objects.entries:
        for lab in labels.entries:
            wo, wl = _words(o.name), _words(lab.name)
            if _contains(wo, wl) or _contains(wl, wo):
                if kind == "relation":
                    raise check.fail(
                        "vocabularies",
                        f"{o.name} / {lab.name}",
                        "an object and a relation share words; rename or remove one",
                    )
                pairs.add((o.name, lab.name))
    return frozenset(pairs)


def _check_relations(check: _Checker, relations: Vocabulary) -> None:
    meanings = {e.meaning for e in relations.entries if e.meaning is not None}
    inverse_of: dict[str, str] = {}
    for i, e in enumerate(relations.entries):
        for key in ("meaning", "inverse"):
            check.text(f"relations.entries[{i}].{key}", getattr(e, key))
        if e.inverse not in meanings:
            raise check.fail(
                f"relations.entries[{i}].inverse",
                e.inverse,
                f"must be the meaning of a listed relation ({', '.join(sorted(meanings))})",
            )
        assert e.meaning is not None and e.inverse is not None
        if inverse_of.setdefault(e.meaning, e.inverse) != e.inverse:
            raise check.fail(
                f"relations.entries[{i}].inverse", e.inverse, "entries of one meaning disagree"
            )
    for m, inv in inverse_of.items():
        if inverse_of[inv] != m:
            raise check.fail(
                "relations",
                f"{m} -> {inv} -> {inverse_of[inv]}",
                "inverse of inverse must be the meaning itself",
            )


def _n_range(
    check: _Checker, spec: object, kind: str, objects: Vocabulary, labels: Vocabulary
) -> tuple[int, int]:
    spec = check.keys("n", spec, {"min", "max"}, set())
    lo, hi = spec["min"], spec["max"]
    lowest = 2 if kind == "relation" else 1
    if not isinstance(lo, int) or not isinstance(hi, int) or not lowest <= lo <= hi:
        raise check.fail("n", spec, f"needs integers {lowest} <= min <= max")
    meanings = len({e.meaning for e in labels.entries}) + 1 if kind == "relation" else len(labels)
    limit = min(len(objects), meanings)
    if hi > limit:
        raise check.fail("n.max", hi, f"exceeds what the vocabularies allow ({limit})")
    return lo, hi


def _check_examples(
    check: _Checker,
    examples: object,
    objects: Vocabulary,
    labels: Vocabulary,
    kind: str,
    n_min: int,
    n_max: int,
) -> None:
    if not isinstance(examples, list) or not examples:
        raise check.fail("contextual.examples", examples, "must be a non-empty list")
    for i, ex in enumerate(examples):
        ex = check.keys(
            f"contextual.examples[{i}]", ex, {"objects", "attributes", "caption"}, set()
        )
        check.text(f"contextual.examples[{i}].caption", ex["caption"])
        for key, vocab in (("objects", objects), ("attributes", labels)):
            for value in ex[key]:
                if value not in vocab.by_name:
                    raise check.fail(
                        f"contextual.examples[{i}].{key}", value, f"is not a {vocab.role} entry"
                    )
        n = len(ex["objects"])
        want = n if kind == "attribute" else n - 1
        if len(ex["attributes"]) != want or not n_min <= n <= n_max:
            raise check.fail(f"contextual.examples[{i}]", ex["objects"], "wrong number of entries")


def _vocabulary_config(vocab: Vocabulary) -> dict[str, Any]:
    """The resolved vocabulary as plain data (recorded in every output's metadata)."""
    entries = []
    for e in vocab.entries:
        item: dict[str, Any] = {"name": e.name}
        if e.pair:
            item["pair"] = True
        if e.meaning is not None:
            item.update(meaning=e.meaning, inverse=e.inverse)
        entries.append(item)
    forbidden = sorted(sorted(p) for p in vocab.forbidden)
    return {"entries": entries, "never_together_pairs": forbidden}
