"""A user's script under a profiler: ``python -m traceviz.runners.script --config CFG
--out DIR -- SCRIPT ARGS`` (or ``-- -m MODULE ARGS``), what ``traceviz capture -- python
train.py`` starts.

The script runs unchanged, as ``python SCRIPT ARGS`` would run it (``sys.argv``,
``sys.path[0]``, ``__main__``), with its own stdout and stderr; progress goes to the
parent through the file descriptor in ``$TRACEVIZ_EVENTS_FD``, not stdout. Whatever way
the script ends (returns, ``sys.exit``, raises, Ctrl-C) the profiler is stopped, what it
recorded is written with ``bench.json`` and ``meta.json``, and the process exits with
the script's own status (a raised exception prints its traceback, as Python does).
Once the run is written, the process ends as the interpreter's shutdown would begin (the
script's threads waited for, its exit callbacks run) and leaves before the teardown: see
``leave``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import platform
import runpy
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from traceviz.runners import watch_parent
from traceviz.runners.capture_protocol import run_result, step_bench

EVENTS_FD = "TRACEVIZ_EVENTS_FD"


def _events() -> Any:
    fd = os.environ.pop(EVENTS_FD, None)  # the script's own children do not inherit it
    if fd is None:
        return None
    try:
        return os.fdopen(int(fd), "w", buffering=1)
    except (OSError, ValueError):
        return None


def _session(cfg: dict, out: Path, emit: Any) -> Any:
    if cfg["framework"] == "tensorflow":
        from traceviz.runners.tensorflow.tf_session import TfSession

        return TfSession(out, cfg["warmup"], cfg["profile_steps"], on_event=emit)
    from traceviz.runners.torch.torch_session import TorchSession

    return TorchSession(out, cfg["warmup"], cfg["profile_steps"], cfg["profiler"],
                        modules=cfg.get("modules", False), slice_s=cfg.get("slice_s"),
                        on_event=emit)


def _run_target(target: list[str]) -> None:
    """Run ``SCRIPT ARGS`` or ``-m MODULE ARGS`` as the interpreter would."""
    # sys.path[0] is this runner's (the working directory, from -m): `python -m MODULE`
    # puts the working directory there too, `python SCRIPT` the script's folder instead
    if target[0] == "-m":
        sys.argv = [target[1], *target[2:]]
        sys.path[0] = os.getcwd()
        runpy.run_module(target[1], run_name="__main__", alter_sys=True)
    else:
        script = Path(target[0])
        sys.argv = list(target)
        sys.path[0] = str(script.resolve().parent)
        runpy.run_path(str(script), run_name="__main__")


def _print_user_traceback(e: BaseException) -> None:
    """The traceback Python would print: from the script's frames, not this runner's."""
    tb = e.__traceback__
    here = {__file__, runpy.__file__, "<frozen runpy>"}
    while tb is not None and tb.tb_frame.f_code.co_filename in here:
        tb = tb.tb_next
    traceback.print_exception(type(e), e, tb)


def _exit_of(e: SystemExit) -> tuple[int, str | None]:
    if e.code is None:
        return 0, None
    if isinstance(e.code, int):
        return e.code, None if e.code == 0 else f"sys.exit({e.code})"
    print(e.code, file=sys.stderr)  # sys.exit("message"): Python prints it, status 1
    return 1, f"sys.exit({e.code!r})"


def versions(framework: str) -> dict:
    """Python's and the framework's versions and the device, for meta.json."""
    meta: dict = {"python": platform.python_version(), "framework": framework}
    if framework == "torch" and "torch" in sys.modules:
        import torch

        meta["framework_version"] = torch.__version__
        meta["device_name"] = torch.cuda.get_device_name() if torch.cuda.is_available() \
            else (platform.processor() or platform.machine())
        meta["cpu_threads"] = torch.get_num_threads()
    elif framework == "tensorflow" and "tensorflow" in sys.modules:
        meta["framework_version"] = sys.modules["tensorflow"].__version__
    return meta


def keep_orphans() -> None:
    """Make this runner a child subreaper (Linux): a process of the script whose parent
    exits (a daemon's double fork) is adopted here instead of by init, so it stays in the
    tree that ``traceviz capture``'s watcher ends (``traceviz/capture/watcher.py``).
    Elsewhere a no-op."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_child_subreaper = 36
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1)


def _options(argv: list[str]) -> tuple[dict, Path, list[str]]:
    """``--config CFG --out DIR -- TARGET``: the config, the run folder, the target."""
    split = argv.index("--") if "--" in argv else len(argv)
    opts, target = argv[:split], argv[split + 1:]
    cfg = json.loads(Path(opts[opts.index("--config") + 1]).read_text())
    return cfg, Path(opts[opts.index("--out") + 1]), target


