"""The ``traceviz`` console script: signals handled before anything heavy is imported.

Ctrl-C (SIGINT) and SIGTERM end the run with one line and exit status 130 / 143; both
unwind the stack first, so every temporary output is removed on the way out. Once the
command has returned, they no longer interrupt: the exit status is the command's.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from collections.abc import Callable

from traceviz.errors import Terminated


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


INTERRUPTED = (130, 143)


def entry() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    sys.unraisablehook = _redeliver_interrupt
    # registered first, so run last of the exit callbacks: see ``_last_of_shutdown``
    atexit.register(_last_of_shutdown)
    try:
        from traceviz.system import collector

        collector.allow()
        collector.pause()  # the CLI's own imports (rich, argparse): see ``main``
        from traceviz.cli import main
        from traceviz.system import forked

        forked.allow()

        code = main()
        if code in INTERRUPTED:  # main caught the interruption and said so
            _quiet_threads()
        # the work is done and its outputs are in place: a signal from here on has nothing
        # to stop. One landing in the interpreter's shutdown printed a KeyboardInterrupt
        # from threading._shutdown or killed the process by SIGINT (status -2). Set here,
        # so that a signal before this still unwinds as an interruption.
        _settle(code)
    except KeyboardInterrupt:
        _quiet_threads()
        print("traceviz: interrupted", file=sys.stderr)
        code = 130
    except Terminated:
        _quiet_threads()
        print("traceviz: terminated", file=sys.stderr)
        code = 143
    pools = sys.modules.get("traceviz.system.pools")
    if code in INTERRUPTED or (pools is not None and pools.a_pool_was_killed()):
        # the stack is unwound and temporary outputs are gone; leave now, so that the
        # interpreter's shutdown cannot turn the exit status into a death by SIGINT (and
        # a second Ctrl-C during the clean-up prints no traceback), nor wait for good on
        # the manager thread of a pool that a failed rank stopped (``kill_pool``)
        _settle(code)
        mp_util = sys.modules.get("multiprocessing.util")
        if mp_util is not None:  # release the decode pool's semaphores first, or the
            _bounded(mp_util._exit_function, EXIT_WAIT_S)  # resource tracker reports them
        _leave(code)  # leaked; bounded: its finalizers can wait for good (below)
    if _only_this_thread():
        # the interpreter's teardown frees every module and object one by one: ~0.1 s of
        # a small analyze's 1.4. The exit callbacks still run (temporary folders, logging,
        # multiprocessing's clean-up), then the process leaves with the streams flushed
        atexit._run_exitfuncs()
        _leave(code)
    sys.exit(code)


def _only_this_thread() -> bool:
    """No other thread is running (none that the interpreter's shutdown would wait for: a
    pool's workers still ending, a user's own), and no profiler or tracer is watching
    (``python -m cProfile`` writes its figures after the script returns), so leaving
    skips nothing."""
    threading = sys.modules.get("threading")
    watched = sys.getprofile() is not None or sys.gettrace() is not None
    if watched or threading is None:
        return not watched
    # a daemon thread (a trace read ahead and not taken) is not waited for by the
    # interpreter's shutdown either
    main = threading.main_thread()
    return all(t.daemon for t in threading.enumerate() if t is not main)


# multiprocessing's exit joins each queue's feeder thread; one left writing a piece into
# the pipe of a killed decode worker never returns (seen in CI: a Ctrl-C hung the CLI
# after "interrupted"), so the clean-up gets this long, then the process leaves anyway
EXIT_WAIT_S = 3.0


def _quiet_threads() -> None:
    """After an interruption, errors of threads tearing down are not reported: the decode
    pool's management thread, finding its workers gone with the Ctrl-C, closed an
    already-closed pipe and printed "Exception in thread" with a traceback after
    "traceviz: interrupted" (CI, twice: once with the interruption caught here, once
    caught by ``main``, which says "interrupted" itself and returns 130)."""
    import threading

    threading.excepthook = lambda args: None


def _redeliver_interrupt(unraisable: object, _default: Callable = sys.unraisablehook) -> None:
    """A Ctrl-C that lands in code the interpreter cannot raise from (the clean-up of a
    module's import lock, run while decode threads import) was printed as "Exception
    ignored ... KeyboardInterrupt" with a traceback, and lost: the command ran on. It is
    sent again, so that the command's own flow is interrupted, in one line."""
    if isinstance(getattr(unraisable, "exc_value", None), KeyboardInterrupt):
        import threading

        # from another thread, a moment later: sent from here, the handler would raise
        # inside this hook, where it is lost again (ignored once the command has settled)
        threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGINT)).start()
        return
    _default(unraisable)


def _settle(code: int) -> None:
    """From now on SIGINT is ignored (the one handler the interpreter's shutdown does not
    reset to the default) and SIGTERM exits at once with ``code``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda signum, frame: _leave(code))


def _last_of_shutdown() -> None:
    """Once the exit callbacks have run, the interpreter turns every Python signal
    handler back into the default, where SIGTERM kills the process: a SIGTERM landing in
    the rest of the shutdown (the modules torn down) made a complete command exit 143.
    Ignored from here on, as Ctrl-C already is: the work is done."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _bounded(fn: Callable[[], object], seconds: float) -> None:
    """``fn()`` in a daemon thread, waited for at most ``seconds``; its errors ignored."""
    import threading

    def run() -> None:
        with contextlib.suppress(BaseException):
            fn()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)


def _leave(code: int) -> None:
    """Exit now with ``code``, the output streams flushed, past the interpreter's shutdown."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
