"""The local default: both pipelines end to end on this machine through kfp.local
(`autocomp run`, `make demo`), with the tiny offline profile unless told otherwise.

The same pipeline definitions as on the cluster; kfp.local runs each component in a subprocess
of this Python (SubprocessRunner(use_venv=False)), keeps artifacts under <out>/kfp, and the store
is the local folder <out>/store (the cluster uses s3://...). Resource requests, retries and
Kubernetes settings are cluster-only and ignored here.

While it runs, a live view shows each task (autocomp.pipelines.taskview) and kfp.local's output
goes to <out>/logs (autocomp.pipelines.capture). A finished run folder is also a report run
folder: <out>/benchmark and <out>/results link to this run's benchmark and score runs in the
store (what `autocomp report --run <out>` reads), and <out>/report holds the evaluation
pipeline's report (index.html and tables/).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.pipelines.taskview import TaskView


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


class StepFailed(UsageError):
    """A pipeline task failed: the error names it and its log."""


def pipeline_steps(pipeline: Any) -> list[str]:
    """The tasks of a compiled pipeline in the order kfp.local runs them (a loop's body once;
    nested pipelines flattened), by their display names."""
    from kfp.local import graph_utils

    spec = pipeline.pipeline_spec
    components = spec.components

    def walk(dag: Any) -> list[str]:
        steps = []
        for name in reversed(graph_utils.topological_sort_tasks(dag.tasks)):
            task = dag.tasks[name]
            component = components[task.component_ref.name]
            if component.WhichOneof("implementation") == "dag":
                steps += walk(component.dag)
            else:
                steps.append(task.task_info.name or name)
        return steps

    return walk(spec.root.dag)


def _run_pipeline(view: TaskView, pipeline: Any, note: str, **arguments: Any) -> Any:
    """One pipeline under kfp.local, shown in `view`; a failed task raises StepFailed."""
    view.pipeline(pipeline.name, pipeline_steps(pipeline), note)
    try:
        result = pipeline(**arguments)
    except RuntimeError as exc:  # kfp.local: "Pipeline ... FAILURE. Inner task failed: <task>"
        view.end_pipeline(False)
        failed = view.failed()
        if not failed:  # kfp.local failed outside a task: its message is all there is
            plain = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
            raise UsageError("run", pipeline.name, f"{plain} ({note})") from exc
        row = failed[0]
        raise StepFailed(
            "run",
            row.label,
            f"this task of {pipeline.name} failed (its log: {row.log}); fix its input and run "
            "again (outputs already published in the store are kept)",
        ) from exc
    view.end_pipeline(True)
    return result


def _print_failure(view: TaskView) -> None:
    """The failed task's name, the end of its log and where the whole log is, on stderr."""
    from autocomp.pipelines.capture import log_tail

    row = view.failed()[0]
    print(f"task {row.label} failed; the end of its log ({row.log}):", file=sys.stderr)
    for line in log_tail(row.log) if row.log else []:
        print(f"  | {line.removeprefix('    ')}", file=sys.stderr)  # kfp indents executor lines


def _link(link: Path, target: Path) -> None:
    """`link` -> `target` (relative), replacing an earlier run's link."""
    if link.is_symlink():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent), target_is_directory=True)


def check_out_folder(out: str | Path) -> None:
    """The run folder holds only what a local run writes there: benchmark/ and results/ are
    its links into the store, never folders of their own (they would be replaced)."""
    for name in ("benchmark", "results"):
        path = Path(out) / name
        if path.exists() and not path.is_symlink():
            raise UsageError(
                "--out",
                str(out),
                f"holds a {name}/ folder that is not a local run's link into its store; "
                "choose another folder for the run",
            )


def _finish_folder(out: Path, store: Path, unique: str, page: Path) -> Path:
    """Link benchmark/ and results/ to this run's store entries; copy the report into
    <out>/report (index.html and tables/). Returns the report page."""
    _link(out / "benchmark", store / "benchmarks" / unique)
    _link(out / "results", store / "results" / unique)
    report = out / "report"
    staging = out / ".report.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    shutil.copyfile(page, staging / "index.html")
    if (page.parent / "tables").is_dir():
        shutil.copytree(page.parent / "tables", staging / "tables")
    shutil.rmtree(report, ignore_errors=True)
    staging.rename(report)
    return report / "index.html"


def run_local(
    out: str | Path,
    name: str = "local",
    profile: str = "tiny",
    models: list[str] | None = None,
    tty: bool | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Run generate_benchmark then evaluate_models under kfp.local with a profile's arguments
    (autocomp.config); `overrides` replace generate_benchmark parameters (specs, count, seed,
    num_shards, ...). Shows the tasks on stdout (`tty`: redraw in place; None: when stdout is a
    terminal). Returns where things are, and the run-unique benchmark name. A failed task
    prints the end of its log on stderr and raises StepFailed (a UsageError)."""
    from kfp import local

    from autocomp.config import get_profile
    from autocomp.pipelines.capture import LOCAL_NOISE, captured

    chosen = get_profile(profile)
    arguments, evaluation = local_arguments(profile, models, **overrides)
    check_out_folder(out)
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if chosen.offline:  # random weights: nothing to download
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("AUTOCOMP_CACHE", str(out / "cache"))
    store = out / "store"
    with warnings.catch_warnings():  # the images are not used here (no lock needed)
        warnings.filterwarnings("ignore", message=LOCAL_NOISE[0])
        from autocomp.pipelines import evaluate_models as evaluate_module
        from autocomp.pipelines import generate_benchmark as generate_module

        generate_benchmark = generate_module.build(cluster=False)
        evaluate_models = evaluate_module.build(cluster=False)
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(out / "kfp"))
    unique = local_name(name, arguments, evaluation)
    view = TaskView(sys.stdout, tty=tty)
    logs = out / "logs"
    try:
        with captured(logs, view) as seen:
            note = f"logs in {logs}"
            published = _run_pipeline(
                view, generate_benchmark, note,
                name=unique, store=str(store), unique_name=False, **arguments,
            )  # fmt: skip
            report = _run_pipeline(
                view, evaluate_models, note, name=unique, store=str(store), **evaluation
            )
    except StepFailed:
        _print_failure(view)
        raise
    page = report.output
    return {
        "benchmark": published.output,
        "report": str(_finish_folder(out, store, unique, Path(getattr(page, "path", page)))),
        "store": str(store),
        "name": unique,
        "logs": str(logs),
        "warnings": seen["warnings"],
    }
