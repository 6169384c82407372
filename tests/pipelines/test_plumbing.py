"""The plumbing table (autocomp.pipelines.plumbing): every configuration field of a profile
reaches the pipelines or is listed as local-only with its reason; parameter names follow one
rule; the components take exactly their stage's fields and rebuild the configuration the
profile holds; every compiled input and output has the description the KFP UI shows; and the
library checks (pipelines.checks) refuse what the CLI refuses. `make lint` runs this file."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap

import pytest

from autocomp.config import PROFILES, with_overrides
from autocomp.errors import ParameterError, UsageError
from autocomp.pipelines import checks, plumbing
from autocomp.pipelines.plumbing import LOCAL_ONLY, PARAMETERS, PIPELINES, stages


def test_every_configuration_field_is_plumbed_or_local_only():
    assert plumbing.unplumbed() == []
    # the check can fail: drop one reason and its field is reported
    fewer = {k: v for k, v in LOCAL_ONLY.items() if k != "score.device"}
    assert plumbing.unplumbed(fewer) == ["score.device"]
    reached = {path for ps in PARAMETERS.values() for p in ps for path in p.feeds}
    for path, why in LOCAL_ONLY.items():  # a real field, not also plumbed, with a reason
        owner, _, name = path.partition(".")
        kind = type(PROFILES["paper"]) if owner == "profile" else stages()[owner]
        assert name in {f.name for f in dataclasses.fields(kind)}, path
        assert path not in reached and len(why) > 10, path


def test_the_score_and_finetune_settings_and_every_batch_size_reach_a_pipeline():
    fed = {path for ps in PARAMETERS.values() for p in ps for path in p.feeds}
    for stage in ("caption", "render", "validate", "negatives", "score"):
        assert f"{stage}.batch_size" in fed, stage
    for field in ("blind", "choice_negatives", "choice_seed", "limit", "max_candidates"):
        assert f"score.{field}" in fed
    assert {f"finetune.{f.name}" for f in dataclasses.fields(PROFILES["paper"].finetune)} <= fed
    assert "profile" not in {p.name for p in PARAMETERS["finetune_models"]}  # no name to resolve


def test_parameter_names_are_their_field_or_stage_and_field():
    for pipeline, params in PARAMETERS.items():
        names = [p.name for p in params]
        assert len(names) == len(set(names)), pipeline
        for p in params:
            for path in p.feeds:
                stage, _, field = path.partition(".")
                assert p.name in (field, f"{stage}_{field}"), (pipeline, p.name, path)
            assert p.source or p.default is not plumbing.REQUIRED or p.name == "name"


@pytest.mark.parametrize("profile", list(PROFILES))
def test_a_component_rebuilds_the_profiles_configuration(profile):
    """What the components make from a profile's arguments is the profile's configuration
    (the fan-out num_shards replaces each stage's own shard count; local-only fields keep their
    defaults)."""
    chosen = PROFILES[profile]
    for pipeline in PIPELINES:
        given = {**plumbing.defaults(pipeline), **plumbing.arguments(pipeline, chosen)}
        for stage, made in plumbing.configs(pipeline, given).items():
            expected = getattr(chosen, stage)
            if stage in ("render", "validate"):
                expected = with_overrides(expected, num_shards=chosen.num_shards)
            assert made == expected, (profile, stage)


def test_a_profile_whose_seeds_disagree_is_refused():
    tiny = PROFILES["tiny"]
    odd = dataclasses.replace(tiny, caption=with_overrides(tiny.caption, seed=3))
    with pytest.raises(ValueError, match="caption.seed differs from sample.seed"):
        plumbing.arguments("generate_benchmark", odd)


def _components() -> dict[str, list]:
    """Stage -> the components that rebuild its configuration."""
    from autocomp.pipelines.definitions.components import evaluation, finetune, generation

    return {
        "sample": [generation.sample],
        "caption": [generation.caption],
        "render": [generation.render, generation.shard_plan],
        "validate": [generation.validate, generation.shard_plan],
        "curate": [generation.curate],
        "negatives": [generation.negatives],
        "score": [evaluation.score],
        "finetune": [finetune.split, finetune.train],
    }


def _every_component() -> list:
    from autocomp.pipelines.definitions.components import evaluation, finetune, generation

    found = []
    for module in (generation, evaluation, finetune):
        found += [v for v in vars(module).values() if hasattr(v, "component_spec")]
    return found


def _tree(component) -> ast.FunctionDef:
    source = textwrap.dedent(inspect.getsource(component.python_func))
    func = ast.parse(source).body[0]
    assert isinstance(func, ast.FunctionDef)
    return func


def _rebuilds(func: ast.FunctionDef, stage: str) -> list[ast.Call]:
    return [node for node in ast.walk(func)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "rebuild" and node.args
            and isinstance(node.args[0], ast.Constant) and node.args[0].value == stage]  # fmt: skip


def test_each_component_rebuilds_its_config_from_its_inputs_by_name():
    """A component passes each field of its stage's configuration from the input of that name
    (or of the parameter's name, where a step takes two stages' fields: render_settings), in
    one `rebuild` call; its declared input types are the parameters' types."""
    kinds = {"String": str, "Integer": int, "Float": float, "Boolean": bool, "List": list,
             "Dict": dict}  # fmt: skip
    for stage, components in _components().items():
        fed = plumbing.fed(stage)
        for component in components:
            func = _tree(component)
            calls = _rebuilds(func, stage)
            assert len(calls) == 1, (component.name, stage)
            given = {kw.arg: kw.value for kw in calls[0].keywords}
            assert set(given) == set(fed), (component.name, stage)
            declared = component.component_spec.inputs
            for field, value in given.items():
                assert isinstance(value, ast.Name), (component.name, field)
                assert value.id in (field, fed[field].name), (component.name, field, value.id)
                assert kinds[declared[value.id].type] is plumbing.kfp_type(fed[field]), field


