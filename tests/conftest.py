from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from autocomp.family import FAMILY_PATH_ENV, load_family

FIXTURE_FAMILIES = Path(__file__).parent / "fixtures" / "families"


@pytest.fixture(scope="session", autouse=True)
def offline_tiny_cache(tmp_path_factory):
    """Tests never reach the hub, and build tiny weights afresh in a session folder."""
    import os

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["AUTOCOMP_CACHE"] = str(tmp_path_factory.mktemp("autocomp-cache"))


def _shipped_family(name: str):
    @pytest.fixture
    def fixture():
        return load_family(name)

    return fixture


color = _shipped_family("color")
position = _shipped_family("position")
relative_size = _shipped_family("relative_size")
shape_color = _shipped_family("shape_color")


@pytest.fixture
def fixture_path(monkeypatch):
    """Put tests/fixtures/families (the 'material' family) on the family search path."""
    monkeypatch.setenv(FAMILY_PATH_ENV, str(FIXTURE_FAMILIES))
    return FIXTURE_FAMILIES


@pytest.fixture
def family_dir(tmp_path, monkeypatch):
    """A fresh folder on the family search path; returns a function that writes a family."""
    monkeypatch.setenv(FAMILY_PATH_ENV, str(tmp_path))

    def write(name: str, text: str) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(textwrap.dedent(text))
        return path

    return write


CONTEXTUAL_BLOCK = """
contextual:
  system: Write captions.
  user: "{examples} | {spec}"
  example: "{spec} -> {caption}"
  examples:
    - {objects: [%s], attributes: [%s], caption: "%s"}
"""


def small_attribute_family(name: str = "tiny_attr") -> str:
    """An attribute family small enough to enumerate, with both kinds of conflicts."""
    return (
        f"""
name: {name}
kind: attribute
n: {{min: 1, max: 3}}
objects:
  entries: [cup, tea cup, gloves, lamp, chair]
  never_together: [[lamp, chair]]
attributes:
  entries: [red, blue, gold, yellow, tea]
  never_together: [[gold, yellow]]
caption: {{suffix: " on a white background."}}
"""
        + CONTEXTUAL_BLOCK % ("cup", "red", "A red cup.")
    )


def small_relation_family(name: str = "tiny_rel") -> str:
    return (
        f"""
name: {name}
kind: relation
n: {{min: 2, max: 3}}
objects:
  entries: [cup, tea cup, gloves, lamp, chair]
  never_together: [[lamp, chair]]
relations:
  entries:
    - {{name: above, meaning: above, inverse: under}}
    - {{name: under, meaning: under, inverse: above}}
    - {{name: on top of, meaning: above, inverse: under}}
    - {{name: beside, meaning: beside, inverse: beside}}
caption:
  first: "{{subject}} is {{relation}} {{object}}"
  next: ", which is {{relation}} {{object}}"
  suffix: " on a white background."
"""
        + CONTEXTUAL_BLOCK % ("cup, lamp", "above", "A cup is above a lamp.")
    )
