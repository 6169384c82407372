"""The report's long tables as one registry: each table's key, heading, note, compute function,
applies-when predicate, place on the page and the paper-layout tables cut from it. The report's
writers derive everything from it: the files (tables/<key>.{csv,parquet,tex}: every table
computed), the page's sections and their order, the folded long tables (analysis/html.py).

`build_tables` reads a loaded run (RunData, never written to) and returns a new value,
`ReportTables`: the tables, and what they were computed on (scope, layout, per-table notes and
caveats). A new analysis is one `TableSpec` here, in page order."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal

import pyarrow as pa

from autocomp.analysis import agreement, harness, profile
from autocomp.analysis import statistics as analysis
from autocomp.analysis.audit_tables import progress_caveats
from autocomp.analysis.finetune_tables import DELTAS_NOTE, TABLE8_NOTE, finetune_tables
from autocomp.analysis.load import RunData, family_kinds
from autocomp.analysis.paper_tables import Layout, layout_of
from autocomp.analysis.scope import Scope, scope_of
from autocomp.analysis.survival import fallback_note, survival_funnel

Place = Literal["section", "long", "files"]  # a section of the page; folded away; files only


@dataclass(frozen=True)
class Context:
    """What a table's compute function reads: the run, the bootstrap seed, other generators'
    predictions (generator name -> predictions; Table 9), and what follows from the run."""

    data: RunData
    seed: int = 0
    compare: Mapping[str, pa.Table] = field(default_factory=dict)
    profile: Mapping[str, Path] = field(default_factory=dict)  # runs of other benchmarks

    @cached_property
    def harness(self) -> dict[str, pa.Table] | None:
        """The harness tables of a run whose benchmark is a harness import (else None)."""
        return harness.run_tables(self.data.run, self.seed)

    @cached_property
    def kinds(self) -> dict[str, list[str]]:
        families = self.data.benchmark.column("family").unique().to_pylist()
        return family_kinds(self.data.meta, families)

    @cached_property
    def scope(self) -> Scope:
        return scope_of(self.data.benchmark, self.kinds, self.data.meta, self.data.weights)

    @cached_property
    def finetune(self) -> dict[str, pa.Table]:
        return finetune_tables(self.data.finetune, self.seed)

    @cached_property
    def cross(self) -> tuple[pa.Table, pa.Table]:
        """Table 9 and the generator order: this run (named by its title) against `compare`."""
        return analysis.cross_generator(dict(self.compare))


@dataclass(frozen=True)
class TableSpec:
    """One long table. `compute` gives the table, or for a table per name (judges) a mapping
    name -> table, each kept as `<key>_<name>` with `{name}` in the heading filled in."""

    key: str
    heading: str  # the section title on the page (place "section")
    note: str  # what the table holds, under its title
    compute: Callable[[Context], pa.Table | dict[str, pa.Table]]
    applies: Callable[[Context], bool] = lambda _: True  # computed only for runs where true
    place: Place = "section"
    paper: tuple[str, ...] = ()  # names of the paper-layout tables cut from it (their prefix)

    def outputs(self, context: Context) -> Iterator[tuple[str, pa.Table]]:
        """(key, table) of what this spec computes for the run."""
        found = self.compute(context)
        if isinstance(found, pa.Table):
            yield self.key, found
        else:
            yield from ((f"{self.key}_{name}", table) for name, table in found.items())

    def keys(self, tables: Mapping[str, pa.Table]) -> list[str]:
        """The keys of `tables` this spec made (several for a table per name), sorted."""
        if "{name}" not in self.heading:
            return [self.key] if self.key in tables else []
        return sorted(k for k in tables if k.startswith(f"{self.key}_"))

    def heading_of(self, key: str) -> str:
        return self.heading.format(name=key.removeprefix(f"{self.key}_"))


def _bases(c: Context) -> dict[str, str]:
    return {n: m["base_model"] for n, m in c.data.models.items() if m.get("base_model")}


def _ours(c: Context) -> list[str]:
    return sorted(f for f in c.scope.kinds if c.scope.autocomp(f))


YES = ("1", "true", "yes", "pass")


def judges(c: Context) -> dict[str, pa.Table]:
    """Agreement with each other judge (Table 21): name -> its table."""
    bench = c.data.benchmark.to_pylist()
    keys = {r["sample_id"]: (r["family"], r["n"], r["condition"]) for r in bench}
    ours_ok = {r["sample_id"]: bool(r.get("accepted", True)) for r in bench}
    out = {}
    for name, rows in c.data.judges.items():
        cells, reference = keys, ours_ok
        if rows and "reference_passed" in rows[0]:  # audit judge: verdicts with rejections
            cells = {**keys, **{r["sample_id"]: (r["family"], int(r["n"]), r["condition"])
                                for r in rows}}  # fmt: skip
            reference = {r["sample_id"]: r["reference_passed"].strip().lower() in YES
                         for r in rows}  # fmt: skip
        theirs = {
            r["sample_id"]: r["passed"].strip().lower() in YES
            for r in rows
            if r["sample_id"] in cells
        }
        out[name] = analysis.judge_agreement(reference, theirs, cells)
    return out


HUMAN_NOTE = (
    "Concordance between annotators and the automated verdicts; human Swap / Confusion "
    "accuracy (the long table of Table 11; the paper's layout is with the paper tables)."
)
AGREEMENT_NOTE = (
    "Items every annotator answered; categories yes/no (validity) and right/wrong (Swap, "
    "Confusion); unanimous = share of items with one answer throughout; kappa_undefined "
    "says why a kappa is – (one annotator, no item every annotator answered, or one answer "
    "throughout); family / condition all, n – : the task over every cell."
)
JUDGE_NOTE = (
    "a = this run's verdicts, b = the other judge; Cohen's kappa (kappa_undefined: why it is –); "
    "condition all: both conditions; family all, n –: every sample."
)


# in page order: the sections in this order, then the long tables folded away in this order
def _harness_table(key: str) -> Callable[[Context], pa.Table]:
    return lambda c: c.harness[key] if c.harness else pa.table({})


def _harness_applies(key: str) -> Callable[[Context], bool]:
    """A harness import's table; harness_unscored only when it lists something."""
    return lambda c: (
        c.harness is not None and (key != "harness_unscored" or c.harness[key].num_rows > 0)
    )


TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        "accuracy",
        "Accuracy per cell",
        "Accuracy per model, family, N, condition, set, protocol and score type, with the 95 % "
        "bootstrap interval over concepts (exact: the bootstrap distribution of an accuracy is "
        "binomial) and the chance baseline of the actual candidate sets (Tables 5, 12-14 are cut "
        "from it).",
        lambda c: analysis.accuracy(c.data.predictions),
        place="long",
        paper=("paper_table5", "paper_table7", "paper_table14", "paper_blind_choice"),
    ),
    TableSpec(
        "context_deltas",
        "Contextual minus Minimal",
        "accuracy_a = Minimal, accuracy_b = Contextual, delta = b - a on concepts whose two "
        "samples both passed validation; 95 % paired bootstrap interval; exact McNemar p-value "
        "(Table 6).",
        lambda c: analysis.context_deltas(c.data.predictions, c.scope.paired, c.seed),
        place="long",
        paper=("paper_table6",),
    ),
    TableSpec(
        "hard_negative_deltas",
        "Hard-negative-trained vs base model",
        "accuracy_a = base model, accuracy_b = the hard-negative-trained model, same items; "
        "paired interval and McNemar p-value (Table 7).",
        lambda c: analysis.model_deltas(c.data.predictions, _bases(c), c.seed),
        place="long",
    ),
    TableSpec(
        "per_relation",
        "Per-relation accuracy, Swap, every relation family (Table 15)",
        "",
        lambda c: analysis.per_relation(c.data.predictions, c.data.benchmark, c.kinds["relation"]),
    ),
    TableSpec(
        "confusion_taxonomy",
        "Confusion error taxonomy (Table 10)",
        "Each wrong Confusion choice (paper protocol) classified from its arrangement: the swap of "
        "the attributes; a repeated (object, attribute) pair; one object twice with different "
        "attributes; an attribute shared by distinct objects; or a same-scene candidate.",
        lambda c: analysis.confusion_taxonomy(
            c.data.predictions, c.data.benchmark, c.kinds["attribute"]
        ),
    ),
    TableSpec(
        "survival",
        "Validation survival per check (Table 3)",
        "A sample enters a check when it passed all earlier ones; survival = passed / entered, "
        "cumulative = passed / all samples of the cell.",
        lambda c: c.data.survival,
        lambda c: c.data.survival is not None,
    ),
    TableSpec(
        "survival_funnel",
        "Survival funnel",
        "Per stage: survivors of every stage up to it, share of the sampled items, rate = share "
        "of the previous stage (Table 3).",
        lambda c: survival_funnel(c.data.survival),
        lambda c: c.data.survival is not None,
        place="long",
        paper=("paper_table3",),
    ),
    TableSpec(
        "filter_shift",
        "Filter-induced distribution shift (Tables 4, 16)",
        "Total variation between the retained and the sampled (target) label / object "
        "frequencies, and the share of labels / objects kept within 0.5-1.5x and below 0.25x of "
        "target.",
        lambda c: analysis.filter_shift(c.data.concepts, c.data.benchmark),
        lambda c: c.data.concepts is not None,
    ),
    TableSpec(
        "caption_diversity",
        "Contextual caption diversity (Table 17)",
        "Distinct-n of word n-grams.",
        lambda c: analysis.caption_diversity(c.data.benchmark, _ours(c)),
    ),
    TableSpec(
        "human",
        "Human validation (Tables 11, 20)",
        HUMAN_NOTE,
        lambda c: agreement.human_results(c.data.human, c.data.benchmark),
        lambda c: bool(c.data.human),
        paper=("paper_table11",),
    ),
    TableSpec(
        "human_per_annotator",
        "Per-annotator raw scores (Table 20)",
        "Correct answers per annotator out of the items they answered: Swap, Confusion, and "
        "validity answers that agree with the validator.",
        lambda c: agreement.per_annotator_scores(c.data.human, c.data.benchmark),
        lambda c: bool(c.data.human),
        paper=("paper_table20",),
    ),
    TableSpec(
        "human_agreement",
        "Inter-annotator agreement (Fleiss' kappa)",
        AGREEMENT_NOTE,
        lambda c: agreement.human_agreement(c.data.human, c.data.benchmark),
        lambda c: bool(c.data.human),
    ),
    TableSpec(
        "table8",
        "Confusion fine-tuning (Table 8)",
        TABLE8_NOTE,
        lambda c: c.finetune["table8"],
        lambda c: bool(c.data.finetune),
    ),
    TableSpec(
        "finetune_deltas",
        "Fine-tuned vs pretrained (Table 8)",
        DELTAS_NOTE,
        lambda c: c.finetune["finetune_deltas"],
        lambda c: bool(c.data.finetune),
    ),
    TableSpec(
        "judge_agreement",
        "Agreement with judge {name} (Table 21)",
        JUDGE_NOTE,
        judges,
        lambda c: bool(c.data.judges),
        paper=("paper_table21",),
    ),
    *(
        TableSpec(key, heading, note, _harness_table(key), _harness_applies(key), place)
        for key, heading, note, place in harness.REPORT_TABLES
    ),
    TableSpec(
        "benchmark_profile",
        "Each model across benchmarks",
        harness.PROFILE_NOTE,
        lambda c: profile.profile(c.profile, c.seed),
        lambda c: bool(c.profile),
    ),
    TableSpec(
        "cross_generator",
        "Accuracy per generator (Table 9)",
        "Accuracy per generator x cell on the concepts every compared run kept.",
        lambda c: c.cross[0],
        lambda c: bool(c.compare),
        place="files",
    ),
    TableSpec(
        "generator_order",
        "Model order between generators (Table 9)",
        "Kendall rank correlation of the model orderings between each pair of generators.",
        lambda c: c.cross[1],
        lambda c: bool(c.compare),
        place="files",
    ),
)


