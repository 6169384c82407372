"""The capacity plan holds the compiled pipelines: compiled for the paper profile at 100,000
concepts per family:N with every model, no step's memory, scratch disk or timeout is below what
the plan (autocomp.pipelines.cluster.capacity) says it needs; the same check finds the steps a
larger run would outgrow; `autocomp plan` prints every step with its sources."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autocomp.cli.main import main
from autocomp.pipelines.cluster import capacity

pytestmark = pytest.mark.slow

# component (executor label without exec- and a numeric tail) -> plan step, per pipeline
STEP_OF = {
    "generate_benchmark": {"shard-plan": "shard_plan"},
    "evaluate_models": {"select-models": "select_models", "collect-scores": "collect_scores"},
    "finetune_models": {"split": "finetune_split", "plan": "finetune_plan",
                        "train": "finetune_train", "score-finetuned": "finetune_score",
                        "score-pretrained": "finetune_score", "report": "finetune_report"},
}  # fmt: skip


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "autocomp.cli.main", "compile", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return out


def _bytes(text: str | float) -> float:
    """A Kubernetes quantity (64G, 120Gi) or KFP's float gigabytes, in bytes."""
    if isinstance(text, int | float):
        return float(text) * 1e9
    number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", text).groups()  # type: ignore[union-attr]
    return float(number) * {"": 1, "G": 1e9, "Gi": 2**30, "M": 1e6, "Mi": 2**20}[unit]


def compiled_sizes(folder: Path) -> dict[tuple[str, str], dict[str, float]]:
    """(pipeline, plan step) -> the smallest memory, disk and timeout any executor of that
    step is compiled with."""
    sizes: dict[tuple[str, str], dict[str, float]] = {}
    for pipeline in STEP_OF:
        docs = list(yaml.safe_load_all((folder / f"{pipeline}.yaml").read_text()))
        executors = docs[0]["deploymentSpec"]["executors"]
        platform = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
        for label, executor in executors.items():
            component = re.sub(r"-\d+$", "", label.removeprefix("exec-"))
            step = STEP_OF[pipeline].get(component, component.replace("-", "_"))
            if step.startswith("score_"):
                step = step.replace("_", "-", 1)  # score classes keep their names
            resources = executor["container"]["resources"]
            memory = _bytes(resources.get("resourceMemoryLimit") or resources["memoryLimit"])
            volumes = platform.get(label, {}).get("emptyDirMounts", [])
            disk = sum(_bytes(v["sizeLimit"]) for v in volumes)
            timeout = float(platform.get(label, {}).get("activeDeadlineSeconds", 0))
            got = {"memory": memory, "disk": disk, "timeout": timeout}
            known = sizes.setdefault((pipeline, step), got)
            sizes[(pipeline, step)] = {k: min(known[k], got[k]) for k in got}
    return sizes


def shortfalls(folder: Path, made: capacity.Plan) -> list[str]:
    """Every compiled step whose memory, disk or timeout is below the plan's need."""
    sizes = compiled_sizes(folder)
    planned = {s.step: s for s in made.steps}
    found = []
    for (pipeline, step), got in sizes.items():
        if step not in planned:  # a score class no model of the plan is in schedules nothing
            assert step.startswith("score-"), f"{pipeline}: step {step} is not in the plan"
            continue
        need = planned[step]
        wanted = {"memory": need.memory, "timeout": need.timeout_s,
                  "disk": need.disk if need.disk >= 1e9 else 0.0}  # fmt: skip
        for key, value in wanted.items():
            if got[key] < value:
                found.append(f"{pipeline}/{step}: {key} {got[key]:.3g} < plan {value:.3g}")
    return found


def test_the_compiled_paper_pipelines_hold_the_plan_at_100k_concepts(compiled):
    made = capacity.plan("paper", 100_000, ["all"])
    assert (capacity.DESIGN_PROFILE, capacity.DESIGN_COUNT) == ("paper", 100_000)
    assert shortfalls(compiled, made) == []
    steps = {step for _, step in compiled_sizes(compiled)}
    assert {"render", "validate", "publish", "curate", "score-2x80gb", "finetune_train"} <= steps


def test_the_check_finds_what_a_larger_run_would_outgrow(compiled):
    """Ten times the design: the render shards' timeout and curate's memory fall short, and
    the check says so (it can fail)."""
    found = shortfalls(compiled, capacity.plan("paper", 1_000_000, ["all"]))
    assert any(f.startswith("generate_benchmark/render: timeout") for f in found), found
    assert any(f.startswith("generate_benchmark/curate: memory") for f in found), found
    # publish and a score step stream: their disk stays within what is compiled
    assert not any("publish: disk" in f or "score-1x16gb: disk" in f for f in found), found


def test_streaming_steps_are_bounded_and_the_others_grow(tmp_path):
    small, large = capacity.plan("paper", 1_000, ["all"]), capacity.plan("paper", 10_000, ["all"])
    for step in ("publish", "score-1x16gb", "score-2x80gb", "negatives"):
        ratio = large.step(step).memory / small.step(step).memory
        assert ratio < 1.05, (step, ratio)  # read as it goes: flat (the done-set aside)
    for step in ("publish", "score-1x16gb", "render", "validate"):
        assert large.step(step).disk / small.step(step).disk < 1.05, step
    grown = [p.step("curate").memory - capacity.PROCESS for p in (small, large)]
    assert grown[1] > 5 * grown[0]  # curate holds every shard's tables in memory
    written = large.step("render").written / small.step("render").written
    assert written == pytest.approx(large.images / small.images)  # every image, once


def test_plan_prints_every_step_with_its_sources(capsys):
    assert main(["plan", "--profile", "paper", "--count", "100000", "--models", "all"]) == 0
    out = capsys.readouterr().out
    for step in ("render", "validate", "publish", "score-2x80gb", "report", "finetune_train"):
        assert re.search(rf"^{re.escape(step)}\s", out, flags=re.M), step
    assert "paper Table 22 (A100): 100k images 8.5 h" in out
    assert "our measured rates" in out and "storage at the end of the run" in out
    assert "shape_color:2 holds only 3,380 distinct concepts" in out
    assert main(["plan", "--count", "0"]) == 2
    assert "--count: 0" in capsys.readouterr().err


def test_plan_names_the_engine_of_each_step(capsys):
    paper, tiny = capacity.plan("paper", 1_000, ["all"]), capacity.plan("tiny")
    engines = {s.step: s.engine for s in paper.steps}
    assert engines["caption"] == "vllm" and tiny.step("caption").engine == "transformers"
    assert engines["render"] == "diffusers" and engines["validate"] == "transformers"
    assert engines["score-1x16gb"] == "open_clip" and engines["finetune_train"] == "open_clip"
    # the engine each entry names, else its backend's default (transformers: the shared-prefix
    # path; scoring/backends.py)
    assert engines["score-4x80gb"] == "transformers"
    # a tiny vLLM entry stays in its size's class (plan.score_groups), which names both engines
    tiny_vllm = capacity.plan("tiny", models=["tiny-qwen2.5-vl-vllm", "tiny-qwen2.5-vl"])
    scored = {s.step: s.engine for s in tiny_vllm.steps if s.step.startswith("score-")}
    assert scored == {"score-cpu": "transformers, vllm"}
    assert engines["sample"] == engines["negatives"] == ""  # no model
    assert main(["plan", "--profile", "paper", "--count", "1000"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^step\s+engine\s+pods", out, flags=re.M)
    assert re.search(r"^caption\s+vllm\s+1\s", out, flags=re.M)
    assert re.search(r"^sample\s+-\s+1\s", out, flags=re.M)
