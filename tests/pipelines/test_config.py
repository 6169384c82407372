"""Configuration lives in one place: the compiled pipelines' defaults are the `paper` profile,
the local run uses the `tiny` profile, and the pipeline verbs work outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autocomp.config import PROFILES, evaluate_arguments, generate_arguments
from autocomp.pipelines.local import local_arguments

pytestmark = pytest.mark.slow


def _defaults(path: Path) -> dict:
    spec = next(yaml.safe_load_all(path.read_text()))  # the pipeline spec, then the platform spec
    params = spec["root"]["inputDefinitions"]["parameters"]
    return {name: p["defaultValue"] for name, p in params.items() if "defaultValue" in p}


def test_compiled_defaults_are_the_paper_profile(tmp_path):
    from autocomp.pipelines.compile import compile_all

    paths = compile_all(tmp_path)
    generate = _defaults(paths["generate_benchmark"])
    paper = PROFILES["paper"]
    assert {k: generate[k] for k in generate_arguments(paper)} == generate_arguments(paper)
    evaluate = _defaults(paths["evaluate_models"])
    assert {k: evaluate[k] for k in evaluate_arguments(paper)} == evaluate_arguments(paper)
    assert generate["render_batch_size"] == paper.render.batch_size == 16


def test_local_run_uses_the_tiny_profile():
    tiny = PROFILES["tiny"]
    generate, evaluate = local_arguments("tiny")
    assert generate == generate_arguments(tiny) and evaluate == evaluate_arguments(tiny)
    assert generate["render_batch_size"] == tiny.render.batch_size
    given, _ = local_arguments("tiny", ["tiny-clip"], count=5, specs=None)
    assert given["count"] == 5 and given["specs"] == tiny.sample.specs
    paper, chosen = local_arguments("paper")
    assert paper["caption_engine"] == "transformers" and chosen["models"] == ["all"]


def test_cli_defaults_come_from_the_profiles():
    from autocomp.cli.main import build_parser

    args = build_parser().parse_args(["render", "--captions", "c", "--out", "o"])
    assert args.batch_size is None  # filled from the chosen profile, not a second default


def test_compile_works_outside_the_checkout(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-m", "autocomp.cli.main", "compile", "--out", str(tmp_path / "x")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    from autocomp.pipelines.compile import PIPELINES

    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == sorted(
        f"{name}.yaml" for name in PIPELINES
    )
