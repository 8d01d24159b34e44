"""A small Kineto trace read ahead, on a thread, while the command imports pandas and its
analyses: the compiled reader releases the GIL, so its pass over the JSON runs on a second
core during imports that take one. ``parse`` then takes the document and its raw read (or
the pieces and theirs) instead of reading them again (``take``).

The thread reads the whole document at once where it can (``plan.whole_document``: at most
``MAX_MB`` of ASCII JSON with one event array), whatever the parse's plan: the table does
not depend on how the file is cut (``joined.in_time_order``), and a whole read holds the
GIL least (streamed gzip pieces are cut in Python, which slowed the imports beside it by
about as much as the read saved). Otherwise it cuts the pieces the parse would
(``plan.py``), each read by the same call, taken only by a parse with the same plan.

Only where the compiled reader is the one used and the JSON is at most ``MAX_MB``: the
document or every piece and its raw columns are held until the parse takes them. Anything
unusual (an error, a file changed since, pieces of another plan) leaves it unused: the
parse reads the file itself, and says what is wrong in its own words.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from traceviz.errors import TraceVizError
from traceviz.parsers.kineto.plan import (
    PieceSource,
    json_size,
    piece_bytes,
    whole_document,
    workers,
)

# the JSON megabytes read ahead at most: a small trace's, whose read is a large share of
# a command's time (above this the read is pipelined and dominates the command anyway)
MAX_MB = 64
_SUFFIXES = (".json", ".json.gz")


@dataclass
class Prefetched:
    """What the thread read: the plan of the parse that will take it, the file as it was,
    and either the whole document and its read (``whole``) or each piece and its read
    (``reads``, by piece)."""

    stamp: tuple[int, int]
    decoders: int
    piece: int
    whole: tuple[bytes, Any] | None = None
    pieces: list = field(default_factory=list)
    reads: dict[int, tuple[bytes, Any]] = field(default_factory=dict)
    metadata: bytes = b""
    done: bool = False


_lock = threading.Lock()
_ahead: dict[str, tuple[threading.Thread, Prefetched]] = {}


def _compiled() -> ModuleType | None:
    """The compiled reader, where it is the one ``native.reader`` chooses (its rules: an
    unknown or ``python`` ``TRACEVIZ_READER`` reads nothing ahead)."""
    if os.environ.get("TRACEVIZ_READER", "").strip().lower() not in ("", "native"):
        return None
    try:
        from traceviz.parsers import _kineto_native
    except ImportError:
        return None
    return _kineto_native


def _key(path: Path) -> str:
    return os.path.abspath(path)


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


def start(path: Path) -> None:
    """Start reading ``path`` ahead where it looks like a small Kineto trace (a ``.json``
    or ``.json.gz`` file) and the compiled reader is used; otherwise do nothing."""
    try:
        if not path.name.endswith(_SUFFIXES) or not path.is_file():
            return
        compiled = _compiled()
        if compiled is None or json_size(path) > MAX_MB << 20:
            return
        n = workers(path, threads=True)
        ahead = Prefetched(_stamp(path), n, piece_bytes(n, threads=True))
    except (OSError, ValueError, TraceVizError):  # unreadable, a bad limit: the parse
        return  # says why, in its own words
    thread = threading.Thread(target=_read, args=(compiled, path, ahead),
                              name="traceviz-read-ahead", daemon=True)
    with _lock:
        _ahead[_key(path)] = (thread, ahead)
    thread.start()


def _read(compiled: ModuleType, path: Path, ahead: Prefetched) -> None:
    try:
        # checked without the GIL: the imports beside it run on (``ascii_count``)
        data = whole_document(path, MAX_MB << 20, compiled.ascii_count)
        if data is not None:
            ahead.whole = data, compiled.read_events(data, document=True)
        elif ahead.decoders > 1:  # else the parse streams it (and reads it itself)
            source = PieceSource(path, ahead.piece)
            try:
                for piece in source.pieces:
                    data = piece.read()
                    ahead.pieces.append(piece)
                    ahead.reads[id(piece)] = data, compiled.read_events(data)
                ahead.metadata = source.metadata()
            finally:
                source.close()
        ahead.done = True
    except BaseException:  # noqa: BLE001 (any failure: the parse reads the file itself)
        ahead.pieces.clear()
        ahead.reads.clear()


def take(path: Path, decoders: int, piece: int) -> Prefetched | None:
    """What was read ahead of ``path``, once the reading has finished: the whole document
    for any plan, pieces for this plan alone; None where nothing was, or it failed, or the
    file or the pieces' plan differs. Taken once."""
    with _lock:
        entry = _ahead.pop(_key(path), None)
    if entry is None:
        return None
    thread, ahead = entry
    thread.join()
    try:
        same = ahead.stamp == _stamp(path)
    except OSError:
        same = False
    if not (ahead.done and same):
        return None
    if ahead.whole is None and (ahead.decoders != decoders or ahead.piece != piece):
        return None
    return ahead


def read_of(ahead: Prefetched | None, piece: object) -> tuple[bytes, Any] | None:
    """A piece's bytes and raw read, taken from ``ahead`` (once: the memory goes with the
    piece); None for a piece it did not read (a piece joined with the next one)."""
    if ahead is None:
        return None
    return ahead.reads.pop(id(piece), None)
