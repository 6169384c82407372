"""Parallel transfers with bounded memory: the one helper the store's bulk movers use (publish's
image fetches and shard uploads, the streaming writer's uploads, the score step's read-ahead),
and `RangeFile`, a read-only file over ranged reads (what pyarrow streams a Parquet file of a
store through).

`ordered_map` runs `fn` over `items` on `workers` threads and yields the results in input
order, never holding more than `ahead` results (done or in flight) at once, so a stream of large
objects (images, Parquet shards) costs `ahead` objects of memory whatever its length. The first
failure is raised in order, after the work already started has finished or been cancelled.
"""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_WORKERS = 8  # concurrent requests per step: S3 servers answer them in parallel
READ_AHEAD = 8 << 20  # bytes fetched at once when a file is read in sequence (RangeFile)


def ordered_map(
    fn: Callable[[T], R], items: Iterable[T], workers: int = DEFAULT_WORKERS, ahead: int = 0
) -> Iterator[R]:
    """`fn(item)` for every item, in order, computed `workers` at a time with at most `ahead`
    (default 2 x workers) results held."""
    if workers <= 1:
        yield from map(fn, items)
        return
    ahead = max(ahead or 2 * workers, workers)
    pending: deque[Future[R]] = deque()
    with ThreadPoolExecutor(workers, thread_name_prefix="autocomp-transfer") as pool:
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) >= ahead:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def read_ahead(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """`items` produced by a background thread, at most `depth` ahead of the consumer (a
    stream's next batch is fetched while the current one is being worked on). An error in the
    producer is raised here, in order; a consumer that stops early stops the producer."""
    import queue
    import threading

    done = object()
    slots: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        slots.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            slots.put((done, None))
        except BaseException as exc:  # handed to the consumer
            slots.put((done, exc))

    thread = threading.Thread(target=produce, name="autocomp-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, error = slots.get()
            if item is done:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        while thread.is_alive():
            try:
                slots.get_nowait()
            except queue.Empty:
                thread.join(0.1)


class RangeFile(io.RawIOBase):
    """A read-only, seekable file over ranged reads (`fetch(offset, length) -> bytes`). Reads
    that continue where the last one ended fetch `block` bytes at once (one request per block
    of a sequential scan); a read elsewhere (a Parquet footer, one column) fetches only itself.
    At most one block is held; `block` 0: every read fetches only itself."""

    def __init__(
        self, fetch: Callable[[int, int], bytes], size: int, name: str, block: int = READ_AHEAD
    ) -> None:
        super().__init__()
        self._fetch, self._size, self.name, self.block = fetch, size, name, block
        self._pos, self._last_end = 0, -1
        self._cache_start, self._cache = 0, b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def size(self) -> int:
        return self._size

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = self._size - self._pos
        n = min(n, self._size - self._pos)
        if n <= 0:
            return b""
        start, end = self._pos, self._pos + n
        held = self._cache_start + len(self._cache)
        if self._cache_start <= start and end <= held:
            data = self._cache[start - self._cache_start : end - self._cache_start]
        elif start < self._cache_start < end <= held:  # ends in the held bytes: a footer read
            data = self._get(start, self._cache_start - start)
            data += self._cache[: end - self._cache_start]
            self._hold(start, data)
        else:
            want = min(max(n, self.block) if start == self._last_end else n, self._size - start)
            chunk = self._get(start, want)
            self._hold(start, chunk)
            data = chunk[:n]
        self._pos = self._last_end = end
        return data

    def _get(self, start: int, want: int) -> bytes:
        chunk = self._fetch(start, want)
        if len(chunk) != want:
            raise OSError(f"{self.name}: short read at {start} ({len(chunk)} of {want})")
        return chunk

    def _hold(self, start: int, chunk: bytes) -> None:
        """Keep the last bytes fetched (up to one block of READ_AHEAD): pyarrow reads a
        Parquet footer's tail, then the whole footer again when it is longer than its first
        read; the second read then fetches only what the first lacked."""
        small = len(chunk) <= max(self.block, READ_AHEAD)
        self._cache_start, self._cache = (start, chunk) if small else (0, b"")

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        return self.read(-1)
