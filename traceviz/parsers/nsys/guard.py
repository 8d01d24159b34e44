"""Every SQLite read of an nsys export bounded and interruptible.

An export is a database, and a database can hold views: a kernel table that is a
recursive view yields rows for ever, or computes for ever before its first row, all
inside one SQLite call that Python cannot leave (Ctrl-C and SIGTERM waited for it). A
progress handler, called by SQLite every ``PROGRESS_STEPS`` steps of its engine, ends
such a query: when a signal arrived, or past the time limit. The rows read are counted
against the file's size (a stored value takes a byte or more of the file, so only a
view reads more), and one value may not exceed that bound either.

A signal's Python handler runs at the next function call, which inside a query is the
progress handler's own start, before any of its code: an exception it raises there
(KeyboardInterrupt) is swallowed by the sqlite3 module, which only aborts the query. So
while a query runs, SIGINT and SIGTERM are recorded instead, and once the query has
stopped their own handlers are called, in the reading thread: Ctrl-C raises
KeyboardInterrupt (exit 130) and SIGTERM traceviz's ``Terminated`` (exit 143).
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from traceviz.errors import TraceVizError
from traceviz.files.limits import MB, sqlite_seconds, sqlite_values

# about 0.5 ms of SQLite's engine between checks: a prompt stop at well under 1% of the
# read's time (a real export reads in under 0.3 steps per byte of it)
PROGRESS_STEPS = 10_000
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class ReadGuard:
    """Installed on one connection: ``query(table)`` around every statement, ``rows``
    after every batch of rows fetched."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.path = path
        self.size = path.stat().st_size
        self.seconds = sqlite_seconds(self.size)
        self.deadline = time.monotonic() + self.seconds
        self.max_values = sqlite_values(self.size)
        self._values = 0
        self._late = False  # the progress handler stopped a query past the deadline
        self._signals: list[int] = []
        db.set_progress_handler(self._progress, PROGRESS_STEPS)
        if hasattr(db, "setlimit"):  # Python 3.11+: one value at most the same bound
            longest = db.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
            db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, int(min(longest, self.max_values)))

    def _progress(self) -> int:
        """Non-zero stops the query (``sqlite3.OperationalError: interrupted``)."""
        if self._signals:
            return 1
        if time.monotonic() > self.deadline:
            self._late = True
            return 1
        return 0

    def _record(self, signum: int, frame: FrameType | None) -> None:
        self._signals.append(signum)

    @contextmanager
    def query(self, table: str) -> Iterator[None]:
        """Run one statement's calls (execute, fetches): a stop by the progress handler
        becomes its cause (the signal's own handler, or the time limit's error line)."""
        self._values = 0
        held = self._hold_signals()
        try:
            yield
        except sqlite3.Error as e:
            if self._late:
                raise self._too_long(table) from None
            if getattr(e, "sqlite_errorcode", None) == getattr(sqlite3, "SQLITE_TOOBIG", -1):
                raise self._too_many(table, f"a value of more than {self.max_values:,.0f} "
                                            "bytes") from None
            raise
        finally:
            self._release(held)

    def rows(self, table: str, values: int) -> None:
        """Count the values a query has fetched so far (rows x columns)."""
        self._values += values
        if self._values > self.max_values:
            raise self._too_many(table, f"more than {self.max_values:,.0f} values")

    def _hold_signals(self) -> dict[int, Any]:
        """Record SIGINT and SIGTERM for the query's length, where Python handles them
        (a handler that is a Python function, in the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        held: dict[int, Any] = {}
        for signum in _SIGNALS:
            handler = signal.getsignal(signum)
            if callable(handler):
                held[signum] = handler
                signal.signal(signum, self._record)
        return held

    def _release(self, held: dict[int, Any]) -> None:
        for signum, handler in held.items():
            signal.signal(signum, handler)
        pending, self._signals = self._signals, []
        for signum in dict.fromkeys(pending):  # each signal's handler once, in order
            held[signum](signum, None)  # raises KeyboardInterrupt, Terminated...

    def _too_long(self, table: str) -> TraceVizError:
        return TraceVizError(
            f"{self.path}: reading table {table} took past {self.seconds:,.0f} s, the "
            "limit for this export (60 s plus 1 s per MB by default; a view that never "
            "ends?); TRACEVIZ_MAX_SQLITE_SECONDS=N sets it, 0 lifts it")

    def _too_many(self, table: str, what: str) -> TraceVizError:
        return TraceVizError(
            f"{self.path}: table {table} reads as {what}, the limit for a file of "
            f"{self.size / MB:,.1f} MB (each stored value "
            "takes a byte or more: a view that never ends?); TRACEVIZ_MAX_SQLITE_RATIO=N "
            "allows N values per byte of the file, 0 lifts the limit")
