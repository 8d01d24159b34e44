"""A function run in a forked child process, each value it yields pickled back through a
pipe as soon as it is computed: work that holds the GIL (pandas) run beside the command's
own, on a second core.

The child starts with the parent's memory (the trace, the imports), so nothing is sent
to it; only its values come back. It is started only where that is sound: in the
``traceviz`` process itself (``entry`` calls ``allow``; a notebook or a test calling
``main`` never forks), on Linux, with a second usable core, and where forking is safe
(``pools.fork_is_safe``: no other Python thread, no DuckDB). Whatever goes wrong in the
child (an error, a signal, a value that does not pickle) the parent sees no more values,
and computes the rest itself: the output never depends on the child.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import sys
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO

_allowed = False


def allow() -> None:
    """This process is the ``traceviz`` command: ``start`` may fork it."""
    global _allowed
    _allowed = True


def may_fork() -> bool:
    """Whether ``start`` forks here (see the module's docstring)."""
    if not (_allowed and sys.platform.startswith("linux")):
        return False
    from traceviz.system.pools import fork_is_safe, usable_cores

    return usable_cores() >= 2 and fork_is_safe()


class Forked:
    """``produce()`` running in a child process, which sends each value it yields as soon
    as it has it; ``next()`` waits for the next one.

    A value's pickle goes into a memory file both processes hold, and only its place
    (offset, length) through the pipe: the child never waits for the parent to read (a
    pipe holds 64 KiB; a section's pickle can be larger), so each value is ready as soon
    as it is computed."""

    def __init__(self, pid: int, fd: int, store: int):
        self.pid = pid
        self._pipe: BinaryIO | None = os.fdopen(fd, "rb")
        self._store = store

    def next(self) -> tuple[bool, Any]:
        """(True, the next value) once the child has sent it; (False, None) where there is
        none: the child has sent them all, failed, was killed or was stopped. A value is
        whole or not at all: the child names one only once it is written."""
        if self._pipe is None:
            return False, None
        try:
            place = self._pipe.read(_PLACE.size)
            if len(place) == _PLACE.size:
                return True, pickle.loads(_read_at(self._store, *_PLACE.unpack(place)))
        except Exception:  # noqa: BLE001 (a broken pipe, a value that does not unpickle)
            pass
        self.stop()  # no more values: the child is reaped (killed first, if it lingers)
        return False, None

    def stop(self) -> None:
        """Kill the child (its values are no longer wanted) and reap it."""
        if self._pipe is None:
            return
        with contextlib.suppress(OSError):
            self._pipe.close()
        with contextlib.suppress(OSError):
            os.close(self._store)
        self._pipe = None
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


# a value's place in the memory file: offset, length
_PLACE = struct.Struct("<QQ")


def _read_at(fd: int, offset: int, length: int) -> bytes:
    parts = []
    while length:
        part = os.pread(fd, length, offset)
        if not part:
            raise EOFError("the value was cut short")
        parts.append(part)
        offset += len(part)
        length -= len(part)
    return b"".join(parts)


def start(produce: Callable[[], Iterable[Any]]) -> Forked | None:
    """``produce()`` started in a forked child where ``may_fork``; None where it was not.
    Each value it yields is sent as soon as it is computed (``Forked.next``)."""
    if not may_fork():
        return None
    for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        store = os.memfd_create("traceviz-forked", os.MFD_CLOEXEC)
    except (AttributeError, OSError):  # no memory files (an old kernel): not forked
        return None
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (read, write, store):
            os.close(fd)
        return None
    if pid:
        os.close(write)
        return Forked(pid, read, store)
    _child(produce, read, write, store)  # never returns
    raise AssertionError  # pragma: no cover


def _child(produce: Callable[[], Iterable[Any]], read: int, write: int, store: int) -> None:
    """In the child: compute, store each value and name its place, and leave at once
    (``os._exit``: no exit callback of the parent's, no flush of its streams, no
    interpreter teardown)."""
    code = 1
    try:
        os.close(read)
        # Ctrl-C and SIGTERM are the parent's to handle: the child dies with it (and a
        # parent that stops wanting the values kills it)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from traceviz.system.pools import die_with_parent

        die_with_parent()
        offset = 0
        with os.fdopen(store, "wb") as values, os.fdopen(write, "wb", buffering=0) as pipe:
            for value in produce():
                data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                values.write(data)
                values.flush()
                pipe.write(_PLACE.pack(offset, len(data)))  # under PIPE_BUF: one write
                offset += len(data)
        code = 0
    except BaseException:  # noqa: BLE001 (the parent computes what it did not get)
        pass
    finally:
        os._exit(code)