def specs(place: Place) -> list[TableSpec]:
    """The registry's tables of one place, in page order."""
    return [spec for spec in TABLES if spec.place == place]


@dataclass(frozen=True)
class ReportTables:
    """Every long table of a run (key -> table), and what they were computed on: the scope, the
    layout of the paper tables, per table a note (why it is empty or left out) and caveats."""

    tables: dict[str, pa.Table]
    scope: Scope
    layout: Layout
    notes: dict[str, str]
    caveats: dict[str, list[str]]


def build_tables(
    data: RunData,
    seed: int = 0,
    compare: Mapping[str, pa.Table] | None = None,
    profile: Mapping[str, Path] | None = None,
) -> ReportTables:
    """Every registered table that applies to the run `data` (`compare`: generator name ->
    predictions, this run's included, for Table 9; `profile`: run name -> folder, this run's
    included, of runs of different benchmarks), and its notes and caveats."""
    context = Context(data, seed, compare or {}, profile or {})
    tables = {
        key: table
        for spec in TABLES
        if spec.applies(context)
        for key, table in spec.outputs(context)
    }
    notes, caveats = table_notes(tables, context.scope, context.kinds, data.concepts is None)
    for key in ("human", "human_per_annotator", "human_agreement"):
        if key in tables:
            caveats[key] = progress_caveats(data.human_progress)
    if not data.human and data.human_progress is not None:  # collected, no answer yet
        notes["human"] = (
            "the study's answers (human/*.csv, from `autocomp audit collect --partial`) hold no "
            "answer yet: Tables 11 and 20 need at least one answered item."
        )
    layout = layout_of(data.models, context.kinds)
    return ReportTables(tables, context.scope, layout, notes, caveats)


