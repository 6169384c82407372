"""The local default: the pipelines end to end on this machine through kfp.local, with the tiny
offline profile unless told otherwise. One runner (`LocalRun`) for all three pipelines:

- `run_local` (`autocomp run`, `make demo`): generate_benchmark then evaluate_models;
- `run_finetune_local` (`autocomp finetune local`): generate_benchmark (when the store does not
  hold the benchmark yet) then finetune_models.

The same pipeline definitions as on the cluster (built with cluster=False: no images, no
retries, no Kubernetes settings); kfp.local runs each component in a subprocess of this Python
(SubprocessRunner(use_venv=False)), keeps artifacts under <out>/kfp, and the store is the local
folder <out>/store (the cluster uses s3://...). Every parameter is checked (pipelines.checks)
before kfp is imported, so a bad value fails in one line, not minutes into the run.

While it runs, a live view shows each task (local.taskview) and kfp.local's output goes to
<out>/logs (local.capture). The report lands in <out>/report: index.html (evaluate_models) or
report.html (finetune_models, Table 8; the whole report in full/index.html). After `run_local`
the run folder is also a report run folder: <out>/benchmark and <out>/results link to this
run's benchmark and score runs in the store (what `autocomp report --run <out>` reads).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from autocomp.config import Profile, get_profile
from autocomp.errors import UsageError
from autocomp.pipelines import checks, plumbing
from autocomp.pipelines.local.taskview import TaskView
from autocomp.store.atomic import atomic_folder
from autocomp.store.outputs import check_output

FINETUNE_BENCHMARK: dict[str, Any] = {
    "specs": "color:2,shape_color:2",
    "count": 10,
    "num_shards": 1,
}


def local_arguments(
    profile: str, models: list[str] | None = None, **overrides: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The arguments of generate_benchmark and evaluate_models for a local run: the profile's
    (plumbing.arguments), with `overrides` (None = not given) replacing parameters of either
    pipeline and `models` the scored models. vLLM lives in its own image on the cluster, so
    captions run through transformers here."""
    chosen = get_profile(profile)
    generate = plumbing.arguments("generate_benchmark", chosen)
    evaluate = plumbing.arguments("evaluate_models", chosen)
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - set(generate) - set(evaluate))
    if unknown:
        raise TypeError(f"a local run has no parameter {unknown[0]}")
    for key, value in given.items():
        (generate if key in generate else evaluate)[key] = value
    if generate["caption_engine"] == "vllm":
        generate["caption_engine"] = "transformers"
    if models:
        evaluate["models"] = list(models)
    return generate, evaluate


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


def check_out_folder(out: str | Path) -> None:
    """The run folder holds only what a local run writes there: benchmark/ and results/ are
    its links into the store, never folders of their own (they would be replaced)."""
    if Path(out).exists() and not Path(out).is_dir():
        raise UsageError("out", str(out), "is a file; give a folder for the run")
    check_output(out)  # not under a file (missing parents are made: store/outputs.py)
    for name in ("benchmark", "results"):
        path = Path(out) / name
        if path.exists() and not path.is_symlink():
            raise UsageError(
                "out",
                str(out),
                f"holds a {name}/ folder that is not a local run's link into its store; "
                "choose another folder for the run",
            )


def check_offline_models(profile: Profile, models: list[str]) -> None:
    """An offline profile (random weights, nothing downloaded) scores tiny models only."""
    from autocomp.scoring.registry import get_model

    for name in models:
        if profile.offline and name != "all" and not get_model(name).is_tiny:
            raise UsageError(
                "models", name, f"the {profile.name} profile runs offline with random weights; "
                "choose a tiny-* model (`autocomp models`) or --profile paper",
            )  # fmt: skip


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


class LocalRun:
    """One local run folder: kfp.local set up for it (artifacts in <out>/kfp), the live task
    view on stdout and every task's output in <out>/logs. Use it as a context manager; a failed
    task prints the end of its log on stderr and raises StepFailed (a UsageError)."""

    def __init__(self, out: Path, offline: bool, tty: bool | None = None) -> None:
        self.out = out
        self.offline = offline
        self.view = TaskView(sys.stdout, tty=tty)
        self.logs = out / "logs"
        self.seen: dict[str, Any] = {"warnings": []}
        self.stack = contextlib.ExitStack()

    def __enter__(self) -> LocalRun:
        start(self.out, self.offline)
        from autocomp.pipelines.local.capture import captured

        self.seen = self.stack.enter_context(captured(self.logs, self.view))
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        self.stack.close()
        if isinstance(error, StepFailed):
            self._print_failure()

    def run(self, pipeline: str, **arguments: Any) -> Any:
        """One pipeline under kfp.local, shown in the view; its result (kfp.local's)."""
        from autocomp.pipelines.definitions import build

        made = build(pipeline, cluster=False)
        note = f"logs in {self.logs}"
        self.view.pipeline(made.name, pipeline_steps(made), note)
        try:
            result = made(**arguments)
        except RuntimeError as exc:  # kfp.local: "Pipeline ... FAILURE. Inner task failed: .."
            self.view.end_pipeline(False)
            failed = self.view.failed()
            if not failed:  # kfp.local failed outside a task: its message is all there is
                plain = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
                raise UsageError("run", made.name, f"{plain} ({note})") from exc
            row = failed[0]
            raise StepFailed(
                "run",
                row.label,
                f"this task of {made.name} failed (its log: {row.log}); fix its input and run "
                "again (outputs already published in the store are kept)",
            ) from exc
        self.view.end_pipeline(True)
        return result

    def _print_failure(self) -> None:
        """The failed task's name, the end of its log and where the whole log is, on stderr."""
        from autocomp.pipelines.local.capture import log_tail

        row = self.view.failed()[0]
        print(f"task {row.label} failed; the end of its log ({row.log}):", file=sys.stderr)
        for line in log_tail(row.log) if row.log else []:
            print(f"  | {line.removeprefix('    ')}", file=sys.stderr)  # kfp indents executor lines


