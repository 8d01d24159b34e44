"""Decode the pieces of a big JSON array in file order, on several cores when asked:
worker processes (a reader that holds the GIL: msgspec and Python objects) or threads of
this process (a reader that releases it: the compiled Kineto reader). Pieces cut inside a
nested value are joined with the next one and decoded again (``jsonstream`` cuts them).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from traceviz.errors import TraceVizError
from traceviz.system.pools import kill_pool, main_not_rerun, process_pool

if TYPE_CHECKING:
    from traceviz.parsers.jsonstream import Piece, Range


def decode_in_order(
    pieces: Iterator[Piece | Range],
    decode: Callable[[Piece | Range], tuple[str, object]],
    workers: int = 1,
    in_flight: int = 4,
    name: str = "input",
    threads: bool = False,
) -> Iterator[tuple[Piece | Range, object]]:
    """Yield ``(piece, decode(piece))`` in file order, decoding on ``workers`` processes
    (``threads``: threads of this process, for a ``decode`` that releases the GIL).

    ``decode`` (a module-level function, so it can run in a worker) returns
    ``("ok", value)``, ``("syntax", message)`` for a JSON syntax error (a cut inside a
    nested value: the piece is joined with the next one and decoded again) or
    ``("invalid", message)`` for input that cannot be read (fatal; the message says why).
    ``in_flight`` pieces are decoded or waiting at once (with threads, at least one more
    than the threads: each thread has a piece and the next one is ready).
    """
    carry: Piece | Range | None = None
    last_error = ""

    def settle(piece, status: str, value: object) -> Iterator[tuple]:
        nonlocal carry, last_error
        if status == "invalid":
            raise TraceVizError(f"{name}: {value}")
        if carry is not None:
            if status == "ok":  # the earlier piece can never be completed
                raise TraceVizError(f"{name}: malformed JSON ({last_error})")
            piece = carry.join(piece)
            status, value = decode(piece)
            if status == "invalid":
                raise TraceVizError(f"{name}: {value}")
        if status == "ok":
            carry = None
            yield piece, value
        else:
            carry, last_error = piece, str(value)

    if workers <= 1:
        for piece in pieces:
            yield from settle(piece, *decode(piece))
    elif threads:
        yield from _threaded(pieces, decode, workers, workers + 1, settle)
    else:
        from concurrent.futures.process import BrokenProcessPool

        pool = process_pool(workers, [decode.__module__])
        try:
            queue: deque = deque()
            for piece in pieces:
                with main_not_rerun():  # a submit may start a worker
                    queue.append((piece, pool.submit(decode, piece)))
                if len(queue) >= in_flight:
                    done, fut = queue.popleft()
                    yield from settle(done, *fut.result())
            while queue:
                done, fut = queue.popleft()
                yield from settle(done, *fut.result())
        except BrokenProcessPool:
            kill_pool(pool)
            raise TraceVizError(f"{name}: a decode worker process died (killed by the system: "
                                "out of memory? TRACEVIZ_IMPORT_WORKERS=1 decodes in this "
                                "process)") from None
        except BaseException:
            # an error, Ctrl-C, SIGTERM or an abandoned generator: stop the decoding now
            # rather than waiting for the pieces in flight
            kill_pool(pool)
            raise
        pool.shutdown()
    if carry is not None:
        raise TraceVizError(f"{name}: malformed JSON ({last_error})")


def _threaded(pieces: Iterator, decode: Callable, workers: int, in_flight: int,
              settle: Callable) -> Iterator[tuple]:
    """The pieces decoded by ``workers`` threads, settled in file order. A thread cannot be
    killed: on an error (or Ctrl-C) the pieces not started are cancelled and the few in
    progress finish on their own, their results dropped."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(workers, thread_name_prefix="traceviz-decode")
    try:
        queue: deque = deque()
        for piece in pieces:
            queue.append((piece, pool.submit(decode, piece)))
            if len(queue) >= in_flight:
                done, fut = queue.popleft()
                yield from settle(done, *fut.result())
        while queue:
            done, fut = queue.popleft()
            yield from settle(done, *fut.result())
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()  # every piece is decoded: the threads end at once, none left running
