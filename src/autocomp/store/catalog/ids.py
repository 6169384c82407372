"""The sample id, `<concept_id>/<condition>`: one rendered image of a concept (the Minimal and
the Contextual sample of a concept share its concept id). Made and parsed here only.

A benchmark made straight from concepts (no render) has rows without a sample id; such a row is
named by its concept id and condition when it has both, by its concept id alone when it has no
condition, and by its position (`row-<index>`) when it has neither concept nor sample id: the
rule the score stage and the report both apply (`row_sample_id`, `with_sample_keys`).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

SEPARATOR = "/"
DEFAULT_CONDITION = "minimal"  # the condition of a row that names none


def sample_id(concept_id: str, condition: str) -> str:
    """The id of the sample of `concept_id` in `condition`."""
    return f"{concept_id}{SEPARATOR}{condition}"


def parse_sample_id(sample_id: str) -> tuple[str, str]:
    """(concept id, condition) of a sample id; an id without a condition (a concept id, a
    `row-<index>` name) is its own concept, with condition ""."""
    concept, separator, condition = sample_id.rpartition(SEPARATOR)
    return (concept, condition) if separator else (sample_id, "")


def concept_of(sample_id: str) -> str:
    """The concept of a sample id (the pairing key of a concept's Minimal and Contextual rows)."""
    return parse_sample_id(sample_id)[0]


def row_sample_id(row: dict[str, Any], index: int) -> str:
    """The sample id of a benchmark row: its own, else derived (see the module doc)."""
    if row.get("sample_id"):
        return str(row["sample_id"])
    name = row.get("concept_id") or f"row-{index}"
    return sample_id(name, row["condition"]) if row.get("condition") else name


def with_sample_keys(table: pa.Table) -> pa.Table:
    """`table` with `sample_id` and `condition`, derived where missing (see the module doc;
    a row without a condition is a Minimal one)."""
    names = table.column_names
    rows = table.num_rows
    if "sample_id" not in names:
        keys = [c for c in ("concept_id", "condition") if c in names]
        values = table.select(keys).to_pylist() if keys else [{}] * rows
        ids = [row_sample_id(row, i) for i, row in enumerate(values)]
        table = table.append_column("sample_id", pa.array(ids, pa.string()))
    if "condition" not in names:
        table = table.append_column("condition", pa.array([DEFAULT_CONDITION] * rows, pa.string()))
    return table


# A name that becomes one path component (a model's, run's, benchmark's, annotator's folder or
# file, a pipeline run's name): letters, digits, '.', '_' and '-', not starting with '.' or '-'
# (so never `.`, `..`, a hidden or temporary name, or an option), at most NAME_MAX characters.
NAME_RULE = r"[A-Za-z0-9][A-Za-z0-9._-]*"
NAME_MAX = 128


def check_component(what: str, value: object) -> str:
    """`value` if it is a safe single path component (see NAME_RULE), else a UsageError naming
    `what`: the one check every name used as a path passes, wherever it comes from."""
    import re

    from autocomp.errors import UsageError

    if not isinstance(value, str) or not re.fullmatch(NAME_RULE, value):
        raise UsageError(what, value, "must be a name of letters, digits, '.', '_' and '-' "
                         "(starting with a letter or digit; no '/', '..' or spaces)")  # fmt: skip
    if len(value) > NAME_MAX:
        raise UsageError(
            what, value[:40] + "...", f"is {len(value)} characters; at most {NAME_MAX}"
        )
    return value
