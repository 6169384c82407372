"""Configuration lives in one place: the compiled pipelines' defaults are the `paper` profile,
the local run uses the `tiny` profile, and the pipeline verbs work outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autocomp.config import PROFILES
from autocomp.pipelines.local.run import local_arguments
from autocomp.pipelines.plumbing import PIPELINES, arguments

pytestmark = pytest.mark.slow


def _defaults(path: Path) -> dict:
    spec = next(yaml.safe_load_all(path.read_text()))  # the pipeline spec, then the platform spec
    params = spec["root"]["inputDefinitions"]["parameters"]
    return {name: p["defaultValue"] for name, p in params.items() if "defaultValue" in p}


def test_compiled_defaults_are_the_paper_profile(tmp_path):
    from autocomp.pipelines.compile import compile_all

    paths = compile_all(tmp_path)
    paper = PROFILES["paper"]
    for pipeline in PIPELINES:
        compiled = _defaults(paths[pipeline])
        expected = arguments(pipeline, paper)
        assert {k: compiled[k] for k in expected} == expected, pipeline
    generate = _defaults(paths["generate_benchmark"])
    assert generate["render_batch_size"] == paper.render.batch_size == 16
    assert generate["caption_batch_size"] == paper.caption.batch_size  # plumbed since issue 21
    evaluate = _defaults(paths["evaluate_models"])
    assert evaluate["limit"] == 0 and evaluate["blind"] == ""  # None travels as 0 / ""
    finetune = _defaults(paths["finetune_models"])
    assert finetune["steps"] == paper.finetune.steps == 5000
    assert finetune["models"] == list(paper.finetune_models)


def test_local_run_uses_the_tiny_profile():
    tiny = PROFILES["tiny"]
    generate, evaluate = local_arguments("tiny")
    assert generate == arguments("generate_benchmark", tiny)
    assert evaluate == arguments("evaluate_models", tiny)
    assert generate["render_batch_size"] == tiny.render.batch_size
    given, _ = local_arguments("tiny", ["tiny-clip"], count=5, specs=None)
    assert given["count"] == 5 and given["specs"] == tiny.sample.specs
    _, limited = local_arguments("tiny", limit=3)  # an evaluate_models parameter
    assert limited["limit"] == 3
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
    from autocomp.pipelines.compile import PIPELINES, WARMUP_FILE

    found = sorted(str(p.relative_to(tmp_path / "x")) for p in (tmp_path / "x").rglob("*.yaml"))
    assert found == sorted([f"{name}.yaml" for name in PIPELINES] + [WARMUP_FILE])
