"""Helpers of the tests that kill a running score step and compare what it published: the
score executor's pid (the python, not its sh parent) and a published run's bytes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def score_executor(wanted: Callable[[int, str], bool]) -> int | None:
    """The pid of a kfp.local score step's executor whose pid and command line `wanted`
    accepts (each test picks only its own run's), or None while none runs."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        args = cmdline.split("\0")
        if (
            args[1:3] == ["-m", "kfp.dsl.executor_main"]  # the python, not its sh parent
            and "--function_to_execute\0score\0" in cmdline + "\0"
            and wanted(int(entry.name), cmdline)
        ):
            return int(entry.name)
    return None


def published(store: Any, key: str) -> dict[str, bytes]:
    """Every file of the run published at `key`, by its manifest's paths."""
    manifest = store.manifest(key)
    assert manifest is not None, key
    return {f["path"]: store.read_bytes(f"{key}/{f['path']}") for f in manifest["files"]}
