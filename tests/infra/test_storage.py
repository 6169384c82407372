"""The store: local folders, and S3 against a real S3-protocol server (moto_server on 127.0.0.1),
reached through a TCP relay the tests can cut to simulate a server that goes away."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autocomp.errors import UsageError
from autocomp.store.local import LocalStore
from autocomp.store.s3 import S3Store
from autocomp.store.storage import MANIFEST, StorageError
from autocomp.store.stores import open_store

pytestmark = pytest.mark.infra


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(port: int, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


class Relay:
    """A TCP relay to the S3 server that can be cut (connections refused) and restored."""

    def __init__(self, target: int) -> None:
        self.target, self.port = target, _free_port()
        self.up = True
        self.server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while self.up and (data := a.recv(65536)):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


BUCKETS = (
    "autocomp",
    "bench",
    "mlpipeline",
    "bucket",
    "autocomp-runs",
    "my-autocomp-bucket",
)  # the last: docs/cluster.md's walk-throughs


def make_buckets(port: int, names: tuple[str, ...] = BUCKETS) -> None:
    """The buckets the tests use, made as an administrator would: autocomp never creates one
    (its keys may hold only objects under a prefix)."""
    from minio import Minio

    admin = Minio(f"127.0.0.1:{port}", "admin", "admin", secure=False, region="us-east-1")
    for name in names:
        admin.make_bucket(name)


@pytest.fixture(scope="module")
def s3_server():
    port = _free_port()
    binary = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen([str(binary), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        _wait(port)
        make_buckets(port)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    relay = Relay(s3_server)
    monkeypatch.setenv("AUTOCOMP_S3_ENDPOINT", f"http://127.0.0.1:{relay.port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return relay


def _output(folder: Path, big: int = 0) -> Path:
    (folder / "images" / "c1").mkdir(parents=True)
    (folder / "benchmark.parquet").write_bytes(b"PAR1" + os.urandom(1000))
    (folder / "images" / "c1" / "minimal.png").write_bytes(os.urandom(500))
    (folder / "README.md").write_text("# card\n")
    if big:
        (folder / "big.bin").write_bytes(os.urandom(big))
    return folder


def _same_tree(a: Path, b: Path) -> None:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(
        p.relative_to(b) for p in b.rglob("*") if p.is_file() and p.name != MANIFEST
    )
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes()


def test_local_roundtrip_and_skip(tmp_path):
    store = open_store(tmp_path / "store")
    assert isinstance(store, LocalStore) and store.outputs() == []
    src = _output(tmp_path / "out")
    manifest = store.put("benchmarks/run-1", src, {"stage": "publish"})
    assert [f["path"] for f in manifest["files"]] == [
        "README.md", "benchmark.parquet", "images/c1/minimal.png",
    ]  # fmt: skip
    assert store.outputs() == ["benchmarks/run-1"]
    (src / "README.md").write_text("changed")  # a complete output is never rewritten
    assert store.put("benchmarks/run-1", src)["files"] == manifest["files"]
    store.get("benchmarks/run-1", tmp_path / "back")
    assert (tmp_path / "back" / "README.md").read_text() == "# card\n"


def test_local_incomplete_output_is_invisible_and_redone(tmp_path):
    store = LocalStore(tmp_path / "store")
    half = tmp_path / "store" / "benchmarks" / "run-1"
    half.mkdir(parents=True)
    (half / "benchmark.parquet").write_bytes(b"half")  # a crashed writer's leftovers
    assert store.outputs() == [] and store.manifest("benchmarks/run-1") is None
    with pytest.raises(UsageError, match="no complete output"):
        store.get("benchmarks/run-1", tmp_path / "x")
    store.put("benchmarks/run-1", _output(tmp_path / "out"))
    assert (half / "benchmark.parquet").read_bytes() != b"half"


def test_bad_names_and_uris(tmp_path):
    with pytest.raises(UsageError, match="relative path"):
        LocalStore(tmp_path).put("../escape", tmp_path)
    with pytest.raises(UsageError, match="must name a bucket"):
        open_store("s3:///nobucket")
    with pytest.raises(UsageError, match="s3://bucket/prefix"):
        open_store("gs://bucket/x")


def test_s3_needs_its_settings_from_the_environment(monkeypatch):
    for name in ("AUTOCOMP_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UsageError, match="AUTOCOMP_S3_ENDPOINT"):
        open_store("s3://bucket/prefix")


def test_s3_roundtrip_with_multipart(s3_env, tmp_path):
    store = S3Store("s3://autocomp/runs", part_size=5 * 1024 * 1024)
    src = _output(tmp_path / "out", big=12 * 1024 * 1024)  # 3 parts of 5 MiB
    store.put("benchmarks/run-1", src, {"stage": "publish"})
    assert store.outputs() == ["benchmarks/run-1"]
    etag = store.client.stat_object("autocomp", "runs/benchmarks/run-1/big.bin").etag
    assert etag.endswith("-3")  # S3's multipart ETag: <md5 of part md5s>-<parts>
    store.get("benchmarks/run-1", tmp_path / "back")
    _same_tree(src, tmp_path / "back")
    assert store.manifest("benchmarks/run-1")["made_by"] == {"stage": "publish"}


def test_s3_download_is_verified_against_the_manifest(s3_env, tmp_path):
    import io

    store = S3Store("s3://autocomp/verify")
    store.put("x", _output(tmp_path / "out"))
    store.client.put_object("autocomp", "verify/x/README.md", io.BytesIO(b"tampered"), 8)
    with pytest.raises(StorageError, match="README.md: content does not match"):
        store.get("x", tmp_path / "back")


def test_s3_server_going_away_mid_write(s3_env, tmp_path):
    relay = s3_env
    store = S3Store("s3://autocomp/gone", retries=2, backoff=0.01)
    src = _output(tmp_path / "out")
    uploaded = []

    def cut_after_first(path):
        uploaded.append(path)
        relay.up = False  # the server goes away after the first file

    with pytest.raises(StorageError) as info:
        store.put("benchmarks/run-1", src, on_file=cut_after_first)
    message = str(info.value)
    assert "127.0.0.1" in message and "after 3 attempts" in message and "unpublished" in message
    relay.up = True
    # nothing is visible: no manifest, no listed output
    assert store.manifest("benchmarks/run-1") is None and store.outputs() == []
    # resume: the re-run uploads only what is missing, then publishes
    sent = []
    original = store.client.fput_object
    store.client.fput_object = lambda *a, **k: (sent.append(a[1]), original(*a, **k))[1]
    store.put("benchmarks/run-1", src)
    assert uploaded == ["README.md"] and sorted(sent) == [
        "gone/benchmarks/run-1/benchmark.parquet", "gone/benchmarks/run-1/images/c1/minimal.png",
    ]  # fmt: skip
    assert store.outputs() == ["benchmarks/run-1"]
    store.get("benchmarks/run-1", tmp_path / "back")
    _same_tree(src, tmp_path / "back")


def test_s3_complete_output_is_not_uploaded_again(s3_env, tmp_path):
    store = S3Store("s3://autocomp/skip")
    src = _output(tmp_path / "out")
    first = store.put("r", src)
    store.client.fput_object = lambda *a, **k: pytest.fail("a complete output was re-uploaded")
    assert store.put("r", src) == first
    assert json.loads(json.dumps(first))["files"][0]["path"] == "README.md"
    shutil.rmtree(tmp_path / "out")


def test_s3_tampered_object_leaves_nothing_under_the_output(s3_env, tmp_path):
    import io

    store = S3Store("s3://autocomp/tamper")
    store.put("x", _output(tmp_path / "out"))
    store.client.put_object("autocomp", "tamper/x/README.md", io.BytesIO(b"tampered"), 8)
    back = tmp_path / "back"
    with pytest.raises(StorageError, match="README.md"):
        store.get("x", back)
    assert not back.exists() or list(back.rglob("*")) == []  # verified before moved into place


def test_s3_server_going_away_mid_read(s3_env, tmp_path):
    relay = s3_env
    store = S3Store("s3://autocomp/read", retries=2, backoff=0.01)
    store.put("x", _output(tmp_path / "out", big=3 * 1024 * 1024))
    original = store.client.fget_object
    calls = []

    def cut_after_first(*args, **kwargs):
        calls.append(args[1])
        if len(calls) == 2:
            relay.up = False  # the server goes away mid-read
        return original(*args, **kwargs)

    store.client.fget_object = cut_after_first
    back = tmp_path / "back"
    with pytest.raises(StorageError, match="127.0.0.1"):
        store.get("x", back)
    assert not back.exists() or [p for p in back.rglob("*") if p.is_file()] == []
    relay.up = True
    store.client.fget_object = original
    store.get("x", back)  # a re-run fetches the whole output, verified
    _same_tree(tmp_path / "out", back)


def test_s3_errors_name_endpoint_bucket_and_fix_never_the_secret(s3_env, tmp_path, monkeypatch):
    from minio.error import S3Error

    store = S3Store("s3://autocomp/creds")
    store.put("benchmarks/b", _output(tmp_path / "out"))
    store.client.remove_object("autocomp", "creds/benchmarks/b/README.md")
    with pytest.raises(UsageError, match="NoSuchKey.*publish it again") as info:
        store.get("benchmarks/b", tmp_path / "back")
    assert "127.0.0.1" in str(info.value) and "bucket autocomp" in str(info.value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-value-never-printed")
    secret_store = S3Store("s3://autocomp/creds")
    # moto does not check signatures, so the server's answer to a wrong key is built as minio
    # builds it from a real response, and mapped by the store's own code path
    denied = S3Error(None, "InvalidAccessKeyId", "The AWS Access Key Id does not exist",
                     "/autocomp", "req", "host")  # fmt: skip
    error = secret_store._usage_error("reading benchmarks/b/_manifest.json", denied)  # noqa: SLF001
    text = str(error)
    assert "AWS_ACCESS_KEY_ID" in text and "s3cr3t" not in text and "\n" not in text


def test_local_store_hides_staging_and_sweeps_killed_writers(tmp_path):
    store = LocalStore(tmp_path / "store")
    stale = tmp_path / "store" / "benchmarks" / ".run-1.tmp-999999"  # a killed writer's folder
    stale.mkdir(parents=True)
    (stale / MANIFEST).write_text("{}")
    assert store.outputs() == []  # a staging folder with a manifest is not an output
    store.put("benchmarks/run-1", _output(tmp_path / "out"))
    assert store.outputs() == ["benchmarks/run-1"] and not stale.exists()


def test_s3_full_unreachable_or_refusing_store_stops_with_one_line(s3_env, tmp_path):
    """A full store, a store that refuses the write and one that does not answer: each stops
    the step with one line naming the store, the key and the fix, and leaves nothing visible."""
    from minio.error import S3Error

    store = S3Store("s3://autocomp/faults", retries=1, backoff=0.01)
    key = "work/render/k/images/c1/minimal.png"
    original = store.client.put_object
    for code, kind, fix in (("XMinioStorageFull", StorageError, "the store is full"),
                            ("AccessDenied", UsageError, "may not s3:PutObject")):  # fmt: skip

        def answer(*args, code=code, **kwargs):  # noqa: ANN002, ANN003, ANN202
            raise S3Error(None, code, "refused", "/autocomp", "req", "host")

        store.client.put_object = answer
        with pytest.raises(kind) as info:
            store.write_bytes(key, b"png")
        text = str(info.value)
        assert "\n" not in text and "s3://autocomp/faults" in text and key in text, text
        assert fix in text and "127.0.0.1" in text, text
    store.client.put_object = original
    s3_env.up = False
    try:
        with pytest.raises(StorageError) as info:
            store.write_bytes(key, b"png")
    finally:
        s3_env.up = True
    text = str(info.value)
    assert "unreachable" in text and key in text and "AUTOCOMP_S3_ENDPOINT" in text
    assert "re-run the step" in text and "\n" not in text
    # a streamed output whose upload fails half-way is not visible
    store.client.put_object = lambda *a, **k: (_ for _ in ()).throw(
        S3Error(None, "XMinioStorageFull", "full", "/autocomp", "req", "host")
    )
    with pytest.raises(StorageError), store.writer("benchmarks/half") as writer:
        writer.add_bytes("README.md", b"card")
        writer.add_bytes("data/part-0.parquet", b"PAR1")
    store.client.put_object = original
    assert store.manifest("benchmarks/half") is None and store.outputs("benchmarks/") == []
    assert store.stat(key) is None


def test_s3_objects_ranges_listing_and_copies(s3_env, tmp_path):
    store = S3Store("s3://autocomp/objects")
    store.write_bytes("work/a/x.bin", bytes(range(256)) * 64)
    assert store.stat("work/a/x.bin").size == 256 * 64 and store.stat("work/a/none") is None
    handle = store.open("work/a/x.bin")
    handle.seek(1000)
    assert handle.read(24) == (bytes(range(256)) * 64)[1000:1024]
    assert [o.key for o in store.list("work")] == ["work/a/x.bin"]
    assert store.read_bytes("work/a/none", missing_ok=True) is None
    with store.writer("out/copy") as writer:
        import hashlib

        data = bytes(range(256)) * 64
        writer.add_copy("x.bin", "work/a/x.bin", len(data), hashlib.sha256(data).hexdigest())
    store.get("out/copy", tmp_path / "copy")
    assert (tmp_path / "copy" / "x.bin").read_bytes() == data
    assert store.delete("work") == 1 and store.list("work") == []


class _Misbehaving:
    """An HTTP server that answers every request with one status and body: a proxy's bare 500,
    a 200 that is not S3 (a web page on the wrong port)."""

    def __init__(self, status: int, body: bytes) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # noqa: ANN002
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self.send_response(status)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _answer  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(("status", "body"), [(500, b"<html>oops</html>"),
                                              (200, b"\xff\xfe\x00garbage")])  # fmt: skip
def test_a_server_that_is_not_s3_is_one_line(status, body, monkeypatch, tmp_path):
    from autocomp.store.probe import probe_store

    server = _Misbehaving(status, body)
    monkeypatch.setenv("AUTOCOMP_S3_ENDPOINT", f"http://127.0.0.1:{server.port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    try:
        store = S3Store("s3://autocomp/x", retries=1, backoff=0.01)
        calls = [lambda: store.list("work"), lambda: store.manifest("benchmarks/b")]
        if status == 500:  # a 200 to a PUT or a GET of bytes cannot be told from S3's
            calls += [lambda: store.put("benchmarks/b", _output(tmp_path / "out")),
                      lambda: store.read_bytes("a/b")]  # fmt: skip
        for call in calls:
            with pytest.raises((StorageError, UsageError)) as info:
                call()
            text = str(info.value)
            assert "\n" not in text and "s3://autocomp/x" in text and len(text) < 600, text
        result = probe_store("s3://autocomp/x", retries=1)
        assert not result.ok and "\n" not in result.failure
    finally:
        server.close()
