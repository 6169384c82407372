"""The checks a run's pipeline parameters pass before anything starts: the local run
(local.run), submit and schedule (cluster.client) all call `check`, so the Python API refuses
what the CLI refuses. Each stage's configuration is rebuilt from the parameters as its
component rebuilds it (plumbing.configs) and checked by that stage's own rule; the parameters
no configuration holds (names, the store, models, seeds, negative kinds) are checked here.

A failed check names the pipeline parameter (a ParameterError: `caption_engine`, `count`),
whichever field the stage's rule names (`engine`, `count`): the plumbing table says which
parameter sets that field, so the same check reads right from `autocomp submit --param`, from
`run_local(...)` and from the CLI flags of `autocomp run` (autocomp.cli.flags).

No kfp here (the CLI checks before kfp is imported).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator, Mapping
from typing import Any

from autocomp.config import NEGATIVE_KINDS
from autocomp.errors import ParameterError, UsageError
from autocomp.pipelines.plumbing import (
    ALL,
    Parameter,
    Required,
    configured,
    defaults,
    fed,
    kfp_type,
    parameters,
    parts,
    stage_config,
    stages,
)
from autocomp.store.catalog.ids import check_component


def _type_name(kind: type) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false",
            list: "a list", dict: "a mapping"}[kind]  # fmt: skip


def _check_type(parameter: Parameter, value: Any) -> None:
    kind = kfp_type(parameter)
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        raise UsageError(parameter.name, value, f"must be {_type_name(kind)}")


def check_name(value: str, what: str = "name") -> str:
    """A benchmark name: one path component (store.catalog.ids.check_component)."""
    return check_component(what, value)


def _check_models(pipeline: str, models: list[Any]) -> None:
    from autocomp.scoring.registry import get_model

    if not models or not all(isinstance(m, str) for m in models):
        raise UsageError("models", models, "name one or more models (or [all])")
    if "evaluate_models" in parts(pipeline) and models == [ALL]:
        return
    if ALL in models:
        raise UsageError("models", models, "`all` stands alone: models=[all]")
    for name in models:
        entry = get_model(name)
        if pipeline == "finetune_models" and not entry.kind.finetune:
            raise UsageError("models", name, "fine-tuning takes open_clip models only")


def _check_run_level(pipeline: str, full: dict[str, Any]) -> None:
    """The parameters no stage configuration holds: names, the store, seeds, models, kinds."""
    from autocomp.config import negative_kind

    check_name(full["name"])
    if full.get("reuse_concepts"):
        check_name(full["reuse_concepts"], "reuse_concepts")
    if not full["store"]:
        raise UsageError("store", full["store"], "give a folder or s3://bucket/prefix")
    for seed in ("report_seed", "split_seed"):
        if full.get(seed, 0) < 0:
            raise UsageError(seed, full[seed], "must be 0 or more")
    if "models" in full:
        _check_models(pipeline, full["models"])
    if "negatives" in full:
        if not full["negatives"]:
            raise UsageError("negatives", [], f"name one or more of {', '.join(NEGATIVE_KINDS)}")
        for kind in full["negatives"]:
            negative_kind(kind)


def _stage_rule(stage: str) -> Any:
    """The stage's own check of its configuration (None: nothing beyond its fields' types)."""
    if stage == "sample":
        from autocomp.protocol.stages import check_sample_config

        return check_sample_config
    if stage == "caption":
        from autocomp.generation.caption import check_config

        return check_config
    if stage == "render":
        from autocomp.generation.render import check_config as check_render

        return check_render
    if stage == "validate":
        from autocomp.generation.validate import check_config as check_validate

        return check_validate
    if stage == "negatives":
        from autocomp.protocol.stages import check_negatives_config

        return check_negatives_config
    if stage == "score":
        from autocomp.scoring.checks import check_config as check_score

        return check_score
    return None  # curate: one bool; finetune: FinetuneConfig checks itself when it is made


def parameter_name(stage: str, what: str) -> str:
    """A stage's error name (`batch_size`, `settings`, `input_path row 3`) as the pipeline
    parameter that sets that field (`caption_batch_size`, `caption_settings`); a field no
    parameter sets as `stage.field`; anything else (a file, a row) as it is."""
    match = re.match(r"[A-Za-z_][A-Za-z0-9_]*", what)
    if match is None:
        return what
    field, rest = match[0], what[match.end() :]
    if field in fed(stage):
        return fed(stage)[field].name + rest
    if field in {f.name for f in dataclasses.fields(stages()[stage])}:
        return f"{stage}.{field}{rest}"
    return what


@contextlib.contextmanager
def _as_parameter(stage: str | None = None) -> Iterator[None]:
    """A check's UsageError as a ParameterError naming the parameter (`stage`: the stage whose
    configuration is checked; None: the names are parameter names already)."""
    try:
        yield
    except ParameterError:
        raise
    except UsageError as exc:
        what = exc.what if stage is None else parameter_name(stage, exc.what)
        raise ParameterError(what, exc.value, exc.fix) from None


def check(pipeline: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """Every parameter of one run of `pipeline`, checked before anything starts (the local run,
    submit and schedule call it): `given` over the defaults of the paper profile; unknown names,
    missing required ones and wrong types refused; each stage's configuration rebuilt from its
    parameters as its component rebuilds it and checked by its stage's own rule; names, models,
    seeds and negative kinds. Returns the run's full parameters; a failure is a ParameterError
    that names the parameter."""
    table = {p.name: p for p in parameters(pipeline)}
    unknown = sorted(set(given) - set(table))
    if unknown:
        known = ", ".join(sorted(table))
        raise ParameterError(unknown[0], None, f"{pipeline} has no such parameter; known: {known}")
    full = {**defaults(pipeline), **given}
    missing = [name for name, value in full.items() if isinstance(value, Required)]
    if missing:
        raise ParameterError(missing[0], None, f"{pipeline} needs it; give {missing[0]}=...")
    with _as_parameter():
        for name, value in full.items():
            _check_type(table[name], value)
        _check_run_level(pipeline, full)
    for stage in configured(pipeline):
        with _as_parameter(stage):
            config = stage_config(stage, full)
            rule = _stage_rule(stage)
            if rule is not None:
                rule(config)
    if "confusion" in full.get("negatives", []):
        from autocomp.finetune.sampler import check_attribute_family

        with _as_parameter("finetune"):
            check_attribute_family(full["family"])
    return full
