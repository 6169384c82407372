"""The CLI's key=value parser for `--set role.key=value` (model settings, read as YAML scalars;
`--param` values are typed by the compiled pipeline instead: autocomp.pipelines.cluster.client)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autocomp.errors import UsageError


def split_pair(option: str, item: str, example: str) -> tuple[str, Any]:
    """`key=value` -> (key, value read as a YAML scalar); anything else is a usage error
    (`example` shows the expected form, e.g. `guidance_scale=5`)."""
    import yaml

    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise UsageError(option, item, f"must look like key=value (e.g. {example})")
    try:
        return key, yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        problem = str(exc).splitlines()[0]
        raise UsageError(option, item, f"the value is not a YAML scalar ({problem})") from None


def parse_settings(items: Sequence[str], allowed: dict[str, dict]) -> dict[str, dict]:
    """`--set role.key=value` (or `key=value` when there is one role) -> {role: {key: value}}.
    Keys must be settings of the chosen model."""
    out: dict[str, dict] = {}
    for item in items:
        key, value = split_pair("--set", item, "guidance_scale=5")
        role, _, name = key.rpartition(".")
        if not role and len(allowed) == 1:
            role = next(iter(allowed))
        if role not in allowed or name not in allowed[role]:
            known = ", ".join(f"{r}.{k}" for r, keys in allowed.items() for k in keys)
            raise UsageError("--set", item, f"unknown setting; known: {known}")
        out.setdefault(role, {})[name] = value
    return out
