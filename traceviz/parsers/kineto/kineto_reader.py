"""torch.profiler (Kineto) Chrome-trace JSON -> ``Trace``.

The event array is cut into pieces; each is read into raw columns by the compiled reader
(``native.py``) or, where it is not built, not wanted (``TRACEVIZ_READER=python``) or
declines a piece, by the Python one (``events.py``, msgspec); ``columns.py`` builds the
base columns from either. ``ts``/``dur`` are kept as their raw text so microsecond floats
with nanosecond fractions become exact int64 ns (a float64 cannot hold a 16-digit epoch in
µs to the ns).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, cast

import msgspec
import pandas as pd

from traceviz.errors import TraceVizError
from traceviz.files.fileio import is_gzip, open_input, read_whole
from traceviz.files.limits import element_limit, inflate_limit
from traceviz.parsers.cut_step import without_cut_step
from traceviz.parsers.joined import in_time_order
from traceviz.parsers.jsonstream import ArrayChunks, Piece, Range, decode_in_order, file_ranges
from traceviz.parsers.kineto import native
from traceviz.parsers.kineto.args import BAD_MESSAGE
from traceviz.parsers.kineto.columns import BIG_STEP, NEGATIVE, event_columns
from traceviz.parsers.kineto.events import DOCUMENT, EVENTS, python_columns
from traceviz.parsers.normalize import finish
from traceviz.parsers.numbers import dropped_note
from traceviz.system.pools import usable_cores
from traceviz.table.meta import TraceMeta
from traceviz.trace import Trace

CHUNK_BYTES = 16 << 20
IN_PROCESS_CHUNK = 2 << 20


def decode_piece(piece: Piece | Range, details: bool = True) -> tuple[str, object]:
    """Decode one piece of the event array into base columns and drop counts (runs in a
    worker); ``details=False`` leaves the details column empty."""
    data = piece.read()
    if native.reader() == "native":
        read = native.native_columns(data)
        if read is not None:  # None: the Python reader decodes it (see native.py)
            ph, cat, rows, _ = read
            return "ok", event_columns(ph, cat, rows.take, details=details)
    if not data.isascii():  # JSON is UTF-8; msgspec skips unused fields unchecked
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as e:
            return "invalid", (f"not valid UTF-8 text (byte 0x{data[e.start]:02x} in "
                               f"{data[max(0, e.start - 20):e.start + 20]!r})")
    try:
        return "ok", python_columns(EVENTS.decode(b"[" + data + b"]"), details=details)
    except msgspec.ValidationError as e:
        return "invalid", f"unexpected event layout ({e})"
    except msgspec.DecodeError as e:
        return "syntax", str(e)
    except RecursionError:
        return "invalid", "JSON nested too deeply"


def _workers(path: Path, threads: bool | None = None) -> int:
    """Decoders worth running for this file (``TRACEVIZ_IMPORT_WORKERS`` overrides), at
    most one per usable core; ``threads``: for the compiled reader (default: whether it
    is the one in use). Threads (the compiled reader releases the GIL) cost nothing
    to start: one per ``THREAD_MB_EACH`` of JSON. A worker process costs ~0.5 s to start
    and ~250 MB of memory (its interpreter and the pieces in flight), so files below
    ``WORKER_MB_EACH`` per worker are decoded in the importing process itself."""
    forced = os.environ.get("TRACEVIZ_IMPORT_WORKERS", "")
    if forced.isdigit() and int(forced) >= 1:
        return int(forced)
    if threads is None:
        threads = native.reader() == "native"
    size = _json_size(path)
    by_size = size // ((THREAD_MB_EACH if threads else WORKER_MB_EACH) << 20)
    if by_size < 2:
        return 1
    return int(min(by_size, usable_cores(), MAX_THREADS if threads else 8))


def _json_size(path: Path) -> int:
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


def parse(path: Path, progress: Callable[[int], None] | None = None,
          workers: int | None = None, chunk_bytes: int | None = None,
          details: bool = True) -> Trace:
    """Read a Kineto trace (plain or gzipped) into a ``Trace``.

    ``workers`` decode chunks in parallel (default: by file size, see ``_workers``);
    ``chunk_bytes`` is the piece decoded at once (default: 2 MB in this process, 16 MB
    in a worker: a whole piece's decoded events are held at once).
    """
    # a TRACEVIZ_READER that cannot be met fails here, in one line; the compiled reader
    # releases the GIL, so threads decode in parallel (no process to start, no copy)
    threads = native.reader() == "native"
    workers = _workers(path, threads) if workers is None else workers
    if chunk_bytes is None:
        # in this process, 2 MB pieces: a piece's decoded events (Python objects, several
        # times its bytes) are the import's peak memory, and small pieces decode faster
        # too (measured: 1.58 s and 356 MB peak for 171 MB at 2 MB, 2.46 s and 397 MB at
        # 11 MB; 0.087 s against 0.102 s at 4 MB for 9 MB); workers take bigger ones, and
        # so does the compiled reader, whose columns hold a piece in about twice its bytes:
        # a piece's fixed cost is then paid less often (measured on 214 MB: 3.7 s of CPU
        # and 1.91x the JSON at peak at 16 MB, 4.7 s and 1.87x at 2 MB); its threads take
        # 8 MB pieces, as each holds a piece's columns at once (measured on 214 MB with 2
        # threads: a peak of 2.2x the JSON at 16 MB, 1.9x at 8 MB, in the same time)
        chunk_bytes = THREAD_CHUNK if threads and workers > 1 else \
            CHUNK_BYTES if workers > 1 or threads else IN_PROCESS_CHUNK
    # pieces no larger than TRACEVIZ_MAX_ELEMENT_MB: the cutters find an element past
    # the limit as one bigger than a piece (a whole document below it holds none)
    chunk_bytes = min(chunk_bytes, max(element_limit(), 1 << 16))
    whole = _whole_document(path, chunk_bytes, progress, details) if workers <= 1 else None
    if whole is not None:
        frames, dropped, doc = whole
    else:
        frames, dropped, doc = _streamed(path, progress, workers, chunk_bytes, details,
                                         threads)
    if not frames:
        why = dropped_note(dropped)  # every event dropped: say why, not only that
        raise TraceVizError(f"{path}: the trace holds no profiler events"
                            + (f" ({'; '.join(why)})" if why else ""))
    # joined in time order (finish then sorts nothing), on the decoding threads; the
    # text columns' categories in the order their rows come: a piece lists them in an
    # order of its own (and keeps those of rows it dropped), so their union depended on
    # where the pieces were cut (1 thread or 2, one document or pieces)
    base = in_time_order(frames, ("name", "details"), threads=workers if threads else 1)
    meta = _meta(doc if isinstance(doc, dict) else {}, path)
    altered = {NEGATIVE, BIG_STEP, BAD_MESSAGE}
    notes = dropped_note({r: n for r, n in dropped.items() if r not in altered})
    notes += [f"{n:,} event{'s' * (n != 1)} with {r}" for r, n in dropped.items()
              if r in altered and n]
    if notes:
        meta["notes"] = notes
    # a step the code did not finish (a capture cut short) is no step's work
    return without_cut_step(finish(base, meta))


_TRACE_EVENTS = b'"traceEvents"'


def _whole_document(path: Path, limit: int, progress: Callable[[int], None] | None,
                    details: bool) -> tuple[list[pd.DataFrame], Counter, object] | None:
    """A file that fits in one piece (``limit`` bytes of JSON), decoded in one pass over
    one buffer: no cutting, copying or searching for the array's end. None when anything
    is unusual (not ASCII, not valid JSON, no or several ``traceEvents``, an event that is
    not an object...): the streaming path then decodes it, or says precisely why not."""
    data = read_whole(path, limit)
    # the streaming path checks UTF-8 and takes the first "traceEvents" key it meets
    if data is None or not data.isascii() or data.count(_TRACE_EVENTS) != 1:
        return None
    read = native.native_columns(data, document=True) if native.reader() == "native" else None
    if read is not None:  # None: the Python reader decodes it (see native.py)
        ph, cat, rows, meta = read
        frame, dropped = event_columns(ph, cat, rows.take, details=details)
        if progress:
            progress(len(data))
        return ([frame] if len(frame) else []), dropped, meta
    try:
        doc = DOCUMENT.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None
    if doc.traceEvents is msgspec.UNSET:
        return None
    frame, dropped = python_columns(doc.traceEvents, details=details)
    if progress:
        progress(len(data))
    meta = {k: v for k, v in msgspec.structs.asdict(doc).items()
            if k != "traceEvents" and v is not msgspec.UNSET}
    return ([frame] if len(frame) else []), dropped, meta


def _streamed(path: Path, progress: Callable[[int], None] | None, workers: int,
              chunk_bytes: int, details: bool, threads: bool = False
              ) -> tuple[list[pd.DataFrame], Counter, object]:
    """The event array decoded piece by piece (by ``workers`` processes, or ``threads``,
    when more than one), and the rest of the document."""
    # a plain file is cut by offsets and each worker reads its own range; gzip streams
    ranges = None if is_gzip(path) else file_ranges(str(path), b"traceEvents", chunk_bytes,
                                                     name=str(path))
    stream = None
    try:
        pieces: Iterator[Piece | Range]
        metadata: Callable[[], bytes]
        if ranges is not None:
            pieces, metadata = iter(ranges[0]), (lambda: ranges[1])
        else:
            stream = open_input(path)
            chunks = ArrayChunks(stream, b"traceEvents", chunk_bytes=chunk_bytes,
                                 name=str(path))
            pieces, metadata = iter(chunks), chunks.metadata_document
        frames = []
        dropped: Counter = Counter()
        decode = decode_piece if details else partial(decode_piece, details=False)
        for piece, decoded in decode_in_order(pieces, decode, workers=workers,
                                              name=str(path), threads=threads):
            frame, counts = cast(tuple[pd.DataFrame, Counter], decoded)
            if progress:
                progress(piece.size)
            dropped.update(counts)
            if len(frame):
                frames.append(frame)
        try:
            doc = msgspec.json.decode(metadata())
        except msgspec.DecodeError as e:
            raise TraceVizError(f"{path}: malformed JSON around the event array ({e})") from None
        except UnicodeDecodeError as e:
            raise TraceVizError(f"{path}: not valid UTF-8 text around the event array "
                                f"({e.reason} at byte {e.start})") from None
        except RecursionError:
            raise TraceVizError(f"{path}: JSON nested too deeply around the event "
                                "array") from None
    finally:
        if stream is not None:
            stream.close()
    return frames, dropped, doc


def _meta(doc: dict, path: Path) -> TraceMeta:
    devices, properties = {}, {}
    props = doc.get("deviceProperties")
    for d in props if isinstance(props, list) else []:
        if isinstance(d, dict) and "id" in d and "name" in d:
            devices[str(d["id"])] = str(d["name"])
            properties[str(d["id"])] = device_properties(d)
    meta: TraceMeta = {
        "source_format": "kineto",
        "source_file": str(path),
        "profiler": "torch.profiler",
        "devices": devices,
    }
    if properties:
        meta["device_properties"] = properties
    # the document's own keys, kept as recorded
    if "schemaVersion" in doc:
        meta["kineto_schemaVersion"] = doc["schemaVersion"]
    if "distributedInfo" in doc:
        meta["kineto_distributedInfo"] = doc["distributedInfo"]
    if "baseTimeNanoseconds" in doc:
        meta["kineto_baseTimeNanoseconds"] = doc["baseTimeNanoseconds"]
    if "traceName" in doc:
        meta["kineto_traceName"] = doc["traceName"]
    return meta


def device_properties(d: dict) -> dict[str, Any]:
    """What a Kineto ``deviceProperties`` entry states about its device, under the keys an
    XSpace GPU plane's are kept (``meta["device_properties"]``): name, multiprocessors,
    memory size (bytes), compute capability; a value of the wrong type is left out."""
    out: dict[str, Any] = {"name": str(d["name"])}

    def whole(key: str) -> int | None:
        v = d.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    for key, out_key in (("numSms", "multiprocessors"), ("totalGlobalMem", "memory_bytes")):
        if (v := whole(key)) is not None:
            out[out_key] = v
    major, minor = whole("computeMajor"), whole("computeMinor")
    if major is not None:
        out["compute_capability"] = f"{major}.{minor or 0}"
    return out
