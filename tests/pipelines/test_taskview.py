"""The local run's live view and its capture of kfp.local's output, on synthetic events and
synthetic kfp output lines (no pipeline runs here)."""

from __future__ import annotations

import io
import re
import threading

import pytest

from autocomp.pipelines.local import capture, taskview
from autocomp.pipelines.local.taskview import DONE, FAILED, RUNNING, SKIPPED, WAITING, TaskView

START_AFTER = taskview.START_AFTER


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _view(tty: bool, size: tuple[int, int] = (100, 40)) -> tuple[TaskView, io.StringIO, Clock]:
    stream, clock = io.StringIO(), Clock()
    return TaskView(stream, tty=tty, clock=clock, size=lambda: size), stream, clock


def _states(view: TaskView) -> list[tuple[str, str]]:
    return [(r.label, r.state) for r in view.blocks[-1].rows]


def test_rows_go_waiting_running_done_and_loop_iterations_get_rows_of_their_own():
    view, _, clock = _view(tty=False)
    view.pipeline("gen", ["sample", "render", "validate", "publish"])
    assert _states(view) == [(s, WAITING) for s in ("sample", "render", "validate", "publish")]
    view.start("a", "sample", "sample")
    assert _states(view)[0] == ("sample", RUNNING)
    clock.now += 1
    view.finish("a", ok=True)
    view.start("r10", "render-10", "render")
    view.start("r1", "render-1", "render")  # another iteration: a row of its own, in order
    view.start("r0", "render-0", "render")
    assert [label for label, _ in _states(view)][:5] == [
        "sample", "render-0", "render-1", "render-10", "validate",
    ]  # fmt: skip
    view.finish("r10", ok=True)
    view.finish("r1", ok=True)
    view.finish("r0", ok=False)
    assert dict(_states(view)) == {
        "sample": DONE, "render-0": FAILED, "render-1": DONE, "render-10": DONE,
        "validate": WAITING, "publish": WAITING,
    }  # fmt: skip
    assert [r.label for r in view.failed()] == ["render-0"]
    view.end_pipeline(ok=False)
    assert dict(_states(view))["validate"] == SKIPPED


def test_a_log_gets_one_line_per_change_and_a_start_only_for_long_tasks(tmp_path):
    view, stream, clock = _view(tty=False)
    view.pipeline("gen", ["sample", "caption", "score"], note="logs in x")
    view.start("s", "sample", "sample")
    clock.now += 0.4
    view.tick()
    view.finish("s", ok=True)  # short: only its end
    view.start("c", "caption", "caption", tmp_path / "caption.log")
    clock.now += START_AFTER - 1
    view.tick()  # not yet
    clock.now += 1
    view.tick()  # long: its start is said once
    view.tick()
    clock.now += 56
    view.finish("c", ok=False)
    view.end_pipeline(ok=False)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "gen (logs in x)"
    assert re.fullmatch(r"sample +done +0\.4 s", lines[1])
    assert re.fullmatch(r"caption +running 10\.0 s", lines[2])
    assert lines[3].startswith("caption") and "FAILED" in lines[3] and "1 min 06 s" in lines[3]
    assert str(tmp_path / "caption.log") in lines[3]  # a failure names its log
    assert "1 tasks not run (an earlier task failed): score" in lines[4]
    assert lines[5].startswith("gen: FAILED in") and len(lines) == 6
    assert "\x1b" not in stream.getvalue()  # no terminal codes in a log


def test_a_terminal_redraws_the_block_in_place_and_freezes_it_at_the_end():
    view, stream, clock = _view(tty=True)
    view.pipeline("gen", ["sample", "caption"])
    first = stream.getvalue()
    assert not first.startswith("\x1b[") or first.startswith("\x1b[2K")  # nothing to go up over
    assert first.count("\n") == 3  # header + 2 rows
    view.start("s", "sample", "sample")
    clock.now += 2
    view.tick()
    frame = stream.getvalue()[len(first) :]
    assert frame.startswith("\x1b[3F")  # back up over the 3 lines drawn
    assert "running 2.0 s" in frame
    view.finish("s", ok=True)
    view.start("c", "caption", "caption")
    view.finish("c", ok=True)
    view.end_pipeline(ok=True)
    view.pipeline("eval", ["score"])  # a new block starts below the frozen one
    last = stream.getvalue().rsplit("\x1b[J", 2)[-2]
    assert not last.startswith("\x1b[") or last.startswith("\x1b[2K")
    assert "eval: running" in last
    screen = _screen(stream.getvalue())
    assert screen[0].startswith("gen: done in") and "(2/2 tasks done)" in screen[0]
    assert screen[3].startswith("eval: running") and len(screen) == 5


def test_a_tall_block_fits_the_terminal_by_counting_finished_tasks():
    view, stream, _ = _view(tty=True, size=(80, 10))
    steps = [f"step-{i}" for i in range(20)]
    view.pipeline("gen", steps)
    for i in range(15):
        view.start(i, steps[i], steps[i])
        view.finish(i, ok=True)
    view.start(15, steps[15], steps[15])
    screen = _screen(stream.getvalue())
    assert len(screen) <= 8  # height - 2
    assert any("tasks done" in line and "..." in line for line in screen)
    assert any("step-15" in line and "running" in line for line in screen)


def _screen(text: str) -> list[str]:
    """What a terminal shows after `text` (cursor-up, erase-line and erase-below only)."""
    lines: list[str] = []
    row = 0
    for part in re.split(r"(\x1b\[\d*[FKJ]|\n)", text):
        if not part:
            continue
        if m := re.fullmatch(r"\x1b\[(\d*)F", part):
            row = max(0, row - int(m.group(1) or 1))
        elif part == "\x1b[J":
            del lines[row:]
        elif part in ("\x1b[2K", "\x1b[K"):
            if row < len(lines):
                lines[row] = ""
        elif part == "\n":
            row += 1
        else:
            while len(lines) <= row:
                lines.append("")
            lines[row] += part
    return [line for line in lines if line]