def table_notes(
    tables: dict[str, pa.Table], scope: Scope, kinds: dict[str, list[str]], no_concepts: bool
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Per long table: why it is empty or left out (notes), and what it was computed on
    (caveats; see analysis/scope.py)."""
    notes: dict[str, str] = {}
    ours = {f for f in scope.kinds if scope.autocomp(f)}
    others = sorted(set(scope.kinds) - ours)
    relation, attribute = set(kinds.get("relation", [])), set(kinds.get("attribute", []))
    caveats = {
        "accuracy": scope.caveats(),
        "hard_negative_deltas": scope.caveats(),
        "context_deltas": scope.caveats(paired=True, compare=True),
        "per_relation": scope.caveats(lambda k: k[0] in relation),
        "confusion_taxonomy": scope.caveats(lambda k: k[0] in attribute),
        "caption_diversity": scope.caveats(lambda k: k[0] in ours and k[2] == "contextual"),
    }
    if not tables["context_deltas"].num_rows:
        caveats["context_deltas"] = ["Empty: " + scope.paired_reason()]
    if not relation & set(scope.kinds):
        notes["per_relation"] = (
            "no relation family in this run (Table 15 breaks Swap accuracy down per relation of "
            "the relation-kind Auto-Comp families, such as position)."
        )
        caveats["per_relation"] = []
    if not attribute & set(scope.kinds):
        notes["confusion_taxonomy"] = (
            "no attribute family in this run (Table 10 classifies wrong Confusion choices by "
            "their Auto-Comp arrangement, which only attribute-kind families have)."
        )
        caveats["confusion_taxonomy"] = []
    if others:
        notes["caption_diversity"] = (
            f"not computed for {', '.join(others)}: not Auto-Comp families, their captions are "
            "not LLM-written Contextual captions of an Auto-Comp concept."
        )
        if not ours:
            caveats["caption_diversity"] = []
    if "filter_shift" in tables:
        rejected = sum(s.rejected for s in scope.samples.values())
        shift = []
        if rejected:
            shift.append(
                f"Retained = the accepted samples: the {rejected:,} rejected samples "
                "kept in this benchmark are not counted."
            )
        if rejected == len(scope.samples):
            shift.append(
                "No sample was accepted, so nothing was retained: the shift is "
                "undefined (–), not 0 (which would claim perfect balance)."
            )
        caveats["filter_shift"] = shift
    elif no_concepts:
        notes["filter_shift"] = (
            "the benchmark has no concept set (concepts.parquet, the sampled concepts the "
            "retained ones are compared with)."
        )
    if "survival_funnel" in tables:
        caveats["survival"] = caveats["survival_funnel"] = fallback_note(tables["survival_funnel"])
    return notes, caveats
