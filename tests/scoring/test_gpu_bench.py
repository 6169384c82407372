"""benchmarks/gpu.sh must work on its first try on a GPU machine: its plan prints without torch,
it stops with one line where no GPU is visible, and its dry run walks every step of the GPU
run here, shrunken, on the CPU (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu.sh"


def _run(*args: str, timeout: int, **env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, **env}
    return subprocess.run(
        [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_the_plan_is_the_papers_shapes():
    done = _run("--plan", timeout=120)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["sections"] == ["score", "validate", "render"] and not plan["tiny"]
    config = plan["config"]
    assert config["sd3"]["num_layers"] == 38 and config["image"] == 1024
    assert config["steps"] == 28 and config["cfg"] == 4.5
    assert config["clip_arch"] == "ViT-H-14-378" and "SigLIP2" in config["siglip_arch"]
    assert config["qwen_text"]["num_hidden_layers"] == 28 and config["qwen_image"] == 1024
    assert config["qwen_image_tokens"] >= 540 and config["candidates"] == 729
    assert plan["paper_rate"]["render"] == pytest.approx(100_000 / (8.5 * 16 * 3600))


def test_without_a_gpu_it_stops_with_one_line():
    done = _run(timeout=300, CUDA_VISIBLE_DEVICES="")
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA GPU" in lines[0] and "--dry-run" in lines[0]


@pytest.mark.slow
def test_the_dry_run_walks_every_step_with_its_baseline(tmp_path):
    rows_file = tmp_path / "rows.json"
    done = _run("--dry-run", "--json", str(rows_file), timeout=1800, GPU_BENCH_LIMIT="1700")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(rows_file.read_text())["rows"]
    assert [r["section"] for r in rows] == ["score"] * 4 + ["validate"] * 4 + ["render"]
    for r in rows:
        assert r["rate"] > 0 and r["baseline_rate"] > 0 and r["baseline"]
        assert r["ratio"] == pytest.approx(r["rate"] / r["baseline_rate"])
    assert "Qwen2.5-VL" in rows[2]["what"] and "(16 of image)" in rows[2]["note"]
    # Table 22's rates: VQA, detect + segment + VQA per image, render
    assert [r["paper"] is not None for r in rows] == [False] * 6 + [True] * 3
    assert "154 A100 GPU-h" in done.stdout and "Table 22" in done.stdout
