"""The public entry points -- the stage functions docs/architecture.md's table names, and the
functions a Python caller starts from -- document their arguments and what they return (an
`Args:` section naming every parameter, and `Returns:`), read from the source (no import)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "autocomp"
EXTRA = [
    ("scoring/stage.py", "score"),
    ("importers/__init__.py", "import_benchmark"),
    ("store/publish.py", "publish_stage"),
]


def _table_entries() -> list[tuple[str, str]]:
    """(module, function) of every stage row of the architecture table: its module cell's
    `path.py` and the functions in brackets after it."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    found = []
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        for module, names in re.findall(r"`([\w/]+\.py)` \(([^)]*)\)", line):
            for name in re.findall(r"`(\w+)`", names):
                found.append((module, name))
    return found


ENTRIES = sorted({*_table_entries(), *EXTRA})


def test_the_table_names_the_stages():
    names = {name for _, name in ENTRIES}
    assert {"sample_stage", "negatives_stage", "caption_stage", "render_stage",
            "validate_stage", "curate_stage", "score", "report_stage"} <= names  # fmt: skip


@pytest.mark.parametrize("module, name", ENTRIES, ids=[f"{m}:{n}" for m, n in ENTRIES])
def test_an_entry_point_documents_its_args_and_returns(module, name):
    tree = ast.parse((SRC / module).read_text(encoding="utf-8"))
    if any(isinstance(n, ast.ClassDef) and n.name == name for n in tree.body):
        return  # a class the table names (ScoreRun): its methods are its interface
    (function,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    doc = ast.get_docstring(function) or ""
    assert "\nArgs:\n" in doc and "\nReturns:\n" in doc, f"{module}:{name}"
    args = doc.split("\nArgs:\n", 1)[1].split("\n\n", 1)[0]
    params = [a.arg for a in (*function.args.args, *function.args.kwonlyargs)]
    for param in params:
        assert re.search(rf"^\s+{param}:", args, re.MULTILINE), (module, name, param)