# ---------------------------------------------------------------------- capture of kfp output
KFP_LINES = {
    "render": [
        "06:28:55.925 - INFO - Executing task \x1b[96m'render'\x1b[0m",
        "06:28:55.925 - INFO - Streamed logs:",
        "    [KFP Executor 2026-12-01 06:28:56,001 INFO]: Looking for component `render`",
        "    rendered 2 images",
        "06:29:10.213 - INFO - Task \x1b[96m'render'\x1b[0m finished with status \x1b[92mSUCCESS\x1b[0m",
    ],
    "validate": [
        "06:29:10.217 - INFO - Executing task \x1b[96m'validate'\x1b[0m",
        *[f"    validate line {i}" for i in range(30)],
        "    Traceback (most recent call last):",
        "    autocomp.errors.UsageError: --vqa: 'x': unknown model",
        "06:29:20.222 - ERROR - Task \x1b[96m'validate'\x1b[0m finished with status \x1b[91mFAILURE\x1b[0m",
    ],
}


class _Spec:
    class task_info:  # noqa: N801  (the protobuf field kfp reads)
        name = ""

    inputs = None


def _fake_execute_single_task(
    task_name, task_spec, pipeline_resource_name, components, executors, io_store,  # noqa: ANN001
    pipeline_root, runner, unique_pipeline_id, fail_stack,  # noqa: ANN001
):  # fmt: skip
    """kfp.local's execute_single_task's signature; prints what kfp.local prints for a task."""
    from kfp.local import status

    for line in KFP_LINES[task_name]:
        print(line)
    ok = "FAILURE" not in KFP_LINES[task_name][-1]
    return {}, status.Status.SUCCESS if ok else status.Status.FAILURE


def _call(watched, task_name: str, resource: str):  # noqa: ANN001, ANN202
    return watched(
        task_name=task_name, task_spec=_Spec(), pipeline_resource_name=resource, components={},
        executors={}, io_store=None, pipeline_root="", runner=None, unique_pipeline_id="",
        fail_stack=[],
    )  # fmt: skip


def test_each_task_run_gets_its_log_even_when_iterations_print_side_by_side(tmp_path):
    import contextlib

    view, _, _ = _view(tty=False)
    view.pipeline("gen", ["render", "validate"])
    logs = capture.TaskLogs(tmp_path / "logs")
    router = capture.Router(logs)
    watched = capture._watched(_fake_execute_single_task, view, logs, router)  # noqa: SLF001
    barrier = threading.Barrier(2)

    def iteration(i: int) -> None:
        barrier.wait()
        _call(watched, "render", f"gen-1/for-loop-1-iteration-{i}")

    with contextlib.redirect_stdout(router):
        threads = [threading.Thread(target=iteration, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        _call(watched, "validate", "gen-1/for-loop-1-iteration-0")
    logs.close()
    files = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert files == ["kfp.log", "render-0.log", "render-1.log", "validate-0.log"]
    for name in ("render-0", "render-1"):
        text = (tmp_path / "logs" / f"{name}.log").read_text()
        assert text.count("Executing task 'render'") == 1 and "\x1b" not in text
        assert text.count("rendered 2 images") == 1 and "validate" not in text
    raw = (tmp_path / "logs" / "kfp.log").read_text()
    assert raw.count("Executing task 'render'") == 2 and "unknown model" in raw
    assert _states(view) == [("render-0", DONE), ("render-1", DONE), ("validate-0", FAILED)]
    tail = capture.log_tail(tmp_path / "logs" / "validate-0.log")
    assert len(tail) == 20 and "UsageError: --vqa" in tail[-2]
    assert "FAILURE" in tail[-1] and "validate line 29" in "\n".join(tail)


def test_a_task_label_names_the_model_it_scores_or_the_iteration_it_is():
    assert capture._task_label("score-cpu", {"model": "tiny-clip"}, "p/for-loop-2-iteration-1") == (  # noqa: SLF001
        "score-cpu-tiny-clip"
    )
    assert capture._task_label("render", {"shard": 1}, "p/for-loop-1-iteration-1") == "render-1"  # noqa: SLF001
    assert capture._task_label("sample", {}, "p") == "sample"  # noqa: SLF001


def test_log_names_are_unique_and_safe(tmp_path):
    logs = capture.TaskLogs(tmp_path)
    assert logs.new("score x/y")[0] == "score-x-y"
    assert logs.new("score x/y")[0] == "score-x-y-2"
    assert logs.new("kfp")[0] == "kfp-2"  # never the raw stream's file
    logs.close()


@pytest.mark.parametrize("kind", ["no effect", "base image"])
def test_local_noise_is_filtered_and_other_warnings_are_logged(tmp_path, kind):
    import warnings

    messages = {
        "no effect": "Task 'sample': settings ['cpu_limit'] have no effect in the current local "
        "runner and will be ignored.",
        "base image": 'You may be attemping to run a task that uses custom or non-Python base '
        'image "ghcr.io/autocomp/autocomp-core:0.1.0" in a Python environment.',
    }  # fmt: skip
    view, _, _ = _view(tty=False)
    with capture.captured(tmp_path / "logs", view) as seen:
        warnings.warn(messages[kind], UserWarning, stacklevel=1)
        warnings.warn("a real problem", UserWarning, stacklevel=1)
    assert seen["warnings"] == ["a real problem"]
    raw = (tmp_path / "logs" / "kfp.log").read_text()
    assert "a real problem" in raw and messages[kind][:20] not in raw
