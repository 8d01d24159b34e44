"""Stream the elements of a big JSON array as raw byte pieces of whole elements.

A Chrome/Kineto trace is one object whose ``traceEvents`` array holds nearly all the
bytes. Parsing it whole would hold every event as a Python object at once (several
times the file size); instead we read blocks and cut them at an element boundary
(``}`` ``,`` ``{``), so each piece can be decoded on its own, in parallel. A cut can
land inside a nested value or a string; decoding that piece then fails with a syntax
error and the consumer joins it with the next one (``Piece.sep`` keeps the exact bytes).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from traceviz.errors import TraceVizError
from traceviz.files.limits import element_limit
from traceviz.parsers.inorder import decode_in_order  # noqa: F401 (imported from here too)

_SEP = re.compile(rb"\}\s*,\s*\{")
_CLOSE = re.compile(rb"\}\s*\]")
_WS = b" \t\r\n"
_LEADING_WS = re.compile(rb"[ \t\r\n]*")
_TAIL_START = re.compile(rb"[ \t\r\n]*(\}[ \t\r\n]*\Z|,|\Z)")


def _leading_ws(buf: bytes | bytearray) -> int:
    """Length of the whitespace ``buf`` starts with (lstrip would copy all of ``buf``)."""
    m = _LEADING_WS.match(buf)
    return m.end() if m else 0


@dataclass
class Piece:
    """Raw text of whole array elements, and the separator that followed it."""

    data: bytes
    sep: bytes = b""

    @property
    def size(self) -> int:
        return len(self.data)

    def read(self) -> bytes:
        return self.data

    def join(self, other: Piece) -> Piece:
        """The text of both pieces as it stood in the file."""
        return Piece(self.data + self.sep + other.data, other.sep)


@dataclass
class Range:
    """Whole array elements as a byte range [start, end) of an uncompressed file.

    Workers read the range themselves, so the bytes never pass through the parent.
    """

    path: str
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def read(self) -> bytes:
        with open(self.path, "rb") as f:
            return os.pread(f.fileno(), self.size, self.start)

    def join(self, other: Range) -> Range:
        return Range(self.path, self.start, other.end)


class Readable(Protocol):
    """What ArrayChunks reads from: a binary stream (plain, or gzip with one-line errors)."""

    def read(self, size: int = -1, /) -> bytes: ...


class ArrayChunks:
    """Iterate over ``Piece``s of the array stored under ``key``.

    After iteration, ``metadata_document()`` is the rest of the document (the array
    emptied), so metadata such as ``deviceProperties`` can be decoded separately.
    """

    def __init__(
        self,
        stream: BinaryIO | Readable,
        key: bytes,
        chunk_bytes: int = 32 << 20,
        name: str = "input",
    ):
        self._stream = stream
        self._key = re.compile(rb'"' + re.escape(key) + rb'"\s*:\s*\[')
        self._chunk = chunk_bytes
        self._name = name
        self._buf = bytearray()
        self._eof = False
        self._read_total = 0
        self._resume = 0  # no separator starts before this offset of the buffer
        self._element_limit = element_limit()
        self.head = b""
        self.tail = b""
        self.bare_array = False

    def _fill(self, n: int) -> None:
        data = self._stream.read(n)
        if not data:
            self._eof = True
            return
        self._buf += data
        self._read_total += len(data)

    def _find_start(self) -> None:
        scanned = 0
        while True:
            lead = _leading_ws(self._buf)
            if lead == len(self._buf) and not self._eof:
                # whitespace before the document: drop it, rather than keep and rescan it
                self._buf.clear()
                self._fill(1 << 20)
                continue
            first = bytes(self._buf[lead:lead + 1])
            if first == b"[":
                self.bare_array = True
                cut = lead + 1
                break
            if first not in (b"{", b""):
                start = bytes(self._buf[lead:lead + 16])
                raise TraceVizError(f"{self._name}: not JSON (starts with {start!r})")
            m = self._key.search(self._buf, max(0, scanned - 64))
            if m:
                cut = m.end()
                break
            scanned = len(self._buf)
            if scanned > self._element_limit:
                raise TraceVizError(
                    f"{self._name}: no 'traceEvents' array in the first "
                    f"{self._element_limit >> 20:,} MB (TRACEVIZ_MAX_ELEMENT_MB=N raises the "
                    "limit)")
            if self._eof:
                raise TraceVizError(
                    f"{self._name}: JSON without a 'traceEvents' array: not a Chrome/Kineto trace"
                )
            self._fill(1 << 20)
        self.head = bytes(self._buf[:cut])
        del self._buf[:cut]

    def __iter__(self) -> Iterator[Piece]:
        self._find_start()
        while True:
            if not self._eof and len(self._buf) < self._chunk:
                self._fill(self._chunk - len(self._buf))
                continue
            if self._eof:
                break
            if self._resume == 0 and _leading_ws(self._buf) == len(self._buf):
                # whitespace before the first element: nothing to keep
                self._buf.clear()
                continue
            m = self._last_separator()
            if m is None:  # one element bigger than a chunk: read on
                if len(self._buf) > self._element_limit:
                    raise TraceVizError(_too_big(self._name))
                self._fill(self._chunk)
                continue
            piece = Piece(bytes(memoryview(self._buf)[: m.start() + 1]),
                          bytes(self._buf[m.start() + 1 : m.end() - 1]))
            del self._buf[: m.end() - 1]  # keep the next element's opening brace
            self._resume = 0
            yield piece
        yield from self._final()

    def _last_separator(self) -> re.Match | None:
        """The buffer's last separator, searched from its end back to where the previous
        search stopped: every byte is searched about once, whatever the element's size
        (searching the whole growing buffer after every read was quadratic)."""
        window = 1 << 16
        while True:
            lo = max(self._resume, len(self._buf) - window)
            last = None
            for last in _SEP.finditer(self._buf, lo):  # noqa: B007 (we want the last)
                pass
            if last is not None or lo == self._resume:
                if last is None:
                    # a separator may straddle the end: search its last bytes again (one
                    # that spans more whitespace than this only makes a bigger piece)
                    self._resume = max(0, len(self._buf) - 64)
                return last
            window *= 4

    def _final(self) -> Iterator[Piece]:
        buf = bytes(self._buf)
        body_start = _leading_ws(buf)
        if buf[body_start : body_start + 1] == b"]" and self._tail_ok(buf[body_start + 1 :]):
            self.tail = buf[body_start + 1 :]
            return
        # The array closes at a "}]" whose remainder is a valid end of the document.
        # A "]" alone is not enough: strings after the array (Kineto's INFO lines) hold
        # some, and a "}]" inside an element leaves a remainder that does not parse.
        for m in _CLOSE.finditer(buf):
            # most candidates fail on the byte after them: test that without copying
            # the rest of the buffer for each (a quadratic cost on a hostile last piece)
            t = _TAIL_START.match(buf, m.end())
            if t is None or (t.group(1) == b"," and self.bare_array):
                continue
            if self._tail_ok(buf[m.end() :]):
                self.tail = buf[m.end() :]
                yield Piece(buf[: m.start() + 1])
                return
        end = buf.rfind(b"]")
        if end >= 0 and self._tail_ok(buf[end + 1:]):
            # the array does close, on something other than an object: not a truncation
            last = buf[max(0, end - 24):end].strip(_WS)
            raise TraceVizError(f"{self._name}: the event array holds values that are not "
                                f"events (JSON objects): it ends with {last!r}")
        raise TraceVizError(
            f"{self._name}: truncated or malformed JSON: the event array does not close "
            f"properly (input ends after {self._read_total} bytes)"
        )

    def _tail_ok(self, tail: bytes) -> bool:
        return tail_ok(tail, self.bare_array)

    def metadata_document(self) -> bytes:
        """The whole document with the array emptied (valid JSON), after iteration."""
        if self.bare_array:
            return b"{}"
        return self.head + b"]" + self.tail


def _past_white_space(fd: int, pos: int, size: int, window: int) -> int:
    """The offset of the first byte after ``pos`` that is not white space: white space
    before the first element is no part of it (nor of its range, nor of its size)."""
    while pos < size:
        buf = os.pread(fd, min(window, size - pos), pos)
        lead = _leading_ws(buf)
        if lead < len(buf):
            return pos + lead
        pos += len(buf)
    return pos


def _too_big(name: str) -> str:
    return (f"{name}: one event array element holds more than {element_limit() >> 20:,} MB "
            "(TRACEVIZ_MAX_ELEMENT_MB=N raises the limit)")


def tail_ok(tail: bytes, bare_array: bool) -> bool:
    """Is ``tail`` what may follow the event array's "]" up to the end of the document?"""
    s = tail.strip(_WS)
    if bare_array:
        return s == b""
    if s == b"}":
        return True
    if not s.startswith(b","):
        return False
    try:
        return isinstance(json.loads(b"{" + s[1:]), dict)
    except ValueError:
        return False
    except RecursionError:  # too deep to check here: decoding the metadata says so
        return True


