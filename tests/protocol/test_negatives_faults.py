"""`autocomp negatives` killed mid-run: no orphan worker or resource tracker survives it (SIGKILL,
SIGTERM, Ctrl-C), and a re-run cleans what a killed run left and writes the same bytes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import autocomp
from autocomp.config import NegativesConfig
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.store.atomic import sweep_stale

SRC = str(Path(autocomp.__file__).parents[1])


@pytest.fixture(scope="module")
def concepts(tmp_path_factory):
    """Color N=3 concepts (729 candidates each: a run long enough to be killed) and the
    benchmark table an uninterrupted in-process run writes from them."""
    folder = tmp_path_factory.mktemp("faults")
    sample_stage("color", 3, 600, 0, folder / "concepts.parquet")
    negatives_stage(
        folder / "concepts.parquet", folder / "reference.parquet", NegativesConfig(workers=1)
    )
    return folder


def _descendants(pid: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _workers(pid: int) -> list[int]:
    return [p for p in _descendants(pid) if b"spawn_main" in _cmdline(p)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's reaping is left


def _wait(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _start(concepts: Path, out: Path) -> tuple[subprocess.Popen, set[int]]:
    command = [
        sys.executable, "-m", "autocomp.cli.main", "negatives", "--input",
        str(concepts / "concepts.parquet"), "--out", str(out), "--workers", "2",
        "--batch-size", "16",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen(
        command, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    temporaries = lambda: list(out.parent.glob(f".{out.name}.tmp-*"))  # noqa: E731
    # two workers and the resource tracker are up, and the output is being written
    assert _wait(lambda: len(_descendants(proc.pid)) >= 3 and temporaries(), 60), (
        proc.poll(),
        proc.stderr.read() if proc.poll() is not None else "",
    )
    time.sleep(0.3)
    return proc, _descendants(proc.pid)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "Ctrl-C"])
def test_killed_run_leaves_no_orphans_and_a_rerun_writes_the_same_bytes(concepts, tmp_path, how):
    out = tmp_path / "benchmark.parquet"
    proc, children = _start(concepts, out)
    if how == "Ctrl-C":  # a terminal sends SIGINT to the whole foreground group
        os.killpg(proc.pid, signal.SIGINT)
    else:
        os.kill(proc.pid, getattr(signal, how))
    proc.wait(timeout=30)
    assert proc.returncode != 0
    assert _wait(lambda: not any(_running(p) for p in children), 15), [
        _cmdline(p) for p in children if _running(p)
    ]
    left = list(tmp_path.glob(f".{out.name}.tmp-*"))
    assert not out.exists()
    if how == "SIGKILL":  # nothing ran in the parent: its temporary file stays for the next run
        assert len(left) == 1
        assert sweep_stale(tmp_path) == left
    else:  # SIGTERM and Ctrl-C clean up on the way out
        assert left == [], proc.stderr.read()
    negatives_stage(concepts / "concepts.parquet", out, NegativesConfig(workers=2))
    assert out.read_bytes() == (concepts / "reference.parquet").read_bytes()
    assert not list(tmp_path.glob(f".{out.name}.tmp-*"))


IDLE_POOL = """
import sys, time
from autocomp.protocol.stages import _ordered_parallel

def jobs():
    yield 0.01
    yield 0.01
    print("ready", flush=True)
    time.sleep(120)  # the workers now wait for work that never comes

for _ in _ordered_parallel(time.sleep, jobs(), 2, window=1):
    pass
"""


def test_idle_workers_die_with_a_killed_parent():
    """Busy workers die on their next write to the dead parent; idle ones block on the job
    queue forever unless the kernel kills them with the parent (what this test checks)."""
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen(
        [sys.executable, "-c", IDLE_POOL], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert _wait(lambda: _workers(proc.pid) and len(_descendants(proc.pid)) >= 2, 30)
        children = _descendants(proc.pid)  # the worker(s) and the resource tracker
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert _wait(lambda: not any(_running(p) for p in children), 15), [
        _cmdline(p) for p in children if _running(p)
    ]


def test_a_live_runs_temporary_file_is_left_alone(tmp_path):
    out = tmp_path / "benchmark.parquet"
    mine = tmp_path / f".{out.name}.tmp-{os.getpid()}"
    mine.write_bytes(b"in progress")
    dead = tmp_path / f".{out.name}.tmp-999999999"
    dead.write_bytes(b"left by a killed run")
    assert sweep_stale(tmp_path) == [dead]
    assert mine.exists()
