"""Runner processes that never outlive ``traceviz capture``: each starts in a process
group of its own (the runner and whatever it starts: a script's data loader workers,
Nsight Systems' children), the kernel kills it when capture dies (PR_SET_PDEATHSIG, on
Linux; the runner also watches its parent: ``traceviz.runners.watch_parent``), and the
group is ended on every way out of capture that runs code (its end, an error, Ctrl-C,
SIGTERM). PR_SET_PDEATHSIG reaches the runner only, and a process that starts a session
of its own (torchrun's ranks) leaves the group: a watcher process ends the runner's
whole tree when capture is gone, SIGKILL included (``watcher.py``); where it runs, it
kills the runner too, and the kernel does not."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

from traceviz.capture.watcher import TreeWatch
from traceviz.system.pools import die_with_parent

GRACE_S = 3.0  # after SIGTERM, what is left of the group is killed


def _foreground_terminal() -> int | None:
    """The terminal on stdin when this process runs in its foreground; else None."""
    try:
        if os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp():
            return 0
    except OSError:
        pass
    return None


def _give_terminal(fd: int, group: int) -> None:
    """Make ``group`` the terminal's foreground (its keys, Ctrl-C included, go there); a
    background caller would be stopped by SIGTTOU, hence ignored around the call."""
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, group)
    finally:
        signal.signal(signal.SIGTTOU, old)


@contextlib.contextmanager
def runner_process(cmd: list[str], foreground: bool = False,
                   **popen: Any) -> Iterator[subprocess.Popen]:
    """``Popen(cmd)`` in a new process group that dies with this process; on leaving the
    block, however it is left, the group is ended. ``foreground``: a user's script that
    may read the terminal gets it (and its Ctrl-C) while it runs, as a shell's job does."""
    parent = os.getpid()
    tty = _foreground_terminal() if foreground else None

    watcher = TreeWatch()  # first: the runner is never without one

    def in_child() -> None:
        os.setpgid(0, 0)
        # with a watcher, the runner outlives a killed capture for the moment the watcher
        # takes to see its whole tree (PR_SET_PDEATHSIG would orphan the runner's
        # children at once); without one, the kernel kills it with capture
        if not watcher.announce(os.getpid()):
            die_with_parent()
        if os.getppid() != parent:  # the parent died before the kernel was asked
            os._exit(1)
        if tty is not None:
            _give_terminal(tty, os.getpgrp())
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    try:
        proc = subprocess.Popen(cmd, preexec_fn=in_child, **popen)
    except BaseException:
        watcher.end()
        raise
    if tty is not None:  # both sides ask, as shells do: whichever runs first
        _give_terminal(tty, proc.pid)
    try:
        yield proc
    finally:
        end_group(proc)
        watcher.end()  # what left the group (a rank's own session) ends too
        if tty is not None:
            _give_terminal(tty, os.getpgrp())


def end_group(proc: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """End ``proc``'s process group: SIGTERM, then SIGKILL to what is left after
    ``grace_s``; ``proc`` is reaped."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):  # the group is gone already
        proc.wait()
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if proc.poll() is not None and not _group_alive(proc.pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True