def file_ranges(path: str, key: bytes, chunk_bytes: int, name: str = "input",
                window: int = 1 << 20) -> tuple[list[Range], bytes] | None:
    """Cut an uncompressed file's event array into ``Range``s by reading small windows.

    Returns the ranges and the metadata document, or None when the layout is unusual
    (no key near the start, the array's end not near the file's end): the caller then
    streams the file with ``ArrayChunks``.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(min(size, 4 * window))
        stripped = head.lstrip(_WS)
        if stripped[:1] == b"[":
            start, bare = len(head) - len(stripped) + 1, True
        else:
            m = re.compile(rb'"' + re.escape(key) + rb'"\s*:\s*\[').search(head)
            if not m:
                return None
            start, bare = m.end(), False
        start = _past_white_space(f.fileno(), start, size, window)
        tail_at = max(start, size - 4 * window)
        last = os.pread(f.fileno(), size - tail_at, tail_at)
        body = last.lstrip(_WS) if tail_at == start else b""
        if body[:1] == b"]" and tail_ok(body[1:], bare):
            return [], b"{}" if bare else head[:start] + body
        close = None
        for m in _CLOSE.finditer(last):
            if tail_ok(last[m.end():], bare):
                close = m
                break
        if close is None:
            return None
        array_end = tail_at + close.start() + 1  # just past the last element's "}"
        tail = last[close.end():]
        ranges = []
        pos = start
        while pos < array_end:
            target = pos + chunk_bytes
            if target >= array_end:
                ranges.append(Range(path, pos, array_end))
                break
            found = None
            lo = target
            while found is None and lo < array_end:
                buf = os.pread(f.fileno(), min(window, array_end - lo), lo)
                found = _SEP.search(buf)
                if found is None:
                    lo += max(1, len(buf) - 64)
                    if lo - target > element_limit():
                        raise TraceVizError(_too_big(name))
            if found is None:
                ranges.append(Range(path, pos, array_end))
                break
            ranges.append(Range(path, pos, lo + found.start() + 1))
            pos = lo + found.end() - 1  # the next element's "{"
    meta = b"{}" if bare else head[:start] + b"]" + tail
    return ranges, meta
