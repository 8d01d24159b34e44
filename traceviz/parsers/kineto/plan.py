"""How a Kineto trace is read: how many decoders, what piece size, and where the pieces come
from. Light on purpose (no pandas, numpy or pyarrow): ``prefetch`` reads with the same
plan before those are imported.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from traceviz.files.fileio import is_gzip, open_input, read_whole
from traceviz.files.limits import element_limit, inflate_limit
from traceviz.parsers.jsonstream import ArrayChunks, Piece, Range, file_ranges
from traceviz.system.pools import usable_cores

CHUNK_BYTES = 16 << 20
IN_PROCESS_CHUNK = 2 << 20
# JSON megabytes per decode worker: below this a worker's fixed memory (its interpreter,
# ~110 MB, and the pieces in flight) outweighs its help (measured: benchmarks/ingest.py
# --sizes; 2 workers import 214 MB in 5.4 s instead of 7.0 s but peak at 3.5x the JSON
# instead of 2.7x)
WORKER_MB_EACH = 256
# JSON megabytes per decode thread (the compiled reader): two pieces (THREAD_CHUNK) each,
# so that the threads stay busy to the end; a thread's cost is its pieces in flight; at
# most MAX_THREADS (the columns are built partly under the GIL: benchmarks/cores.py).
# Two threads read the 35 MB of a small trace in 0.27 s where one took 0.35 s
THREAD_MB_EACH = 16
THREAD_CHUNK = 8 << 20
MAX_THREADS = 8


def workers(path: Path, threads: bool) -> int:
    """Decoders worth running for this file (``TRACEVIZ_IMPORT_WORKERS`` overrides), at
    most one per usable core; ``threads``: for the compiled reader. Threads (the compiled
    reader releases the GIL) cost nothing to start: one per ``THREAD_MB_EACH`` of JSON. A
    worker process costs ~0.5 s to start and ~250 MB of memory (its interpreter and the
    pieces in flight), so files below ``WORKER_MB_EACH`` per worker are decoded in the
    importing process itself."""
    forced = os.environ.get("TRACEVIZ_IMPORT_WORKERS", "")
    if forced.isdigit() and int(forced) >= 1:
        return int(forced)
    size = json_size(path)
    by_size = size // ((THREAD_MB_EACH if threads else WORKER_MB_EACH) << 20)
    if by_size < 2:
        return 1
    return int(min(by_size, usable_cores(), MAX_THREADS if threads else 8))


def json_size(path: Path) -> int:
    """The JSON's size in bytes: a gzip file's own record of it (its last 4 bytes, the
    size modulo 4 GiB), at least 8x the compressed size (Kineto JSON compresses 8-20x;
    a larger file wraps its record, and a file of several members records the last)."""
    size = path.stat().st_size
    if not is_gzip(path):
        return size
    with open(path, "rb") as f:
        f.seek(max(size - 4, 0))
        recorded = int.from_bytes(f.read(4), "little")
    # a record past what the file may inflate to is not believed (a hand-made file)
    return int(max(min(recorded, inflate_limit(size)), size * 8))


def piece_bytes(workers: int, threads: bool, asked: int | None = None) -> int:
    """The piece decoded at once: ``asked``, else by who decodes (see below); never above
    ``TRACEVIZ_MAX_ELEMENT_MB``, as the cutters find an element past the limit as one
    bigger than a piece (a whole document below it holds none)."""
    if asked is None:
        # in this process, 2 MB pieces: a piece's decoded events (Python objects, several
        # times its bytes) are the import's peak memory, and small pieces decode faster
        # too (measured: 1.58 s and 356 MB peak for 171 MB at 2 MB, 2.46 s and 397 MB at
        # 11 MB; 0.087 s against 0.102 s at 4 MB for 9 MB); workers take bigger ones, and
        # so does the compiled reader, whose columns hold a piece in about twice its bytes:
        # a piece's fixed cost is then paid less often (measured on 214 MB: 3.7 s of CPU
        # and 1.91x the JSON at peak at 16 MB, 4.7 s and 1.87x at 2 MB); its threads take
        # 8 MB pieces, as each holds a piece's columns at once (measured on 214 MB with 2
        # threads: a peak of 2.2x the JSON at 16 MB, 1.9x at 8 MB, in the same time)
        asked = THREAD_CHUNK if threads and workers > 1 else \
            CHUNK_BYTES if workers > 1 or threads else IN_PROCESS_CHUNK
    return min(asked, max(element_limit(), 1 << 16))


_TRACE_EVENTS = b'"traceEvents"'


def whole_document(path: Path, limit: int,
                   ascii_count: Callable[[bytes, bytes], tuple[bool, int]] | None = None
                   ) -> bytes | None:
    """The file's JSON where it is read as one document: at most ``limit`` bytes, read
    without error, ASCII and holding one ``traceEvents`` key (the streaming path checks
    UTF-8 and takes the first such key it meets); None: it is read in pieces.
    ``ascii_count``: what answers ``data.isascii()`` and ``data.count(key)`` (the compiled
    reader's ``ascii_count`` answers both without the GIL, beside the imports)."""
    data = read_whole(path, limit)
    if data is None:
        return None
    is_ascii, keys = (ascii_count or python_ascii_count)(data, _TRACE_EVENTS)
    return data if is_ascii and keys == 1 else None


def python_ascii_count(data: bytes, needle: bytes) -> tuple[bool, int]:
    """``data.isascii()`` and ``data.count(needle)``, as the compiled ``ascii_count``."""
    return data.isascii(), data.count(needle)


class PieceSource:
    """The event array's pieces, in file order, and afterwards the rest of the document: a
    plain file is cut by offsets (each decoder reads its own range), gzip is streamed."""

    def __init__(self, path: Path, piece: int):
        ranges = None if is_gzip(path) else file_ranges(str(path), b"traceEvents", piece,
                                                         name=str(path))
        self._close: Callable[[], None] | None = None
        self.pieces: Iterator[Piece | Range]
        self.metadata: Callable[[], bytes]
        if ranges is not None:
            self.pieces, self.metadata = iter(ranges[0]), (lambda: ranges[1])
        else:
            stream = open_input(path)
            self._close = stream.close
            chunks = ArrayChunks(stream, b"traceEvents", chunk_bytes=piece, name=str(path))
            self.pieces, self.metadata = iter(chunks), chunks.metadata_document

    def close(self) -> None:
        if self._close is not None:
            self._close()
