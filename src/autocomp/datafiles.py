"""Validation shared by every YAML data file (families, the model registry, the generation
registry): one key check, so a typo is never silently ignored and every error reads alike."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from autocomp.errors import UsageError


def check_keys(where: str, mapping: object, required: Set[str], optional: Set[str]) -> dict:
    """`mapping` as a dict, if it is one and has every required key and no unknown one;
    otherwise a UsageError naming `where`, the offending key and the allowed keys."""
    if not isinstance(mapping, dict):
        raise UsageError(where, mapping, "must be a mapping (key: value)")
    missing = sorted(required - mapping.keys())
    if missing:
        raise UsageError(where, sorted(mapping), f"missing required key(s): {', '.join(missing)}")
    unknown = sorted(mapping.keys() - required - optional)
    if unknown:
        allowed = ", ".join(sorted(required | optional))
        raise UsageError(where, unknown[0], f"unknown key; allowed keys: {allowed}")
    return mapping


def check_type(where: str, key: str, value: Any, kind: type | tuple[type, ...]) -> Any:
    """`value` if it is of `kind` (bool is never taken for int, nor a string for a bool)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    wrong_bool = isinstance(value, bool) and bool not in kinds
    if not isinstance(value, kinds) or wrong_bool:
        names = " or ".join(k.__name__ for k in kinds)
        raise UsageError(f"{where}: {key}", value, f"must be a {names}")
    return value
