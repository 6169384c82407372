"""A compiled pipeline package (dist/<pipeline>.yaml) and the checks a cluster run of it passes
before any request: `--param` values typed by the package's inputDefinitions, the run's whole
parameter set checked as the local run checks it (autocomp.pipelines.checks), and what only a
cluster run needs: a store the pods share (an S3 bucket, not a pod-local folder), and models that
fit the GPUs the package places each step on.

Versions are content-addressed: `<package version>-<first 12 hex of the YAML's SHA-256>`.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from autocomp import __version__
from autocomp.errors import UsageError
from autocomp.pipelines import plumbing
from autocomp.pipelines.plumbing import DISPLAY_NAMES

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")  # S3 bucket naming rules


def version_name(package: Path) -> str:
    return f"{__version__}-{hashlib.sha256(package.read_bytes()).hexdigest()[:12]}"


def load_package(pipeline: str, package: Path) -> dict[str, Any]:
    """The pipeline spec of a compiled package, checked to be `pipeline`'s."""
    return load_documents(pipeline, package)[0]


def load_documents(pipeline: str, package: Path) -> list[dict[str, Any]]:
    """The package's documents (pipeline spec, platform spec), checked to be `pipeline`'s."""
    import yaml

    if not package.is_file():
        raise UsageError(
            "package", str(package), "no compiled pipeline there; run `autocomp compile`"
        )
    try:
        docs = [d for d in yaml.safe_load_all(package.read_text(encoding="utf-8")) if d]
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UsageError("package", str(package), f"is not a compiled pipeline ({exc})") from None
    spec = docs[0] if docs and isinstance(docs[0], dict) else {}
    name = spec.get("pipelineInfo", {}).get("name")
    if name != DISPLAY_NAMES[pipeline]:
        raise UsageError(
            "package", str(package), f"is not the {pipeline} pipeline (it is {name!r}); recompile"
        )
    return docs


