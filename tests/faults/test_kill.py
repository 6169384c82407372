"""Fault tests: a stage killed with SIGKILL or SIGTERM half-way, then run again, leaves no orphan
process and no temporary file, and ends with the same bytes as a run that was never
interrupted. (The negatives stage's worker pool has its own fault tests.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.config import CaptionConfig, NegativesConfig
from autocomp.generation.caption import caption_stage
from autocomp.protocol.stages import negatives_stage, sample_stage

pytestmark = pytest.mark.slow


def _cli(*argv: str) -> list[str]:
    return [sys.executable, "-m", "autocomp.cli.main", *argv]


def _env() -> dict[str, str]:
    root = Path(__file__).resolve().parents[2]
    path = os.pathsep.join(p for p in (str(root / "src"), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}


def _kill_when(cmd: list[str], ready, sig: int, timeout: float = 240) -> None:  # noqa: ANN001
    """Start `cmd`, wait until `ready()` holds, then send `sig`; the process must be gone."""
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + timeout
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"finished before the fault: {proc.stderr.read().decode()[-800:]}")
        if time.time() > deadline:
            proc.kill()
            pytest.fail("never reached the point of the fault")
        time.sleep(0.05)
    proc.send_signal(sig)
    proc.wait(30)
    assert proc.returncode != 0
    _assert_no_orphans(proc.pid)


def _assert_no_orphans(pid: int) -> None:
    """No process whose parent was the killed one is still alive."""
    for _ in range(50):
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
        if not children.stdout.strip():
            return
        time.sleep(0.1)
    pytest.fail(f"orphans of {pid}: {children.stdout}")


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _hidden(folder: Path) -> list[Path]:
    return [p for p in folder.rglob(".*")]


@pytest.fixture(scope="module")
def captions(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("chain")
    sample_stage("color", 2, 5, 0, d / "concepts.parquet")
    config = CaptionConfig(captioner="tiny-llm", fallback="minimal")
    caption_stage(d / "concepts.parquet", d / "captions", config)
    return d / "captions"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_render_killed_then_resumed_gives_the_same_bytes(captions, tmp_path, sig):
    args = ["--captions", str(captions), "--profile", "tiny", "--batch-size", "1",
            "--set", "num_inference_steps=20"]  # fmt: skip
    subprocess.run(_cli("render", *args, "--out", str(tmp_path / "ref")), env=_env(), check=True)
    out = tmp_path / "run"
    images = out / "images"
    _kill_when(
        _cli("render", *args, "--out", str(out)),
        lambda: images.is_dir() and len(list(images.rglob("*.png"))) >= 3,
        sig,
    )
    assert not list(out.glob("render-*.parquet"))  # the shard table was never written
    subprocess.run(_cli("render", *args, "--out", str(out)), env=_env(), check=True)
    assert _hidden(out) == []  # temp files of the killed run are gone
    assert _files(out) == _files(tmp_path / "ref")


@pytest.fixture(scope="module")
def big_benchmark(tmp_path_factory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("bench")
    sample_stage("color", 3, 150, 0, d / "concepts.parquet")
    negatives_stage(d / "concepts.parquet", d / "bench.parquet", NegativesConfig(workers=1))
    table = pq.read_table(d / "bench.parquet")
    (d / "images").mkdir()
    names = []
    for i in range(table.num_rows):
        Image.new("RGB", (24, 24), (i * 4 % 256, 90, 200)).save(d / "images" / f"{i}.png")
        names.append(f"{i}.png")
    pq.write_table(table.append_column("image", pa.array(names)), d / "bench_images.parquet")
    return d / "bench_images.parquet", d / "images"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_score_killed_then_resumed_gives_the_same_results(big_benchmark, tmp_path, sig):
    bench, images = big_benchmark
    args = ["--model", "tiny-clip", "--benchmark", str(bench), "--images", str(images)]
    subprocess.run(_cli("score", *args, "--out", str(tmp_path / "ref")), env=_env(), check=True)
    out = tmp_path / "run"
    _kill_when(
        _cli("score", *args, "--out", str(out)),
        lambda: len(list((out / "tiny-clip" / "predictions").glob("part-*.parquet"))) >= 1,
        sig,
    )
    subprocess.run(_cli("score", *args, "--out", str(out)), env=_env(), check=True)
    assert _hidden(out) == []
    keys = [("sample_id", "ascending"), ("set", "ascending"), ("protocol", "ascending")]
    done = pq.read_table(out / "tiny-clip" / "predictions").sort_by(keys)  # <out>/<model>/
    ref = pq.read_table(tmp_path / "ref" / "tiny-clip" / "predictions").sort_by(keys)
    # the resumed run scores the rest in other batches, so scores agree to float rounding (the
    # batch composition of a matmul); every decision that is not a near-tie is the same
    a, b = done.to_pylist(), ref.to_pylist()
    assert [(r["sample_id"], r["set"], r["protocol"], r["failed"]) for r in a] == [
        (r["sample_id"], r["set"], r["protocol"], r["failed"]) for r in b
    ]
    for x, y in zip(a, b):
        for column in ("positive_score", "best_negative_score"):
            assert abs(x[column] - y[column]) <= 1e-5, (column, x, y)
        if abs(y["positive_score"] - y["best_negative_score"]) > 1e-5:
            assert (x["correct"], x["predicted"]) == (y["correct"], y["predicted"])
    summary = pq.read_table(out / "summary.parquet")
    reference = pq.read_table(tmp_path / "ref" / "summary.parquet")
    for column in ("items", "failed"):
        assert summary[column].equals(reference[column])


def test_publish_killed_then_resumed(tmp_path):
    source = tmp_path / "out"
    source.mkdir()
    for i in range(20):
        (source / f"f{i:02d}.bin").write_bytes(os.urandom(256 * 1024))
    # the real put, with each file's copy slowed down so the kill lands half-way through it
    code = (
        "import shutil, sys, time\n"
        "copytree = shutil.copytree\n"
        "def slow(src, dst, **kw):\n"
        "    def copy(s, d):\n"
        "        time.sleep(0.2)\n"
        "        return shutil.copy2(s, d)\n"
        "    return copytree(src, dst, copy_function=copy, **kw)\n"
        "shutil.copytree = slow\n"
        "from autocomp.store.local import LocalStore\n"
        "LocalStore(sys.argv[1]).put('benchmarks/b', sys.argv[2])\n"
    )
    store = tmp_path / "store"
    staging = store / "benchmarks"
    _kill_when(
        [sys.executable, "-c", code, str(store), str(source)],
        lambda: staging.is_dir() and len(list(staging.glob(".b.tmp-*/f*.bin"))) >= 3,
        signal.SIGKILL,
    )
    from autocomp.store.local import LocalStore

    local = LocalStore(store)
    assert local.outputs() == [] and local.manifest("benchmarks/b") is None
    assert list(staging.glob(".b.tmp-*"))  # the killed writer's staging folder is still there
    local.put("benchmarks/b", source)
    assert local.outputs() == ["benchmarks/b"] and _hidden(store) == []
    assert {k: v for k, v in _files(store / "benchmarks" / "b").items() if k.endswith(".bin")} == (
        _files(source)
    )
