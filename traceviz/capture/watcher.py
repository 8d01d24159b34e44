"""A small process that ends a runner's whole process tree once ``traceviz capture`` is
gone, however it went (its own end, an error, Ctrl-C, SIGTERM, or SIGKILL).

``children.runner_process`` starts it before the runner and keeps the write end of a
pipe to it; the watcher holds the read end. When that pipe closes, because capture closed
it on its way out or because the kernel closed it as capture died, the watcher sends
SIGTERM to every process of the tree, waits ``GRACE_S``, and sends SIGKILL to what is
left. Why a process of its own: when capture is killed outright, no code of capture runs,
and the kernel's PR_SET_PDEATHSIG would kill only the runner, orphaning its children.
Where the watcher runs, the runner gets no PR_SET_PDEATHSIG: it lives on until the
watcher, having seen its whole tree, ends it with the rest.

The tree: the runner's process group (a script's ``sleep``, ``bash -c``, multiprocessing
and data loader workers), and every descendant of the runner seen by a scan of ``/proc``
every ``POLL_S``, with the process groups they lead (torchrun's ranks start in sessions
of their own: ``setsid``). Each process is known by its PID and start time, so a PID
reused by another program is never signalled. The process that runs the user's script is
a child subreaper (``runners/script.py``): a daemon that double-forks is adopted by it and
stays a descendant. What escapes: a process started through another service, and one
that left the process group and lost its parent since the last scan, the runner having
died first (a crash).

This file runs as ``python -I -S watcher.py FD``: standard library only.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import subprocess

# how often the tree is scanned while capture runs: what it finds is what a runner that
# dies first (a crash) leaves behind outside its process group; a killed capture's
# runner is alive when the watcher looks (see ``announce``). One scan reads every
# process's /proc/PID/stat: about 10 ms for 1,000 processes
POLL_S = 2.0
GRACE_S = 2.0   # after SIGTERM, what is left of the tree gets SIGKILL
SETTLE_S = 0.05


class Proc(NamedTuple):
    ppid: int
    pgrp: int
    start: int   # clock ticks since boot: with the PID, one process for good
    zombie: bool


def scan() -> dict[int, Proc]:
    """Every process of the machine, from ``/proc/PID/stat``."""
    found: dict[int, Proc] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        # the command name, in parentheses, may hold spaces and parentheses: after the last
        fields = text[text.rfind(")") + 2:].split()
        try:
            found[int(name)] = Proc(int(fields[1]), int(fields[2]), int(fields[19]),
                                    fields[0] in ("Z", "X"))
        except (IndexError, ValueError):
            continue
    return found


class Tree:
    """The processes of one runner's tree seen so far."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.known: dict[int, int] = {}   # pid -> start time
        self.groups: dict[int, int] = {}  # groups led by a member: id -> its start time
        self.spare = {os.getpid(), os.getppid(), 1}

    def update(self, procs: dict[int, Proc]) -> list[int]:
        """Add what ``procs`` shows of the tree; its living members now."""
        children: dict[int, list[int]] = {}
        for pid, p in procs.items():
            children.setdefault(p.ppid, []).append(pid)
        # a group outlives its leader while it has members, and its number is not reused
        # until it has none: a process with that number and another start time means
        # the group is gone, and a new one (not ours) may carry the number
        groups = {g for g, start in self.groups.items()
                  if g not in procs or procs[g].start == start}
        todo = [pid for pid, p in procs.items()
                if (pid == self.root and not self.known) or self.known.get(pid) == p.start
                or p.pgrp in groups]
        members: set[int] = set()
        while todo:
            pid = todo.pop()
            if pid in members or pid in self.spare or pid not in procs:
                continue
            members.add(pid)
            todo += children.get(pid, [])
        for pid in members:
            p = procs[pid]
            self.known[pid] = p.start
            if p.pgrp == pid:  # a group it leads: its members belong too
                self.groups[pid] = p.start
        return sorted(pid for pid in members if not procs[pid].zombie)


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def end_tree(tree: Tree) -> None:
    """SIGTERM to every living member, once, then SIGKILL to what is left after
    ``GRACE_S``; members forked meanwhile are found by scanning again."""
    deadline = time.monotonic() + GRACE_S
    termed: set[int] = set()
    while True:
        alive = tree.update(scan())
        if not alive:
            return
        now = time.monotonic()
        if now > deadline + GRACE_S:
            return  # unkillable (uninterruptible sleep in a driver): nothing more to do
        if now > deadline:
            signal_all(alive, signal.SIGKILL)
        else:
            signal_all([pid for pid in alive if pid not in termed], signal.SIGTERM)
            termed.update(alive)
        time.sleep(SETTLE_S)


def watch(fd: int) -> None:
    """Read the runner's PID from ``fd``, scan its tree until ``fd`` closes, end it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is capture's to handle
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a closed terminal closes the pipe too
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    data = b""
    tree: Tree | None = None
    while not stop:
        try:
            ready, _, _ = select.select([fd], [], [], POLL_S)
        except InterruptedError:
            continue
        if ready:
            chunk = os.read(fd, 64)
            if not chunk:
                break
            data += chunk
            if tree is None and b"\n" in data:
                tree = Tree(int(data.split(b"\n", 1)[0]))
        if tree is not None:
            tree.update(scan())
    if tree is not None:
        end_tree(tree)


class TreeWatch:
    """Capture's side: the watcher process and the pipe that keeps it waiting. Started
    before the runner, so that no moment of the runner's life goes unwatched."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._proc: subprocess.Popen | None = None
        if not os.path.isdir("/proc"):  # not Linux: the process group's end is all
            return
        import subprocess

        read_fd, self._fd = os.pipe()  # neither end is inherited by the runner
        try:
            # a session of its own: the terminal's Ctrl-C and a signal to capture's
            # process group do not reach it; no stream of capture's is held open
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), str(read_fd)],
                pass_fds=(read_fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:  # no watcher: the process group is still ended on the way out
            os.close(self._fd)
            self._fd = None
        finally:
            os.close(read_fd)

    def announce(self, pid: int) -> bool:
        """Name the runner to watch, ``pid``, the leader of its process group: called in
        the runner before it runs anything (``preexec_fn``). False: no watcher."""
        if self._fd is None:
            return False
        try:
            os.write(self._fd, b"%d\n" % pid)
        except OSError:
            return False
        return True

    def end(self, wait_s: float = 2 * GRACE_S + 1) -> None:
        """Have the watcher end what is left of the tree, and wait for it to be done."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._proc is not None:
            import subprocess

            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(wait_s)


if __name__ == "__main__":
    with contextlib.suppress(BaseException):  # never a traceback on the user's terminal
        watch(int(sys.argv[1]))
