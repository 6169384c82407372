"""benchmarks/gpu.sh must work on its first try on a GPU machine: its plan prints without torch,
and the whole script runs here with tiny models through the same code (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu.sh"


def _run(*args: str, timeout: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(
        [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_dry_run_prints_the_plan_of_full_size_models():
    done = _run("--dry-run", timeout=120)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["sections"] == ["render", "validate", "score"] and not plan["tiny"]
    config = plan["config"]
    assert config["sd3"]["num_layers"] == 38 and config["image"] == 1024
    assert config["steps"] == 28 and config["cfg"] == 4.5
    assert config["clip_arch"] == "ViT-L-14" and "SO400M" in config["siglip_arch"]
    assert config["qwen_text"]["num_hidden_layers"] == 28


@pytest.mark.slow
def test_tiny_run_fills_every_row_of_the_table(tmp_path):
    rows_file = tmp_path / "rows.json"
    done = _run("--tiny", "--budget", "0.5", "--json", str(rows_file), timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = json.loads(rows_file.read_text())["rows"]
    assert [r["section"] for r in rows] == ["render"] + ["validate"] * 4 + ["score"] * 5
    assert all(r["rate"] > 0 for r in rows)
    assert "per 100k concepts" in done.stdout and "154 A100 GPU-h" in done.stdout