def executors_config(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Executor label -> its Kubernetes config (the platform document)."""
    if len(docs) < 2:
        return {}
    return (
        docs[1]
        .get("platforms", {})
        .get("kubernetes", {})
        .get("deploymentSpec", {})
        .get("executors", {})
    )


def input_definitions(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})


_KINDS = {
    "STRING": "a string",
    "NUMBER_INTEGER": "an integer",
    "NUMBER_DOUBLE": "a number",
    "BOOLEAN": "true or false",
    "LIST": "a list, e.g. [a, b]",
    "STRUCT": "a mapping, e.g. {key: value}",
}


def _typed(raw: str, kind: str) -> Any:
    """`raw` as a value of the KFP parameter type `kind`; ValueError when it is not one."""
    import yaml

    if kind == "STRING":
        return raw  # never YAML: name=2024 stays "2024", renderer=off stays "off"
    if kind == "NUMBER_INTEGER":
        return int(raw)
    if kind == "NUMBER_DOUBLE":
        return float(raw)
    if kind == "BOOLEAN":
        if raw.lower() not in ("true", "false"):
            raise ValueError(raw)
        return raw.lower() == "true"
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise ValueError(raw) from exc
    if not isinstance(value, list if kind == "LIST" else dict):
        raise ValueError(raw)
    return value


def typed_params(pipeline: str, items: list[str], spec: dict[str, Any]) -> dict[str, Any]:
    """`--param name=value` items typed by the package's inputDefinitions: unknown names,
    values of the wrong type, repeated names and missing required parameters are usage errors."""
    definitions = input_definitions(spec)
    params: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError("params", item, "must look like name=value (e.g. renderer=flux-dev)")
        if key not in definitions:
            known = ", ".join(sorted(definitions))
            raise UsageError("params", item, f"{pipeline} has no parameter {key}; known: {known}")
        if key in params:
            raise UsageError("params", item, f"{key} is given twice; give it once")
        kind = definitions[key]["parameterType"]
        try:
            params[key] = _typed(raw, kind)
        except ValueError:
            raise UsageError("params", item, f"{key} must be {_KINDS[kind]}") from None
    missing = [k for k, d in definitions.items() if k not in params and _required(d)]
    if missing:
        raise UsageError(
            "params", None, f"{pipeline} needs {', '.join(f'{m}=...' for m in missing)}"
        )
    return params


def _required(definition: dict[str, Any]) -> bool:
    return "defaultValue" not in definition and not definition.get("isOptional", False)


def _default(definition: dict[str, Any]) -> Any:
    value = definition["defaultValue"]  # the YAML holds every number as a float
    return int(value) if definition["parameterType"] == "NUMBER_INTEGER" else value


def check_cluster_store(store: str) -> None:
    """A store every pod of a run reaches: s3://bucket/prefix with a valid bucket name and a
    prefix of plain path components (a folder would be each pod's own, gone when it ends)."""
    if not store.startswith("s3://"):
        raise UsageError(
            "store",
            store,
            "a cluster run needs s3://bucket/prefix (a folder would "
            "be each pod's own disk); docs/cluster.md lists a store per KFP version",
        )
    bucket, _, prefix = store.removeprefix("s3://").partition("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise UsageError("store", store, f"{bucket!r} is not an S3 bucket name (3-63 lowercase "
                         "letters, digits, '.' and '-')")  # fmt: skip
    parts = [p for p in prefix.split("/") if p]
    if any(p in (".", "..") or not re.fullmatch(r"[A-Za-z0-9._-]+", p) for p in parts):
        raise UsageError("store", store, "the prefix must be plain path components (letters, "
                         "digits, '.', '_', '-'; no '..')")  # fmt: skip


def compiled_gpu_floor(config: dict[str, Any]) -> int | None:
    """The per-GPU memory (MiB) an executor's placement requires: its node affinity on the GPU
    memory label, or its autocomp.io/gpu-<N>gb node selector; None if it asks for none."""
    from autocomp.pipelines.cluster.resources import (
        GPU_MEMORY_LABEL,
        GPU_TIERS_GB,
        tier_floor_mib,
        tier_label,
    )

    for term in config.get("nodeAffinity", []):
        for expression in term.get("matchExpressions", []):
            if expression.get("key") == GPU_MEMORY_LABEL and expression.get("operator") == "Gt":
                return int(expression["values"][0]) + 1
    labels = config.get("nodeSelector", {}).get("labels", {})
    floors = [tier_floor_mib(t) for t in GPU_TIERS_GB if labels.get(tier_label(t)) == "true"]
    return max(floors) if floors else None


# The executors of the steps whose GPU size follows from run parameters (cluster.resources
# STEPS' gpu_models), by the component each step runs.
STEP_EXECUTORS = {
    "caption": ("exec-caption",),
    "render": ("exec-render",),
    "validate": ("exec-validate",),
    "finetune_train": ("exec-train",),
    "finetune_score": ("exec-score-finetuned", "exec-score-pretrained"),
}


def check_placement(pipeline: str, params: dict[str, Any], docs: list[dict[str, Any]]) -> None:
    """The run's models fit the GPUs the package places their steps on: a renderer, captioner,
    validation model or fine-tuned model bigger than the compiled step's GPU size would run out
    of GPU memory there (or never be scheduled)."""
    from autocomp.pipelines.cluster.resources import (
        STEPS,
        model_need,
        step_need,
        tier_floor_mib,
        tier_for,
    )

    definitions = input_definitions(docs[0])
    full = {**{k: _default(d) for k, d in definitions.items() if "defaultValue" in d}, **params}
    models: dict[str, Any] = {"captioner": full.get("captioner"), "renderer": full.get("renderer"),
              "detector": full.get("detector"), "segmenter": full.get("segmenter"),
              "vqa": full.get("vqa"), "finetune_models": full.get("models")}  # fmt: skip
    configs = executors_config(docs)
    if "evaluate_models" in plumbing.parts(pipeline):
        check_unplaced(full.get("models") or [], docs[0])
    for step, labels in STEP_EXECUTORS.items():
        roles = STEPS[step]["gpu_models"]
        if any(models[r] is None for r in roles) or not any(lb in configs for lb in labels):
            continue
        floor = min(compiled_gpu_floor(configs.get(lb, {})) or 0 for lb in labels)
        need = step_need(step, models)
        if not floor or need is None or tier_floor_mib(tier_for(need)) <= floor:
            continue
        role = roles[-1] if roles[-1] != "finetune_models" else "models"
        named = [[m] if isinstance(m, str) else list(m) for m in (models[r] for r in roles)]
        given = ", ".join(max(names, key=lambda n, r=r: model_need(r, n))
                          for r, names in zip(roles, named, strict=True))  # fmt: skip
        raise UsageError(
            role, given,
            f"{step} needs {need:g} GB per GPU with it, but the package places {step} on GPUs "
            f"of {floor} MiB and more; recompile with `autocomp compile --gpu-size "
            f"{step}={tier_for(need)}`, or pick a smaller model",
        )  # fmt: skip


def check_unplaced(models: list[str], spec: dict[str, Any]) -> None:
    """Refuse a run that scores a model of a class the package could not place (no card of its
    placement scheme holds it: cluster.placement): its pods would stay Pending forever."""
    from autocomp.pipelines.cluster.placement import stamped
    from autocomp.pipelines.cluster.plan import ALL, in_all, score_groups

    scheme, unplaced = stamped(spec)
    if not unplaced:
        return
    wanted = set(in_all()[0] if list(models) == [ALL] else models)
    for klass, members in score_groups().items():
        hit = sorted(set(members) & wanted)
        if klass.name in unplaced and hit:
            raise UsageError("models", hit[0], f"needs {klass.gpus} GPU(s) of {klass.gpu_gb} GB "
                             f"and no {scheme} node holds that (the package's --placement), so "
                             "its pods would wait forever; leave it out or recompile with "
                             "another --placement")  # fmt: skip


def check_params(pipeline: str, params: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """The parameters of one run of a compiled package, checked as a whole before any request:
    the package's defaults under the given values, each stage's configuration rebuilt and
    checked by its own rule, names, models and seeds (autocomp.pipelines.checks.check), then a
    store the pods share. Returns `params` (what is sent: the server fills in the defaults)."""
    from autocomp.pipelines import checks, plumbing

    definitions = input_definitions(spec)
    table = {p.name for p in plumbing.parameters(pipeline)}
    if set(definitions) != table:
        odd = sorted(set(definitions) ^ table)[0]
        raise UsageError(
            "package", pipeline, f"was compiled by another autocomp version (parameter {odd}); "
            "run `autocomp compile` again",
        )  # fmt: skip
    defaults = {k: _default(d) for k, d in definitions.items() if "defaultValue" in d}
    full = checks.check(pipeline, {**defaults, **params})
    check_cluster_store(full["store"])
    return params


def published_as(pipeline: str, params: dict[str, Any], spec: dict[str, Any], run_id: str) -> str:
    """The store name a run of `pipeline` publishes its benchmark under ("" for a pipeline that
    publishes none): the package's `name` and `unique_name` under the given ones, by the rule
    the publish step applies (plan.published_name)."""
    from autocomp.pipelines.cluster.plan import published_name

    definitions = input_definitions(spec)
    if "generate_benchmark" not in plumbing.parts(pipeline) or "unique_name" not in definitions:
        return ""
    full = {**{k: _default(d) for k, d in definitions.items() if "defaultValue" in d}, **params}
    return published_name(str(full["name"]), run_id, bool(full["unique_name"]))