def test_no_component_takes_an_input_it_does_not_read_or_reads_locals():
    """Each step receives only what it reads: every input is used in its body, and no
    component hands its whole namespace on (no locals(), no vars())."""
    components = _every_component()
    assert len(components) >= 15
    for component in components:
        func = _tree(component)
        names = [a.arg for a in func.args.args]
        read = {node.id for node in ast.walk(func)
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}  # fmt: skip
        assert set(names) <= read, (component.name, sorted(set(names) - read))
        called = {node.func.id for node in ast.walk(func)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}  # fmt: skip
        assert not called & {"locals", "vars", "globals"}, component.name


def test_rebuild_refuses_missing_or_foreign_fields():
    with pytest.raises(TypeError, match=r"missing \['batch_size'"):
        plumbing.rebuild("negatives", protocol="paper")
    with pytest.raises(TypeError, match=r"not its fields \['workers'\]"):
        plumbing.rebuild("negatives", protocol="paper", batch_size=8, workers=1)
    made = plumbing.rebuild(
        "score", blind="", choice_negatives=3, choice_seed=0, limit=0, batch_size=0,
        max_candidates=64,
    )  # fmt: skip
    assert made.limit is None and made.batch_size is None  # the stand-ins are None again


def _spec(pipeline: str) -> dict:
    from google.protobuf import json_format

    from autocomp.pipelines.definitions import build

    return json_format.MessageToDict(build(pipeline, cluster=False).pipeline_spec)


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_every_input_and_output_has_the_description_the_ui_shows(pipeline):
    """Pipeline inputs get the table's help; each component's inputs and outputs get their
    docstring's Args / Returns (KFP keeps those; a component's summary line has no place in
    the compiled spec)."""
    spec = _spec(pipeline)
    helps = {p.name: p.help for p in PARAMETERS[pipeline]}
    root = spec["root"]["inputDefinitions"]["parameters"]
    assert set(root) == set(helps)
    assert {name: d.get("description") for name, d in root.items()} == helps
    executors = [c for c in spec["components"].values() if "executorLabel" in c]
    assert executors
    for component in executors:
        for side in ("inputDefinitions", "outputDefinitions"):
            for kind in ("parameters", "artifacts"):
                for name, d in component.get(side, {}).get(kind, {}).items():
                    assert d.get("description"), (component["executorLabel"], side, name)


def test_pipeline_signatures_come_from_the_table():
    from autocomp.pipelines.definitions.builder import signature

    for pipeline in PIPELINES:
        made = signature(pipeline, str)
        assert list(made.parameters) == [p.name for p in PARAMETERS[pipeline]]
        defaults = plumbing.defaults(pipeline)
        for name, parameter in made.parameters.items():
            if parameter.default is not inspect.Parameter.empty:
                assert parameter.default == defaults[name]
        assert made.parameters["name"].default is inspect.Parameter.empty