def main(argv: list[str] | None = None) -> int:
    # Ctrl-C while the runner starts up (torch imported, the profiler started) ends it by
    # the signal, without a traceback of traceviz's own frames: the parent says it was
    # interrupted before anything ran. The script gets Ctrl-C as Python gives it.
    given = signal.signal(signal.SIGINT, signal.SIG_DFL)
    watch_parent()  # a killed `traceviz capture` leaves no runner behind
    keep_orphans()
    cfg, out, target = _options(list(sys.argv[1:] if argv is None else argv))
    if cfg.get("ranks") and "RANK" in os.environ:  # one of torchrun's processes
        out = out / f"rank-{int(os.environ['RANK'])}"
        out.mkdir(parents=True, exist_ok=True)
    events = _events()

    def emit(event: str, **fields: object) -> None:
        if event == "saved":  # the profile is written: so are its results, should the
            # script crash before its end (exit_status null); never a failure of the
            # script's step, in which this runs (the end writes them again)
            with contextlib.suppress(Exception):
                results(None, None)
        if events is not None:
            # the parent went away: the run goes on
            with contextlib.suppress(OSError):
                events.write(json.dumps({"event": event, **fields}) + "\n")

    def results(status: int | None, error: str | None) -> dict:
        bench = step_bench(session.step_times(), session.clock.source)
        meta = versions(cfg["framework"]) | {
            "profiler": cfg["profiler_name"], "command": cfg["command"], "cwd": os.getcwd(),
            "exit_status": status, "error": error, "step_marks": len(session.clock.marks),
            "notes": session.notes, "schedule_cut": session.cut,
            "write_error": getattr(session, "write_error", None),
        }
        return run_result(out, bench, meta, session.trace_path)

    session = _session(cfg, out, emit)
    status, error = 0, None
    session.start()
    signal.signal(signal.SIGINT, given)
    try:
        _run_target(target)
    except SystemExit as e:
        status, error = _exit_of(e)
    except KeyboardInterrupt as e:
        _print_user_traceback(e)
        status, error = 130, "KeyboardInterrupt"
    except BaseException as e:  # the script's own failure: reported as Python would
        _print_user_traceback(e)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        status, error = 1, f"{type(e).__name__}: {first}"[:500]
    finally:
        # a second Ctrl-C (or the parent passing one on) must not cut the saving short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.stdout.flush()
        session.finish()
    try:
        done = results(status, error)
    except OSError:  # a full disk: `capture` says so in one line, from what is missing
        return status
    emit("done", **done)
    return status


def _descendants() -> list[int]:
    """The processes below this one, followed down ``/proc``'s children lists (zombies
    too). As a child subreaper (``keep_orphans``) this process adopts every orphan of its
    tree, so nothing of it is missed."""
    found: list[int] = []
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError, ValueError):
                    kids = [int(k) for k in
                            Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
                    found += kids
                    todo += kids
    return found


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:][:1] not in ("Z", "X")


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _own_helpers() -> set[int]:
    """multiprocessing's resource tracker and fork server: each ends by itself once this
    process is gone (its pipe closes), the tracker after unlinking the semaphores and
    shared memory the script leaked; the tracker ignores SIGTERM, so ending it would
    cost ``grace_s`` and skip that clean-up."""
    found: set[int] = set()
    for module, holder, attr in (("multiprocessing.resource_tracker", "_resource_tracker",
                                  "_pid"),
                                 ("multiprocessing.forkserver", "_forkserver",
                                  "_forkserver_pid")):
        pid = getattr(getattr(sys.modules.get(module), holder, None), attr, None)
        if isinstance(pid, int):
            found.add(pid)
    return found


def end_leftovers(grace_s: float = 2.0, settle_s: float = 0.05) -> None:
    """End what the script left running (a server it started, a daemon that detached
    with ``setsid``): SIGTERM to each, SIGKILL to what is left after ``grace_s``, all
    reaped; multiprocessing's own helpers are left to end themselves (``_own_helpers``).
    ``traceviz capture`` promises that none outlives it; its watcher finds those outside
    the process group by scanning every 2 s, and a script that starts them and returns
    within one scan left them running."""
    deadline = time.monotonic() + grace_s
    termed: set[int] = set()
    spare = _own_helpers()
    while True:
        _reap()
        alive = [pid for pid in _descendants() if pid not in spare and _running(pid)]
        now = time.monotonic()
        if not alive or now > deadline + grace_s:  # past SIGKILL: a driver's D state
            return
        for pid in alive:
            if now > deadline or pid not in termed:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL if now > deadline else signal.SIGTERM)
        termed.update(alive)
        time.sleep(settle_s)


def leave(status: int, profiler: str | None) -> None:
    """Exit with ``status`` as the interpreter would (the script's non-daemon threads
    joined, its exit callbacks run, the streams flushed), past the interpreter's
    teardown. Why: a native thread still freeing the script's last objects needs the GIL,
    which the teardown no longer gives; the interpreter then ends that thread and
    ``std::terminate`` aborts the process (Gloo's worker finishing DDP's last all-reduce,
    torch 2.13 on CPUs: "terminate called without an active exception", about 1 run in 15
    of ``examples/ddp_lstm.py`` under torchrun on 2 busy cores, traceviz or not), and a
    complete run read as a crash. Under Nsight Systems the process exits in full: its
    injection library writes the last of the report from C exit handlers, which
    ``os._exit`` skips. Either way, what the script left running is ended first."""
    import threading

    main_thread = threading.main_thread()
    for thread in threading.enumerate():
        if thread is not main_thread and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    if sys.platform.startswith("linux"):
        end_leftovers()
    if profiler == "nsys":
        sys.exit(status)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    # what native code wrote through C's stdio (printf; std::cout, synced with it) waits
    # in its buffers when the output is a pipe: exit() flushes them, os._exit does not
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).fflush(None)
    os._exit(status & 0xFF)


if __name__ == "__main__":
    args = sys.argv[1:]  # the script's run replaces sys.argv
    leave(main(args), _options(args)[0]["profiler"])
