"""What a table or figure was computed on, when that is not the accepted benchmark.

The rule (docs/usage/report.md, "What it was computed on"): every table and figure states,
visibly and next to itself, what it was computed on whenever that differs from the accepted
benchmark:
- rejected samples kept (`accepted` = false; the tiny profile keeps them to run the rest): the
  numbers include samples validation refused;
- fallback Contextual captions (`caption_status` = "fallback", or a Contextual caption equal to its
  Minimal twin's): the caption LLM kept no caption, so the sample has the caption, seed and image
  of its Minimal twin; Contextual repeats Minimal for it, and wherever the two conditions are
  compared their difference is 0 by construction;
- empty input: a table or figure over no sample is left out (or shows "–") and says why.
A caveat counts the samples of the cells the table or figure covers. The page also opens with
the same facts for the whole benchmark.

Families without an Auto-Comp kind (imported SugarCrepe categories: N = 0, one negative per
item, so Swap = Confusion) are told apart here too, so analyses built on Auto-Comp's construction
leave them out with a note.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

Key = tuple[str, int, str]  # (family, n, condition)


def _concept(sample_id: str) -> str:
    return sample_id.rsplit("/", 1)[0] if "/" in sample_id else sample_id


@dataclass(frozen=True)
class Sample:
    concept: str
    key: Key
    rejected: bool
    fallback: bool


@dataclass
class Scope:
    samples: dict[str, Sample]
    kinds: dict[str, str | None]  # family -> attribute / relation, None: not an Auto-Comp family
    paired: set[str] | None  # concepts of B_paired; None: the benchmark has no `paired` column
    single_set: set[str] = field(default_factory=set)  # families whose Swap set = Confusion set
    imported: str | None = None  # the importer that made the benchmark, if any
    validated: bool = True  # the benchmark has an `accepted` column
    random_weights: dict[str, str] = field(default_factory=dict)  # model -> how (run.json)

    # ------------------------------------------------------------------ selection

    def keys(self) -> set[Key]:
        return {s.key for s in self.samples.values()}

    def conditions(self) -> set[str]:
        return {k[2] for k in self.keys()}

    def autocomp(self, family: str) -> bool:
        """An Auto-Comp family (a known kind), not an imported one."""
        return self.kinds.get(family) is not None

    def caveats(
        self,
        where: Callable[[Key], bool] | Iterable[Key] | None = None,
        *,
        paired: bool = False,
        compare: bool = False,
    ) -> list[str]:
        """The caveats of the samples in the cells `where` selects (a predicate or a set of keys;
        None: all); `paired`: only the concepts the paired comparison uses; `compare`: the table
        or figure compares Minimal with Contextual."""
        if where is None:
            select: Callable[[Key], bool] = lambda _: True  # noqa: E731
        elif callable(where):
            select = where
        else:
            wanted = set(where)
            select = wanted.__contains__
        chosen = [s for s in self.samples.values() if select(s.key)]
        if paired and self.paired is not None:
            chosen = [s for s in chosen if s.concept in self.paired]
        return caveat_lines(chosen, compare)

    def paired_reason(self) -> str:
        """Why there is no Contextual - Minimal comparison (Table 6, its figure)."""
        conditions = Counter(k[2] for k in self.keys())
        missing = [c.title() for c in ("minimal", "contextual") if not conditions[c]]
        if missing:
            return (
                f"the benchmark has no {' and no '.join(missing)} sample, so no concept can be "
                "paired."
            )
        if self.paired is not None and not self.paired:
            return (
                "B_paired is empty: no concept has both its Minimal and its Contextual sample "
                "accepted by validation."
            )
        return "no concept has both its Minimal and its Contextual sample scored."

    def summary(self) -> list[tuple[str, bool]]:
        """The page's opening lines, what the whole report is computed on: (line, whether it is
        a caveat)."""
        samples = list(self.samples.values())
        concepts = len({s.concept for s in samples})
        lines = [(f"Benchmark: {len(samples):,} samples of {concepts:,} concepts.", False)]
        if self.imported and self.imported not in IMPORTED:  # a harness benchmark
            lines.append((f"Imported with `autocomp import {self.imported}`.{HARNESS}", True))
        elif self.imported:
            about = IMPORTED.get(self.imported, "")
            lines.append((f"Imported with `autocomp import {self.imported}`.{about}", False))
        if not self.validated:
            lines.append(
                (
                    "The benchmark records no validation verdict (no `accepted` column): every "
                    "sample counts as accepted.",
                    False,
                )
            )
        lines += [(line, True) for line in weights_lines(self.random_weights)]
        caveats = caveat_lines(samples, compare=True, scope="in this benchmark")
        lines += [(line, True) for line in caveats]
        if caveats:
            lines.append(
                ("Every table and figure that includes them says so under its title.", True)
            )
        elif self.validated and samples:
            lines.append(
                (
                    "Every sample passed validation: the tables and figures are on the "
                    "accepted benchmark.",
                    False,
                )
            )
        return lines


IMPORTED = {
    "sugarcrepe": " SugarCrepe categories (family sugarcrepe-<category>): one negative per item "
    "(Swap = Confusion, chance 50 %), N = 0 (no object count), Contextual only; analyses built "
    "on Auto-Comp's construction (accuracy vs N, the Swap - Confusion gap, Contextual - Minimal, "
    "per-relation accuracy, the error taxonomy, caption diversity) leave these families out.",
    "autocomp-release": " The Auto-Comp public release: its concepts, captions and images; the "
    "candidate sets rebuilt by autocomp.",
}

HARNESS = (
    " A harness benchmark (groups of images x texts, one row per image): its own metric, by "
    "its authors' rule, is the table \"The benchmark's own metric\"; the accuracy tables judge "
    "each image's first text against the group's other texts, which is not that metric."
)


def caveat_lines(samples: list[Sample], compare: bool = False, scope: str = "here") -> list[str]:
    """The caveat sentences of a set of samples (none when they are all accepted, non-fallback
    samples)."""
    total = len(samples)
    if total == 0:
        return ["Computed on no sample: there is nothing to show."]
    out = []
    rejected = sum(s.rejected for s in samples)
    if rejected:
        share = f"All {total:,}" if rejected == total else f"{rejected:,} of the {total:,}"
        out.append(
            f"{share} samples {scope} were rejected by validation (accepted = false) and kept "
            "to run the rest: these numbers are not on the accepted benchmark."
        )
    contextual = [s for s in samples if s.key[2] == "contextual"]
    fallback = sum(s.fallback for s in contextual)
    if fallback:
        share = (
            f"All {len(contextual):,}"
            if fallback == len(contextual)
            else f"{fallback:,} of the {len(contextual):,}"
        )
        tail = ", and their Contextual - Minimal difference is 0 by construction" if compare else ""
        out.append(
            f"{share} Contextual samples {scope} are fallback captions: the caption LLM kept no "
            "caption for their concept, so each has the caption, seed and image of its Minimal "
            f"twin. Contextual repeats Minimal for them{tail}."
        )
    return out


def weights_lines(random_weights: dict[str, str]) -> list[str]:
    """The caveat of models whose weights are random (run.json `weights`, as autocomp.tiny
    records the models it builds): their numbers show the machinery, not a model."""
    if not random_weights:
        return []
    names = ", ".join(sorted(random_weights))
    hows = sorted(set(random_weights.values()))
    how = hows[0] if len(hows) == 1 else "random or fine-tuned from random weights"
    return [
        f"The weights of {names} are {how}: their accuracies show the machinery at work, not "
        "what a model can do."
    ]


def single_set_families(benchmark: pa.Table) -> set[str]:
    """Families whose every Confusion negative is a Swap negative (Swap = Confusion: an imported
    one-negative set), from `swap_in_confusion` and `confusion_arrangements`."""
    if not {"swap_in_confusion", "confusion_arrangements"} <= set(benchmark.column_names):
        return set()
    same: dict[str, bool] = {}
    columns = ["family", "swap_in_confusion", "confusion_arrangements"]
    for r in benchmark.select(columns).to_pylist():
        swap, confusion = r["swap_in_confusion"] or [], r["confusion_arrangements"] or []
        equal = len(swap) == len(confusion) > 0
        same[r["family"]] = same.get(r["family"], True) and equal
    return {f for f, s in same.items() if s}


def scope_of(
    benchmark: pa.Table,
    kinds: dict[str, list[str]],
    meta: dict[str, Any],
    weights: dict[str, dict[str, Any]] | None = None,
) -> Scope:
    """The scope of a run's benchmark (`kinds`: family_kinds of the run; `weights`: each
    model's run.json `weights`, how its weights were made)."""
    names = set(benchmark.column_names)
    wanted = [
        c
        for c in (
            "sample_id",
            "family",
            "n",
            "condition",
            "caption",
            "accepted",
            "caption_status",
            "paired",
        )
        if c in names
    ]
    rows = benchmark.select(wanted).to_pylist()
    minimal_caption = {
        _concept(r["sample_id"]): r.get("caption") for r in rows if r["condition"] == "minimal"
    }
    samples = {}
    for r in rows:
        concept = _concept(r["sample_id"])
        fallback = r["condition"] == "contextual" and (
            r.get("caption_status") == "fallback"
            or (concept in minimal_caption and minimal_caption[concept] == r.get("caption"))
        )
        samples[r["sample_id"]] = Sample(
            concept,
            (r["family"], r["n"], r["condition"]),
            r.get("accepted") is False,
            bool(fallback),
        )
    paired = None
    if "paired" in names:
        paired = {_concept(r["sample_id"]) for r in rows if r["paired"]}
    kind_of: dict[str, str | None] = {f: None for f in {r["family"] for r in rows}}
    for kind, families in kinds.items():
        kind_of.update({f: kind for f in families if f in kind_of})
    return Scope(
        samples,
        kind_of,
        paired,
        single_set_families(benchmark),
        meta.get("imported"),
        "accepted" in names,
        {m: w.get("how", "random") for m, w in (weights or {}).items() if w.get("random")},
    )


def paired_set(scope: Scope | None) -> str:
    """What the paired set is on this benchmark: without verdicts (an import), every concept
    with both samples; never "passed validation" where nothing was validated."""
    if scope is None or scope.validated:
        return "whose Minimal and Contextual samples both passed validation"
    return "with both a Minimal and a Contextual sample (the benchmark records no validation)"
