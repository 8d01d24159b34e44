"""torch.profiler (Kineto) Chrome-trace JSON -> ``Trace``.

The event array is cut into pieces; each is read into raw columns by the compiled reader
(``native.py``) or, where it is not built, not wanted (``TRACEVIZ_READER=python``) or
declines a piece, by the Python one (``events.py``, msgspec); ``columns.py`` builds the
base columns from either. ``ts``/``dur`` are kept as their raw text so microsecond floats
with nanosecond fractions become exact int64 ns (a float64 cannot hold a 16-digit epoch in
µs to the ns).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, cast

import msgspec
import pandas as pd

from traceviz.errors import TraceVizError
from traceviz.parsers.cut_step import without_cut_step
from traceviz.parsers.joined import in_time_order
from traceviz.parsers.jsonstream import Piece, Range, decode_in_order
from traceviz.parsers.kineto import native, plan, prefetch
from traceviz.parsers.kineto.args import BAD_MESSAGE
from traceviz.parsers.kineto.columns import BIG_STEP, NEGATIVE, event_columns
from traceviz.parsers.kineto.events import DOCUMENT, EVENTS, python_columns
from traceviz.parsers.kineto.prefetch import Prefetched
from traceviz.parsers.normalize import finish
from traceviz.parsers.numbers import dropped_note
from traceviz.table.meta import TraceMeta
from traceviz.trace import Trace


def decode_piece(piece: Piece | Range, details: bool = True,
                 ahead: Prefetched | None = None) -> tuple[str, object]:
    """Decode one piece of the event array into base columns and drop counts (runs in a
    worker); ``details=False`` leaves the details column empty; ``ahead``: what was read
    ahead (the piece's bytes and raw read, where it holds them)."""
    read_ahead = prefetch.read_of(ahead, piece)
    data = piece.read() if read_ahead is None else read_ahead[0]
    if native.reader() == "native":
        read = native.native_columns(data, done=None if read_ahead is None else read_ahead[1:])
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
    """``plan.workers``; ``threads`` by default: whether the compiled reader is used."""
    return plan.workers(path, native.reader() == "native" if threads is None else threads)


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
    chunk_bytes = plan.piece_bytes(workers, threads, chunk_bytes)
    # what was read ahead while the command imported (prefetch.py): a whole document is
    # taken whatever this plan's pieces (the table does not depend on the cutting)
    ahead = prefetch.take(path, workers, chunk_bytes) if threads else None
    whole = _whole_document(path, chunk_bytes, progress, details, ahead) \
        if workers <= 1 or (ahead is not None and ahead.whole is not None) else None
    if whole is not None:
        frames, dropped, doc = whole
    else:
        frames, dropped, doc = _streamed(path, progress, workers, chunk_bytes, details,
                                         threads, ahead)
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




def _whole_document(path: Path, limit: int, progress: Callable[[int], None] | None,
                    details: bool, ahead: Prefetched | None = None
                    ) -> tuple[list[pd.DataFrame], Counter, object] | None:
    """A file that fits in one piece (``limit`` bytes of JSON), decoded in one pass over
    one buffer: no cutting, copying or searching for the array's end. None when anything
    is unusual (not ASCII, not valid JSON, no or several ``traceEvents``, an event that is
    not an object...): the streaming path then decodes it, or says precisely why not.
    ``ahead``: the document and its raw read, where they were read ahead."""
    done: tuple | None = None
    if ahead is not None and ahead.whole is not None:
        data, done = ahead.whole[0], ahead.whole[1:]
    else:
        read_bytes = plan.whole_document(path, limit, native.ascii_count())
        if read_bytes is None:
            return None
        data = read_bytes
    read = native.native_columns(data, document=True, done=done) \
        if native.reader() == "native" else None
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
              chunk_bytes: int, details: bool, threads: bool = False,
              ahead: Prefetched | None = None
              ) -> tuple[list[pd.DataFrame], Counter, object]:
    """The event array decoded piece by piece (by ``workers`` processes, or ``threads``,
    when more than one), and the rest of the document; ``ahead``: the pieces and their
    raw reads, where they were read ahead."""
    source = None
    try:
        pieces: Iterator[Piece | Range]
        metadata: Callable[[], bytes]
        if ahead is not None and ahead.decoders > 1:  # the pieces were read ahead
            pieces, metadata = iter(ahead.pieces), (lambda: ahead.metadata)
        else:
            source = plan.PieceSource(path, chunk_bytes)
            pieces, metadata = source.pieces, source.metadata
        frames = []
        dropped: Counter = Counter()
        decode = decode_piece if details and ahead is None else \
            partial(decode_piece, details=details, ahead=ahead)
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
        if source is not None:
            source.close()
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
