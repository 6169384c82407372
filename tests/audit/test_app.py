"""The app over real HTTP (uvicorn on loopback): tokens, isolation between annotators, path
traversal, bad answers, the journal, resume."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

from autocomp.audit.study import Study
from tests.audit.conftest import tokens


def request(base: str, method: str, path: str, body: str | None = None):
    """A raw request (no client-side path normalisation): status, headers, body."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    headers = {"Content-Type": "application/x-www-form-urlencoded"} if body is not None else {}
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), data


def test_link_resumes_at_the_first_open_item(server, study):
    token = tokens(study)["V1"]
    status, headers, _ = request(server, "GET", f"/a/{token}/")
    assert status == 303 and headers["location"] == f"/a/{token}/item/0"
    status, headers, _ = request(server, "POST", f"/a/{token}/item/0", "answer=1")
    assert status == 303 and headers["location"] == f"/a/{token}/item/1"
    status, headers, _ = request(server, "POST", f"/a/{token}/item/2", "answer=0")
    assert headers["location"] == f"/a/{token}/item/3"
    status, headers, _ = request(server, "GET", f"/a/{token}/")
    assert headers["location"] == f"/a/{token}/item/1"  # the first open one
    assert Study(study).answers("V1") == {0: 1, 2: 0}
    status, headers, page = request(server, "GET", f"/a/{token}/item/0")
    assert status == 200 and b'class="option chosen"' in page and b"answered 2" in page
    assert headers["referrer-policy"] == "no-referrer"
    assert "script-src 'self'" in headers["content-security-policy"]


def test_unknown_and_other_tokens_are_refused(server, study):
    mine, theirs = tokens(study)["V1"], tokens(study)["V2"]
    request(server, "POST", f"/a/{theirs}/item/0", "answer=0")
    for path in (f"/a/{mine[:-1]}x/", f"/a/{mine[:-1]}x/item/0", f"/a/{mine[:-1]}x/image/0",
                 "/a//item/0", "/a/V2/item/0", f"/a/{mine}{theirs}/item/0"):  # fmt: skip
        status, _, body = request(server, "GET", path)
        assert status == 404, path
        assert b"answer" not in body
    status, _, _ = request(server, "POST", f"/a/{mine[:-1]}x/item/0", "answer=0")
    assert status == 404
    # V1's pages show V1's progress only: V2's answer is not visible to V1
    _, _, page = request(server, "GET", f"/a/{mine}/item/0")
    assert b"answered 0" in page and b"chosen" not in page
    assert Study(study).answers("V1") == {}


@pytest.mark.parametrize(
    "path",
    [
        "/a/{t}/image/../../study.json",
        "/a/{t}/image/..%2f..%2fstudy.json",
        "/a/{t}/image/%2e%2e/%2e%2e/key.parquet",
        "/a/{t}/../../study.json",
        "/a/{t}/image/-1",
        "/a/{t}/image/99999",
        "/a/{t}/item/99999",
        "/images/x.png",
        "/study.json",
        "/key.parquet",
        "/answers/V1.jsonl",
        "/items/V1.json",
    ],
)
def test_nothing_else_on_disk_is_reachable(server, study, path):
    token = tokens(study)["V1"]
    status, _, body = request(server, "GET", path.format(t=token))
    assert status in (404, 400), (path, status)
    assert token.encode() not in body and b"PAR1" not in body and b'"key"' not in body


def test_images_are_served_by_position_only(server, study):
    token = tokens(study)["V1"]
    items = json.loads((study / "items" / "V1.json").read_text())
    status, headers, body = request(server, "GET", f"/a/{token}/image/0")
    assert status == 200 and headers["content-type"] == "image/png"
    assert body == (study / "images" / items[0]["image"]).read_bytes()


@pytest.mark.parametrize(
    "body",
    ["answer=9999", "answer=-1", "answer=x", "", "answer=0&answer=1", "answer=" + "9" * 5000],
)
def test_bad_answers_are_refused_and_not_saved(server, study, body):
    token = tokens(study)["V1"]
    status, _, _ = request(server, "POST", f"/a/{token}/item/0", body)
    assert status in (400, 413)
    assert not (study / "answers" / "V1.jsonl").exists()


def test_escaped_html(study):
    """Options are study data: they reach the page escaped."""
    from autocomp.audit import app as app_module

    items = json.loads((study / "items" / "V1.json").read_text())
    items[0]["options"][0] = '<script>alert("x")</script>'
    (study / "items" / "V1.json").write_text(json.dumps(items))
    import asyncio

    from starlette.requests import Request

    application = app_module.create_app(study)
    route = next(
        r for r in application.routes if getattr(r, "path", "") == "/a/{token}/item/{item:int}"
    )
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b"",
             "path_params": {"token": tokens(study)["V1"], "item": 0}}  # fmt: skip
    page = asyncio.run(route.endpoint(Request(scope))).body
    assert b"<script>alert" not in page and b"&lt;script&gt;alert(&quot;x&quot;)" in page


def test_journal_survives_a_line_cut_short(study):
    s = Study(study)
    s.answer("V1", 0, 1)
    with (study / "answers" / "V1.jsonl").open("ab") as f:
        f.write(b'{"item": 1, "ans')  # a crash in the middle of a write
    s.answer("V1", 2, 0)
    assert Study(study).answers("V1") == {0: 1, 2: 0}


