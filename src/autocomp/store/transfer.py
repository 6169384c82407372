"""Parallel transfers with bounded memory: the one helper the store's bulk movers use (publish's
image fetches and shard uploads, the streaming writer's uploads, the score step's read-ahead).

`ordered_map` runs `fn` over `items` on `workers` threads and yields the results in input order,
never holding more than `ahead` results (done or in flight) at once, so a stream of large
objects (images, Parquet shards) costs `ahead` objects of memory whatever its length. The first
failure is raised in order, after the work already started has finished or been cancelled.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_WORKERS = 8  # concurrent requests per step: S3 servers answer them in parallel


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
