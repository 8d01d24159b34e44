"""Stream the elements of a big JSON array in chunks of whole elements.

A Chrome/Kineto trace is one object whose ``traceEvents`` array holds nearly all the
bytes. Parsing it whole would hold every event as a Python object at once (several
times the file size); instead we read blocks, cut them at an element boundary
(``}`` ``,`` ``{``) and decode each chunk on its own. A cut that lands inside a nested
value or a string makes that chunk fail to decode; we then read on and cut later.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import BinaryIO

from traceviz.errors import TraceVizError

_SEP = re.compile(rb"\}\s*,\s*\{")
_CLOSE = re.compile(rb"\}\s*\]")
_WS = b" \t\r\n"


class ArrayChunks:
    """Iterate over ``b"[...]"`` pieces of the array stored under ``key``.

    After iteration, ``head`` and ``tail`` are the bytes around the array, so the
    rest of the document (metadata) can be decoded with the array emptied.
    ``decode`` turns one ``b"[...]"`` piece into a value; it must raise ``ValueError``
    (or a subclass) on a syntax error so a bad cut can be retried.
    """

    def __init__(
        self,
        stream: BinaryIO,
        key: bytes,
        decode: Callable[[bytes], object],
        is_syntax_error: Callable[[Exception], bool],
        chunk_bytes: int = 32 << 20,
        progress: Callable[[int], None] | None = None,
        name: str = "input",
    ):
        self._stream = stream
        self._key = re.compile(rb'"' + re.escape(key) + rb'"\s*:\s*\[')
        self._decode = decode
        self._is_syntax_error = is_syntax_error
        self._chunk = chunk_bytes
        self._progress = progress
        self._name = name
        self._buf = bytearray()
        self._eof = False
        self._read_total = 0
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
        if self._progress:
            self._progress(len(data))

    def _find_start(self) -> None:
        scanned = 0
        while True:
            stripped = self._buf.lstrip(_WS)
            if stripped[:1] == b"[":
                self.bare_array = True
                cut = len(self._buf) - len(stripped) + 1
                break
            if stripped[:1] not in (b"{", b""):
                start = bytes(stripped[:16])
                raise TraceVizError(f"{self._name}: not JSON (starts with {start!r})")
            m = self._key.search(self._buf, max(0, scanned - 64))
            if m:
                cut = m.end()
                break
            scanned = len(self._buf)
            if self._eof:
                raise TraceVizError(
                    f"{self._name}: JSON without a 'traceEvents' array: not a Chrome/Kineto trace"
                )
            self._fill(1 << 20)
        self.head = bytes(self._buf[:cut])
        del self._buf[:cut]

    def __iter__(self) -> Iterator[object]:
        self._find_start()
        want = self._chunk
        while True:
            if not self._eof and len(self._buf) < want:
                self._fill(want - len(self._buf))
                continue
            if self._eof:
                break
            cut = self._last_separator()
            if cut is None:
                want = len(self._buf) + self._chunk
                continue
            # one copy: brackets go into the buffer itself (the byte before the first
            # element and the separator's comma), then the slice is taken
            sep_end = _SEP.match(self._buf, cut).end()
            comma = self._buf.index(b",", cut)
            self._buf[0:0] = b"["
            self._buf[comma + 1 : comma + 2] = b"]"
            chunk = bytes(memoryview(self._buf)[: comma + 2])
            del self._buf[0]
            self._buf[comma : comma + 1] = b","
            try:
                piece = self._decode(chunk)
            except Exception as e:
                if not self._is_syntax_error(e):
                    raise
                want = len(self._buf) + self._chunk  # a bad cut: read on, cut later
                continue
            del chunk
            # keep the opening brace of the next element
            del self._buf[: sep_end - 1]
            want = self._chunk
            yield piece
        yield from self._final()

    def _last_separator(self) -> int | None:
        window = 1 << 16
        while True:
            lo = max(0, len(self._buf) - window)
            last = None
            for m in _SEP.finditer(self._buf, lo):
                last = m
            if last is not None:
                return last.start()
            if lo == 0:
                return None
            window *= 4

    def _final(self) -> Iterator[object]:
        buf = bytes(self._buf)
        body_start = len(buf) - len(buf.lstrip(_WS))
        if buf[body_start : body_start + 1] == b"]" and self._tail_ok(buf[body_start + 1 :]):
            self.tail = buf[body_start + 1 :]
            return
        # the array closes at a "}]" whose remainder is a valid end of document; a "]"
        # alone is not enough (strings after the array, like Kineto's INFO lines, hold some)
        for m in _CLOSE.finditer(buf):
            tail = buf[m.end() :]
            if not self._tail_ok(tail):
                continue
            try:
                piece = self._decode(b"[" + buf[: m.start() + 1] + b"]")
            except Exception as e:
                if not self._is_syntax_error(e):
                    raise
                continue
            self.tail = tail
            yield piece
            return
        raise TraceVizError(
            f"{self._name}: truncated or malformed JSON: the event array does not close "
            f"properly (input ends after {self._read_total} bytes)"
        )

    def _tail_ok(self, tail: bytes) -> bool:
        s = tail.strip(_WS)
        if self.bare_array:
            return s == b""
        if s == b"}":
            return True
        if not s.startswith(b","):
            return False
        try:
            return isinstance(json.loads(b"{" + s[1:]), dict)
        except ValueError:
            return False

    def metadata_document(self) -> bytes:
        """The whole document with the array emptied (valid JSON), after iteration."""
        if self.bare_array:
            return b"{}"
        return self.head + b"]" + self.tail