def start(out: Path, offline: bool) -> None:
    """kfp.local for a run folder (the first import of kfp in a local run)."""
    from kfp import local

    out.mkdir(parents=True, exist_ok=True)
    if offline:  # random weights: nothing to download
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("AUTOCOMP_CACHE", str(out / "cache"))
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(out / "kfp"))


def _link(link: Path, target: Path) -> None:
    """`link` -> `target` (relative), replacing an earlier run's link."""
    if link.is_symlink():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent), target_is_directory=True)


def _copy_report(out: Path, files: dict[str, Path]) -> Path:
    """<out>/report made afresh from `files` (name there -> file or folder), atomically; the
    report step's figures (tables/figures/) become report/figures/."""
    report = out / "report"
    with atomic_folder(report, replace=True) as staging:
        for name, source in files.items():
            if source.is_dir() and name == "tables" and (source / "figures").is_dir():
                shutil.copytree(source, staging / name, ignore=shutil.ignore_patterns("figures"))
                shutil.copytree(source / "figures", staging / "figures")
            elif source.is_dir():
                shutil.copytree(source, staging / name)
            elif source.is_file():
                shutil.copyfile(source, staging / name)
    return report


def _path(output: Any) -> Path:
    return Path(getattr(output, "path", output))


def run_local(
    out: str | Path,
    name: str = "local",
    profile: str = "tiny",
    models: list[str] | None = None,
    tty: bool | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Run generate_benchmark then evaluate_models under kfp.local with a profile's arguments
    (autocomp.config); `overrides` replace parameters of either pipeline (specs, count, seed,
    num_shards, limit, ...). Every parameter is checked first. Shows the tasks on stdout
    (`tty`: redraw in place; None: when stdout is a terminal). Returns where things are, and
    the run-unique benchmark name. A failed task prints the end of its log on stderr and
    raises StepFailed (a UsageError)."""
    chosen = get_profile(profile)
    generate, evaluate = local_arguments(profile, models, **overrides)
    checks.check_name(name, "name")
    check_out_folder(out)
    out = Path(out).resolve()
    store = out / "store"
    unique = local_name(name, generate, evaluate)
    run = {"name": unique, "store": str(store)}
    checks.check("generate_benchmark", {**run, "unique_name": False, **generate})
    checks.check("evaluate_models", {**run, **evaluate})
    check_offline_models(chosen, evaluate["models"])
    with LocalRun(out, chosen.offline, tty) as session:
        published = session.run("generate_benchmark", **run, unique_name=False, **generate)
        report = session.run("evaluate_models", **run, **evaluate)
    page = _path(report.output)
    _link(out / "benchmark", store / "benchmarks" / unique)
    _link(out / "results", store / "results" / unique)
    folder = _copy_report(out, {"index.html": page, "tables": page.parent / "tables"})
    return {
        "benchmark": published.output,
        "report": str(folder / "index.html"),
        "store": str(store),
        "name": unique,
        "logs": str(session.logs),
        "warnings": session.seen["warnings"],
    }


def run_finetune_local(
    out: str | Path,
    name: str = "finetune",
    profile: str = "tiny",
    models: list[str] | None = None,
    seeds: list[int] | None = None,
    store: str | None = None,
    tty: bool | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Run finetune_models under kfp.local with a profile's arguments (its `finetune`
    settings and `finetune_models`; `models`, `seeds` and `overrides` replace them) on the
    benchmark `name` of `store` (default <out>/store). Without that benchmark in the store, the
    profile's generate_benchmark makes and publishes one first, Color and Shape-Color N=2 with
    10 concepts each (FINETUNE_BENCHMARK). The same task view, logs and report folder as
    `run_local`; returns where things are."""
    from autocomp.store.stores import open_store

    chosen = get_profile(profile)
    finetune = plumbing.arguments("finetune_models", chosen)
    unknown = sorted(set(overrides) - set(finetune))
    if unknown:
        raise TypeError(f"finetune_models has no parameter {unknown[0]}")
    finetune.update({k: v for k, v in overrides.items() if v is not None})
    finetune.update({k: list(v) for k, v in (("models", models), ("seeds", seeds)) if v})
    check_out_folder(out)
    out = Path(out).resolve()
    store = store or str(out / "store")
    run = {"name": name, "store": store}
    checks.check("finetune_models", {**run, **finetune})
    check_offline_models(chosen, finetune["models"])
    generate = None
    if open_store(store).manifest(f"benchmarks/{name}") is None:
        generate, _ = local_arguments(profile, **FINETUNE_BENCHMARK)
        checks.check("generate_benchmark", {**run, "unique_name": False, **generate})
    with LocalRun(out, chosen.offline, tty) as session:
        if generate is not None:
            session.run("generate_benchmark", **run, unique_name=False, **generate)
        done = session.run("finetune_models", **run, **finetune)
    page = Path(done.output)
    folder = _copy_report(out, {p.name: p for p in sorted(page.parent.iterdir())})
    return {
        "report": str(folder / page.name),
        "full_report": str(folder / "full" / "index.html"),
        "store": store,
        "name": name,
        "logs": str(session.logs),
        "warnings": session.seen["warnings"],
    }