def test_validity_opens_after_the_choices_and_locks_them(server, study):
    """The validity questions show the positive caption: they wait for every choice answer,
    and afterwards the choice answers cannot change."""
    token = tokens(study)["V1"]
    items = Study(study).items["V1"]
    first_valid = next(i for i, item in enumerate(items) if item["task"] == "valid")
    status, headers, _ = request(server, "GET", f"/a/{token}/item/{first_valid}")
    assert status == 303 and headers["location"] == f"/a/{token}/item/0"
    status, _, _ = request(server, "POST", f"/a/{token}/item/{first_valid}", "answer=0")
    assert status == 409
    for i in range(first_valid):
        assert request(server, "POST", f"/a/{token}/item/{i}", "answer=0")[0] == 303
    assert request(server, "POST", f"/a/{token}/item/0", "answer=1")[0] == 303  # not yet locked
    assert request(server, "POST", f"/a/{token}/item/{first_valid}", "answer=0")[0] == 303
    status, _, _ = request(server, "POST", f"/a/{token}/item/0", "answer=0")
    assert status == 409
    status, _, page = request(server, "GET", f"/a/{token}/item/0")
    assert status == 200 and b"disabled" in page and b"Locked" in page
    assert Study(study).answers("V1")[0] == 1


def test_cli_collect_and_serve_refuse_bad_input(study, tmp_path, capsys):
    from autocomp.cli.main import main

    assert main(["audit", "collect", str(tmp_path), "--out", str(tmp_path / "h")]) == 2
    assert "autocomp audit export" in capsys.readouterr().err
    assert main(["audit", "serve", str(study), "--port", "0"]) == 2
    Study(study).answer("V2", 0, 0)
    collect = ["audit", "collect", str(study), "--out", str(tmp_path / "human")]
    assert main(collect) == 2  # annotators at work: refused, nothing written
    err = capsys.readouterr().err
    total = len(Study(study).items["V2"])
    assert f"V1 0 of {total}" in err and f"V2 1 of {total}" in err and "--partial" in err
    assert not (tmp_path / "human").exists()
    assert main([*collect, "--partial"]) == 0
    printed = capsys.readouterr()
    assert f"V2: 1 of {total} answered (choice 1 of " in printed.out
    assert f"{total - 1} open" in printed.out and "incomplete study" in printed.err
    rows = (tmp_path / "human" / "V2.csv").read_text().splitlines()
    assert rows[0] == "annotator,sample_id,task,answer" and len(rows) == 2
    assert (tmp_path / "human" / "V1.csv").read_text().splitlines() == rows[:1]
    record = json.loads((tmp_path / "human" / "audit.json").read_text())
    assert record["config"]["seed"] == 7 and record["autocomp_version"]
    assert record["complete"] is False and record["answers"]["V2"]["answered"] == 1


def test_answers_survive_a_killed_server(study, tmp_path):
    """`autocomp audit serve` in its own process, killed (SIGKILL) right after answering: the
    answers are on disk, and a new server resumes where the annotator stopped."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.audit.conftest import _free_port

    def start(port):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "autocomp.cli.main", "audit", "serve", str(study),
             "--port", str(port)],
            stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        links = [proc.stdout.readline().strip() for _ in range(3)]
        deadline = time.monotonic() + 30
        while True:
            try:
                request(f"http://127.0.0.1:{port}", "GET", "/")
                return proc, links
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)

    port = _free_port()
    proc, links = start(port)
    try:
        token = tokens(study)["V3"]
        assert f"V3: http://127.0.0.1:{port}/a/{token}/" in links
        for item in range(3):
            assert request(f"http://127.0.0.1:{port}", "POST", f"/a/{token}/item/{item}",
                           "answer=1")[0] == 303  # fmt: skip
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert Study(study).answers("V3") == {0: 1, 1: 1, 2: 1}
    port = _free_port()
    proc, _ = start(port)
    try:
        _, headers, _ = request(f"http://127.0.0.1:{port}", "GET", f"/a/{token}/")
        assert headers["location"] == f"/a/{token}/item/3"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_organiser_sees_each_annotators_progress(server, study):
    from autocomp.audit.app import progress_link

    Study(study).answer("V2", 0, 0)
    Study(study).answer("V2", 1, 0)
    link = progress_link(study, "127.0.0.1", 0)
    path = link.split(":0", 1)[1]
    status, _, page = request(server, "GET", path)
    assert status == 200
    total = len(Study(study).items["V2"])
    text = page.decode()
    assert f"<td>V2</td><td>2 of {total}</td>" in text and f"{total - 2} open" in text
    assert f"<td>V1</td><td>0 of {total}</td>" in text
    token = tokens(study)["V1"]
    for wrong in ("/progress/" + "0" * 32 + "/", f"/progress/{token}/", "/progress/"):
        assert request(server, "GET", wrong)[0] == 404  # an annotator's token is not enough


def test_serve_prints_every_link_the_progress_page_and_how_to_stop(study, monkeypatch, capsys):
    import autocomp.audit.app as app
    from autocomp.cli.main import main

    monkeypatch.setattr(app, "serve", lambda *a, **k: None)
    assert main(["audit", "serve", str(study), "--port", "8999"]) == 0
    out = capsys.readouterr().out.splitlines()
    for name, token in tokens(study).items():
        assert f"{name}: http://127.0.0.1:8999/a/{token}/" in out
    assert f"progress (organiser): {app.progress_link(study, '127.0.0.1', 8999)}" in out
    assert any("Stop with Ctrl+C" in line for line in out)
