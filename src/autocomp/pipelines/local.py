"""The local default: both pipelines end to end on this machine through kfp.local
(`autocomp run`, `make demo`), with the tiny offline profile unless told otherwise.

The same pipeline definitions as on the cluster; kfp.local runs each component in a subprocess
of this Python (SubprocessRunner(use_venv=False)), keeps artifacts under <out>/kfp, and the store
is the local folder <out>/store (the cluster uses s3://...). Resource requests, retries and
Kubernetes settings are cluster-only and ignored here.
"""

from __future__ import annotations

import builtins
import os
import re
from pathlib import Path
from typing import Any

from autocomp.errors import UsageError


def local_arguments(
    profile: str, models: list[str] | None = None, **overrides: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The arguments of both pipelines for a local run: the profile's (autocomp.config), with
    `overrides` (None = not given) replacing generate_benchmark parameters and `models` the
    scored models. vLLM lives in its own image on the cluster, so captions run through
    transformers here."""
    from autocomp.config import evaluate_arguments, generate_arguments, get_profile

    chosen = get_profile(profile)
    arguments = generate_arguments(chosen)
    unknown = sorted(set(overrides) - set(arguments))
    if unknown:
        raise TypeError(f"generate_benchmark has no parameter {unknown[0]}")
    arguments.update({k: v for k, v in overrides.items() if v is not None})
    if arguments["caption_engine"] == "vllm":
        arguments["caption_engine"] = "transformers"
    evaluation = evaluate_arguments(chosen)
    if models:
        evaluation["models"] = list(models)
    return arguments, evaluation


def local_name(name: str, arguments: dict[str, Any], evaluation: dict[str, Any]) -> str:
    """`<name>-<10 hex of the run's arguments>`: a run with other parameters on the same --out
    and --name publishes and reports under another name (never a stale result), and the same
    run again resumes."""
    import hashlib
    import json

    text = json.dumps([arguments, evaluation], sort_keys=True, default=str)
    return f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


def run_local(
    out: str | Path,
    name: str = "local",
    profile: str = "tiny",
    models: list[str] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Run generate_benchmark then evaluate_models under kfp.local with a profile's arguments
    (autocomp.config); `overrides` replace generate_benchmark parameters (specs, count, seed,
    num_shards, ...). Returns where things are, and the run-unique benchmark name."""
    from kfp import local

    from autocomp.config import get_profile
    from autocomp.pipelines import evaluate_models as evaluate_module
    from autocomp.pipelines import generate_benchmark as generate_module

    chosen = get_profile(profile)
    arguments, evaluation = local_arguments(profile, models, **overrides)
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if chosen.offline:  # random weights: nothing to download
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("AUTOCOMP_CACHE", str(out / "cache"))
    store = str(out / "store")
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(out / "kfp"))
    generate_benchmark = generate_module.build(cluster=False)
    evaluate_models = evaluate_module.build(cluster=False)
    unique = local_name(name, arguments, evaluation)
    print_function = builtins.print  # kfp.local's indented_print can leave print patched
    try:
        published = generate_benchmark(name=unique, store=store, unique_name=False, **arguments)
        report = evaluate_models(name=unique, store=store, **evaluation)
    except RuntimeError as exc:  # kfp.local: "Pipeline ... FAILURE. Inner task failed: <task>"
        plain = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
        raise UsageError(
            "run",
            unique,
            f"{plain} (its log is above); fix that step's input and run again "
            "(outputs already published in the store are kept)",
        ) from None
    finally:
        builtins.print = print_function
    page = report.output
    return {
        "benchmark": published.output,
        "report": str(getattr(page, "path", page)),
        "store": store,
        "name": unique,
    }
