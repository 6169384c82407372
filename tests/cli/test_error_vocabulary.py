"""One check, three readers (issue 21.5): the library names a configuration field or function
parameter (`limit`, `batch_size`), a pipeline check names the pipeline parameter
(`caption_batch_size`), and the CLI prints the flag the user typed (`--batch-size`) through the
one table in autocomp.cli.flags. A guard keeps CLI flags out of the library's errors."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from autocomp.cli import flags
from autocomp.cli.finetune import SUB_VERBS
from autocomp.cli.main import build_parser, main
from autocomp.config import PROFILES, SampleConfig, ScoreConfig
from autocomp.errors import ParameterError, UsageError
from autocomp.pipelines import checks
from tests.conftest import pinned_images

SRC = Path(__file__).resolve().parents[2] / "src" / "autocomp"
TINY_CAPTION = PROFILES["tiny"].caption


def _score_limit(tmp: Path) -> None:
    from autocomp.scoring import score

    score(["tiny-clip"], tmp / "none.parquet", tmp / "out", ScoreConfig(limit=0))


def _caption(**fields: Any):
    from autocomp.generation.caption import check_config

    return lambda tmp: check_config(replace(TINY_CAPTION, **fields))


def _specs(tmp: Path) -> None:
    from autocomp.protocol.stages import check_sample_config

    check_sample_config(SampleConfig(specs="colour:2"))


def _count(tmp: Path) -> None:
    from autocomp.protocol.stages import sample_stage

    sample_stage("color", 2, 0, 0, tmp / "concepts.parquet")


@dataclass(frozen=True)
class Check:
    """One check as each reader meets it."""

    name: str
    argv: list[str]  # the CLI ({d}: prepared inputs, {out}: a new path)
    flag: str  # ... prints `<flag>: ...` (argparse: `argument <flag>: ...`)
    call: Any  # Python: call(tmp_path) raises a UsageError ...
    field: str  # ... whose `what` is the field or parameter
    pipeline: str  # a pipeline parameter ...
    given: dict[str, Any]  # ... given this value ...
    parameter: str  # ... is refused under its own name


CAPTION = ["caption", "--concepts", "{d}/concepts.parquet", "--out", "{out}", "--profile", "tiny"]
CHECKS = [
    Check("limit", ["score", "--model", "tiny-clip", "--benchmark", "{d}/none.parquet", "--out",
                    "{out}", "--limit", "0"], "--limit", _score_limit, "limit",
          "evaluate_models", {"limit": -1}, "limit"),
    Check("batch size", [*CAPTION, "--batch-size", "0"], "--batch-size", _caption(batch_size=0),
          "batch_size", "generate_benchmark", {"caption_batch_size": 0}, "caption_batch_size"),
    Check("specs", ["run", "--out", "{out}", "--specs", "colour:2"], "--specs", _specs, "specs",
          "generate_benchmark", {"specs": "colour:2"}, "specs"),
    Check("count", ["run", "--out", "{out}", "--count", "0"], "--count", _count, "count",
          "generate_benchmark", {"count": 0}, "count"),
    Check("engine", [*CAPTION, "--engine", "tgi"], "--engine", _caption(engine="tgi"), "engine",
          "generate_benchmark", {"caption_engine": "tgi"}, "caption_engine"),
    Check("settings key", [*CAPTION, "--set", "temperature=hot"], "--set",
          _caption(settings={"temperature": "hot"}), "settings", "generate_benchmark",
          {"caption_settings": {"temperature": "hot"}}, "caption_settings"),
]  # fmt: skip
IDS = [c.name for c in CHECKS]


@pytest.fixture(scope="module")
def d(tmp_path_factory) -> Path:
    from autocomp.protocol.stages import sample_stage

    d = tmp_path_factory.mktemp("inputs")
    sample_stage("color", 2, 4, 0, d / "concepts.parquet")
    return d


def _cli(argv: list[str], d: Path, out: Path, capsys) -> str:
    args = [a.replace("{d}", str(d)).replace("{out}", str(out)) for a in argv]
    try:
        code = main(args)
    except SystemExit as exc:  # argparse
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("check", CHECKS, ids=IDS)
def test_the_cli_prints_the_flag(check, d, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KFP_HOST", raising=False)
    err = _cli(check.argv, d, tmp_path / "out", capsys)
    verb = check.argv[0]
    assert err.startswith(f"autocomp {verb}: error: {check.flag}: ") or err.startswith(
        f"autocomp {verb}: error: argument {check.flag}: "  # argparse refuses a bad choice first
    ), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("check", CHECKS, ids=IDS)
def test_python_raises_the_field_name(check, tmp_path):
    with pytest.raises(UsageError) as refused:
        check.call(tmp_path)
    assert refused.value.what == check.field
    assert str(refused.value).startswith(f"{check.field}: ")


@pytest.mark.parametrize("check", CHECKS, ids=IDS)
def test_the_pipeline_check_names_the_parameter(check):
    with pytest.raises(ParameterError) as refused:
        checks.check(check.pipeline, {"name": "run-1", **check.given})
    assert refused.value.what == check.parameter


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    from autocomp.pipelines.compile import compile_all

    out = tmp_path_factory.mktemp("dist")
    with pinned_images(tmp_path_factory.mktemp("lock")):  # pullable images, dirty tree or not
        compile_all(out)
    return out


@pytest.mark.parametrize("check", CHECKS, ids=IDS)
def test_submit_prints_the_parameter_as_typed(check, dist, capsys, monkeypatch):
    """`autocomp submit --param count=0` names `count` (what the user typed), not `--count`:
    the checks run before any endpoint is needed."""
    import json

    monkeypatch.delenv("KFP_HOST", raising=False)
    (key, value), = check.given.items()  # fmt: skip
    text = json.dumps(value) if isinstance(value, dict) else str(value)
    argv = ["submit", "--dist", str(dist), "--pipeline", check.pipeline, "--name", "x",
            "--param", "name=run-1", "--param", f"{key}={text}"]  # fmt: skip
    err = _cli(argv, dist, dist / "out", capsys)
    assert err.startswith(f"autocomp submit: error: {check.parameter}: "), err


def test_run_level_parameters_read_by_their_flags_and_as_typed(dist, tmp_path, capsys):
    """`name` is a flag of `run` (the benchmark's name) and of `submit` (the run's name): a bad
    benchmark name reads `--name` from `run` and `name` (the --param) from `submit`."""
    err = _cli(["run", "--out", str(tmp_path / "r"), "--name", "a/b"], dist, tmp_path, capsys)
    assert err.startswith("autocomp run: error: --name: 'a/b': "), err
    argv = ["submit", "--dist", str(dist), "--pipeline", "generate_benchmark", "--name", "x",
            "--param", "name=a/b"]  # fmt: skip
    err = _cli(argv, dist, tmp_path, capsys)
    assert err.startswith("autocomp submit: error: name: 'a/b': "), err


# ----------------------------------------------------------------------------- the table


def _verbs() -> dict[str, frozenset[str]]:
    parser = build_parser()
    top = next(a for a in parser._actions if hasattr(a, "choices") and a.dest == "verb")
    groups = {"audit": ("export", "serve", "collect", "judge"), "finetune": SUB_VERBS}
    words = [[v] for v in top.choices if v not in groups]
    words += [[group, v] for group, verbs in groups.items() for v in verbs]
    return {" ".join(w): flags.verb_names(parser, w) for w in words}


def test_the_default_rule_and_the_exceptions():
    assert flags.flag("score", "batch_size") == "--batch-size"
    assert flags.flag("score", "limit") == "--limit"
    assert flags.flag("score", "models") == "--model"
    assert flags.flag("caption", "settings") == "--set"
    assert flags.flag("caption", "caption.engine") == "--engine"  # a stage-qualified field
    assert flags.flag("import", "fmt") == "FORMAT"
    assert flags.flag("finetune report", "folders") == "--runs"
    assert flags.flag("score", "folders") == "--folders"  # VERB_FLAGS: that verb only


def test_every_spelling_in_the_table_is_one_a_verb_has():
    verbs = _verbs()
    everything = set().union(*verbs.values())
    assert set(flags.FLAGS.values()) <= everything, set(flags.FLAGS.values()) - everything
    for verb, spelled in flags.VERB_FLAGS.items():
        assert set(spelled.values()) <= verbs[verb], (verb, spelled)


def test_only_a_leading_name_the_verb_has_is_mapped():
    verbs = _verbs()
    negatives, score = verbs["negatives"], verbs["score"]
    assert flags.cli_what("negatives", "input_path row 3 (c-1)", negatives) == "--input row 3 (c-1)"
    assert flags.cli_what("score", "human annotations", score) == "human annotations"
    assert flags.cli_what("score", "/data/x.parquet", score) == "/data/x.parquet"
    assert flags.cli_what("score", "family", score) == "family"  # score has no --family
    assert flags.cli_what("score", "--limit", score) == "--limit"  # a CLI check's own words
    assert flags.cli_what("audit serve", "study_dir", verbs["audit serve"]) == "STUDY"


def test_a_parameter_error_keeps_its_name_where_the_verb_takes_param():
    verbs = _verbs()
    exc = ParameterError("count", 0, "must be at least 1")
    assert flags.cli_message("run", exc, verbs["run"]) == "--count: 0: must be at least 1"
    assert flags.cli_message("submit", exc, verbs["submit"]) == "count: 0: must be at least 1"


# ----------------------------------------------------------------------------- the guard

FLAG = re.compile(r"--[a-z][a-z0-9-]*")
NOT_ERRORS = {  # literals in library code that are not an input's name
    ("pipelines/cluster/images.py", "--quiet"),  # git diff --quiet
    ("pipelines/cluster/doctor.py", "--store-only"),  # the probe pod's command line
    ("pipelines/cluster/doctor.py", "--store"),
    ("pipelines/cluster/warmup.py", "--cache"),  # the warm-up Job's command line
}


def _flag_literals(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if FLAG.match(node.value) else []
    if isinstance(node, ast.JoinedStr) and node.values:
        head = node.values[0]
        if isinstance(head, ast.Constant) and FLAG.match(str(head.value)):
            return [str(head.value)]
    return []


def test_no_library_error_names_a_cli_flag():
    """No UsageError outside cli/ names a flag: neither as its first argument (`what`) nor as a
    string that is a flag and nothing else (the `option` an error is raised with, a default)."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("cli/"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                if name.endswith("Error") or name == "weights_error":
                    for text in _flag_literals(node.args[0]) if node.args else []:
                        found.append(f"{rel}:{node.lineno}: {name}({text!r}, ...)")
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and FLAG.fullmatch(text) and (rel, text) not in NOT_ERRORS:
                found.append(f"{rel}:{node.lineno}: {text!r}")
    assert found == [], "\n".join(found)


def test_the_guard_sees_a_flag():
    bad = ast.parse('raise UsageError("--limit", 0, "must be at least 1")')
    call = next(n for n in ast.walk(bad) if isinstance(n, ast.Call))
    assert _flag_literals(call.args[0]) == ["--limit"]
    fstring = ast.parse('UsageError(f"--input row {i}", 0, "x")')
    call = next(n for n in ast.walk(fstring) if isinstance(n, ast.Call))
    assert _flag_literals(call.args[0]) == ["--input row "]