def test_building_a_pipeline_resolves_no_image_when_imported():
    """Importing the definitions runs no git and reads no lock: images are resolved when a
    pipeline is built for the cluster."""
    import subprocess
    import sys

    code = (
        "import subprocess, autocomp.pipelines.cluster.images as images\n"
        "calls = []\n"
        "real = subprocess.run\n"
        "subprocess.run = lambda *a, **k: calls.append(a) or real(*a, **k)\n"
        "import pipelines, components\n"
        "import autocomp.pipelines.definitions.components.generation as g\n"
        "import autocomp.pipelines.definitions.generate_benchmark\n"
        "assert calls == [], calls\n"
        "assert g.caption.component_spec.implementation.container.image == "
        "'autocomp-caption:unresolved'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# ----------------------------------------------------------------------------- checks

GOOD = {"generate_benchmark": {"name": "run-1"}, "evaluate_models": {"name": "run-1"},
        "finetune_models": {"name": "run-1"}, "generate_and_evaluate": {"name": "run-1"}}  # fmt: skip


def test_the_chained_pipeline_takes_both_pipelines_parameters_once():
    chained = [p.name for p in PARAMETERS["generate_and_evaluate"]]
    generate = [p.name for p in PARAMETERS["generate_benchmark"]]
    evaluate = [p.name for p in PARAMETERS["evaluate_models"] if p.name not in ("name", "store")]
    assert chained == generate + evaluate  # evaluate_models' name: the published one
    assert checks.check("generate_and_evaluate", {"name": "run-1", "models": ["all"]})
    with pytest.raises(UsageError, match="models"):  # each part's own rules hold
        checks.check("generate_and_evaluate", {"name": "run-1", "models": []})


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_the_paper_defaults_pass_the_checks(pipeline):
    full = checks.check(pipeline, GOOD[pipeline])
    assert full["name"] == "run-1" and set(full) == {p.name for p in PARAMETERS[pipeline]}


@pytest.mark.parametrize(
    "pipeline, given, what",
    [
        ("generate_benchmark", {"count": 0}, "count"),
        ("generate_benchmark", {"count": "5"}, "count"),  # a string where an integer belongs
        ("generate_benchmark", {"seed": -1}, "seed"),
        ("generate_benchmark", {"num_shards": 0}, "num_shards"),
        ("generate_benchmark", {"specs": "colour:2"}, "specs"),
        ("generate_benchmark", {"renderer": "no-such-renderer"}, "renderer"),
        ("generate_benchmark", {"captioner": "no-such"}, "captioner"),
        ("generate_benchmark", {"caption_fallback": "always"}, "caption_fallback"),
        ("generate_benchmark", {"caption_batch_size": 0}, "caption_batch_size"),
        ("generate_benchmark", {"validate_batch_size": 0}, "validate_batch_size"),
        ("generate_benchmark", {"negatives_batch_size": 0}, "negatives_batch_size"),
        ("generate_benchmark", {"masks": "pixels"}, "masks"),
        ("generate_benchmark", {"vqa": "clip-vit-b-16"}, "vqa"),
        ("generate_benchmark", {"protocol": "loose"}, "protocol"),
        ("generate_benchmark", {"render_settings": {"no_such_setting": 1}}, "render_settings"),
        ("generate_benchmark", {"name": "../../etc"}, "name"),
        ("generate_benchmark", {"name": "a b"}, "name"),
        ("generate_benchmark", {"reuse_concepts": "../x"}, "reuse_concepts"),
        ("generate_benchmark", {"store": ""}, "store"),
        ("generate_benchmark", {"colour": "red"}, "colour"),
        ("evaluate_models", None, "name"),  # no name at all
        ("evaluate_models", {"models": ["no-such-model"]}, "models"),
        ("evaluate_models", {"models": []}, "models"),
        ("evaluate_models", {"models": ["all", "clip-vit-b-16"]}, "models"),
        ("evaluate_models", {"limit": -1}, "limit"),
        ("evaluate_models", {"batch_size": -2}, "batch_size"),
        ("evaluate_models", {"blind": "maybe"}, "blind"),
        ("evaluate_models", {"blind": "choice", "choice_negatives": 0}, "choice_negatives"),
        ("evaluate_models", {"max_candidates": 0}, "max_candidates"),
        ("evaluate_models", {"report_seed": -1}, "report_seed"),
        ("finetune_models", {"models": ["tiny-qwen2.5-vl"]}, "models"),
        ("finetune_models", {"negatives": ["both"]}, "negatives"),
        ("finetune_models", {"negatives": []}, "negatives"),
        ("finetune_models", {"seeds": [-1]}, "seeds"),
        ("finetune_models", {"k": -1}, "k"),
        ("finetune_models", {"steps": 0}, "steps"),
        ("finetune_models", {"heldout_fraction": 1.5}, "heldout_fraction"),
        ("finetune_models", {"family": "position"}, "family"),  # Confusion needs attributes
        ("finetune_models", {"split_seed": -3}, "split_seed"),
    ],
)
def test_bad_parameters_are_refused_by_the_library(pipeline, given, what):
    """Each refusal names the pipeline parameter, whichever field the stage's rule checks."""
    with pytest.raises(ParameterError) as refused:
        checks.check(pipeline, {} if given is None else {**GOOD[pipeline], **given})
    assert refused.value.what == what


def test_a_component_missing_a_field_fails_loudly():
    with pytest.raises(KeyError):
        plumbing.values("render", {"renderer": "tiny-sd3"})
