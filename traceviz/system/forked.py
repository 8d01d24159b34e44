"""A function run in a forked child process, its pickled value read back through a pipe:
work that holds the GIL (pandas) run beside the command's own, on a second core.

The child starts with the parent's memory (the trace, the imports), so nothing is sent
to it; only its value comes back. It is started only where that is sound: in the
``traceviz`` process itself (``entry`` calls ``allow``; a notebook or a test calling
``main`` never forks), on Linux, with a second usable core, and where forking is safe
(``pools.fork_is_safe``: no other Python thread, no DuckDB). Whatever goes wrong in the
child (an error, a signal, a value that does not pickle) the parent sees no value, and
computes it itself: the output never depends on the child.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
from collections.abc import Callable
from typing import Any

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
    """``fn()`` running in a child process; ``value()`` waits for it."""

    def __init__(self, pid: int, fd: int):
        self.pid = pid
        self._fd: int | None = fd

    def value(self) -> tuple[bool, Any]:
        """(True, the value) once the child has sent it; (False, None) where it failed
        or was stopped. Read once: afterwards (False, None)."""
        if self._fd is None:
            return False, None
        fd, self._fd = self._fd, None
        chunks = []
        try:
            with os.fdopen(fd, "rb") as pipe:
                while chunk := pipe.read(1 << 20):
                    chunks.append(chunk)
        except OSError:
            chunks = []
        ok = self._ended_well()
        if not (ok and chunks):
            return False, None
        try:
            return True, pickle.loads(b"".join(chunks))
        except Exception:  # noqa: BLE001 (a value that does not unpickle: computed here)
            return False, None

    def stop(self) -> None:
        """Kill the child (its value is no longer wanted) and reap it."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = None
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        self._ended_well()

    def _ended_well(self) -> bool:
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return False
        return os.waitstatus_to_exitcode(status) == 0


def start(fn: Callable[[], Any]) -> Forked | None:
    """``fn()`` started in a forked child where ``may_fork``; None where it was not."""
    if not may_fork():
        return None
    for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
        with contextlib.suppress(Exception):
            stream.flush()
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid:
        os.close(write)
        return Forked(pid, read)
    _child(fn, read, write)  # never returns
    raise AssertionError  # pragma: no cover


def _child(fn: Callable[[], Any], read: int, write: int) -> None:
    """In the child: compute, send, and leave at once (``os._exit``: no exit callback of
    the parent's, no flush of its streams, no interpreter teardown)."""
    code = 1
    try:
        os.close(read)
        # Ctrl-C and SIGTERM are the parent's to handle: the child dies with it (and a
        # parent that stops wanting the value kills it)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from traceviz.system.pools import die_with_parent

        die_with_parent()
        data = pickle.dumps(fn(), protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write, "wb") as pipe:
            pipe.write(data)
        code = 0
    except BaseException:  # noqa: BLE001 (the parent computes it itself)
        pass
    finally:
        os._exit(code)
