"""Process pools for the parallel parts (JSON decoding, one rank per worker).

A pool's workers come from multiprocessing's fork server, not from a fork of the calling
process, unless the caller allows it and it is safe: a process that has DuckDB's or a
former pool's threads running is not safe to fork (rank workers forked from a Python
session that had used DuckDB died or hung at random, one run in eight). The server is
started once per process, from a clean interpreter that imports ``preload`` (the
workers' modules).
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
from collections.abc import Iterable, Iterator

_BASE_PRELOAD = ("traceviz.system.pool_preload",)


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (``taskset``, a container's
    cpuset), bounded by a cgroup v2 CPU quota where one is set (``cpu.max``: a container
    given 2 CPUs on a 64-core host sees 64 in ``os.cpu_count()``)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, n)


def process_pool(workers: int, preload: Iterable[str] = (), fork_if_safe: bool = False):
    """A ``ProcessPoolExecutor`` of ``workers`` processes from the fork server; they ignore
    Ctrl-C (the parent handles it) and die with the CLI. ``preload`` applies when this call
    starts the server (the first pool of the process); later pools import their modules
    in each worker. ``fork_if_safe``: fork this process instead when that is safe (the
    CLI, usually: ``fork_is_safe``), so the workers start with its imports (0.3 s sooner
    per command)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing.context import BaseContext

    ctx: BaseContext
    if fork_if_safe and fork_is_safe():
        ctx = multiprocessing.get_context("fork")
    else:
        # the fork server checks that its parent still is this process (pool_preload)
        os.environ["TRACEVIZ_POOL_PARENT"] = str(os.getpid())
        quiet_resource_tracker()
        server = multiprocessing.get_context("forkserver")
        server.set_forkserver_preload([*_BASE_PRELOAD, *preload])
        ctx = server
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=worker_init)


@contextlib.contextmanager
def main_not_rerun() -> Iterator[None]:
    """Workers started inside (by ``submit``) do not run the caller's script again: a fork
    server's new worker imports the main script (as ``__mp_main__``) so that functions
    defined there can be unpickled. Ours live in traceviz's modules; a script without an
    ``if __name__ == "__main__":`` guard ran its work again in every worker (its call to
    ``traceviz.ranks`` there killed the worker). The stand-in names no file to import."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main
        else:
            sys.modules.pop("__main__", None)


def fork_is_safe() -> bool:
    """Whether forking this process copies no lock another thread holds: no Python thread
    but this one (a former pool's manager thread holds its lock at times: a child that
    collected that pool hung), and DuckDB never imported (its worker threads: children
    died at random). Native helpers that stay (jemalloc's, OpenBLAS's) take care of a fork
    themselves (pthread_atfork)."""
    import threading

    return threading.active_count() == 1 and "duckdb" not in sys.modules


def quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with its stderr on /dev/null (once per
    process). After Ctrl-C kills the decode pool, the tracker outlives the CLI by a moment,
    unlinks the pool's semaphores itself and warns about each ("leaked semaphore objects",
    "No such file or directory"): lines after "traceviz: interrupted" on the user's
    terminal (CI, once), about a clean-up that happens anyway."""
    from multiprocessing import resource_tracker

    if getattr(resource_tracker._resource_tracker, "_fd", None) is not None:
        return  # running already, with whatever stderr it was started with
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)  # the tracker inherits fd 2 when it starts
        resource_tracker.ensure_running()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def die_with_parent() -> None:
    """Have the kernel kill this process when its parent dies (Linux; elsewhere a no-op)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def worker_init() -> None:
    """In each pool worker: leave Ctrl-C to the parent, and die with the fork server
    (which dies with the CLI), so a killed CLI leaves no worker behind."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()


_killed = False  # whether kill_pool stopped a pool in this process


def kill_pool(pool) -> None:
    """Stop a ProcessPoolExecutor now: its workers killed, queued work cancelled."""
    # a worker killed while writing its result leaves half a message in the result pipe:
    # the pool's manager thread then waits for the rest for good, and so does the
    # interpreter's exit, which joins it (entry() leaves past it: ``a_pool_was_killed``)
    global _killed
    _killed = True
    # the call queue's feeder thread may be writing a piece into a killed worker's pipe,
    # where it stays: exit must not wait for it
    with contextlib.suppress(Exception):
        pool._call_queue.cancel_join_thread()
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def a_pool_was_killed() -> bool:
    """Whether ``kill_pool`` ran in this process (its exit must not wait for the pool)."""
    return _killed
