"""Profiling a user's own PyTorch code: the steps come from the code, not from a runner.

The built-in variants run their own loop (``runners/torch/torch_runner.py``); a user's script or
notebook runs its own, so the schedule follows its step marks (``runners/marks.py``):
``warmup`` steps unprofiled (at least one: torch.compile and cuDNN's autotuner make first
steps slow), one profiler warm-up step, then ``active`` steps recorded as
``ProfilerStep#N`` with N the code's own step number; the steps after them run
unprofiled and give the benchmark times.

Until the first mark arrives the whole run is recorded: code that never marks a step is
still profiled, and its recording is cut into fixed time slices afterwards (said so in
``bench.json``). At the first mark that recording is dropped and the schedule takes over.

Under Nsight Systems (``profiler="nsys"``), which records the process from outside, the
marks become NVTX ``step N`` ranges with op ranges inside the active ones, as the
built-in runner marks them.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from traceviz.runners import marks
from traceviz.runners.torch.trace_file import export_trace, write_failure

TRACE_NAME = "trace.pt.trace.json.gz"
KINETO_NOISE = b"USDT:"  # Kineto's line at each profiler start and stop
KINETO_WRITE = b"Failed to write to log file"  # a full disk: said once, by write_error
MODULE_PREFIX = "module: "  # the --modules ranges (analyses/summary/modules.py reads them)


class TorchSession:
    """One profiling session over code that marks its own steps."""

    def __init__(self, out: Path, warmup: int = 3, active: int = 3, profiler: str = "torch",
                 modules: bool = False, slice_s: float | None = None,
                 on_event: Callable[..., None] = lambda event, **fields: None) -> None:
        self.out, self.warmup, self.active = out, max(1, warmup), active
        self.profiler, self.modules, self.slice_s = profiler, modules, slice_s
        self.emit = on_event
        self.clock = marks.StepClock()
        self.trace_path: Path | None = None
        # the recording could not be written (a full disk): the one line that says so
        self.write_error: str | None = None
        self.notes: list[str] = []
        self._whole: Any = None      # the recording before the first mark
        self._scheduled: Any = None  # the scheduled profiler, from the first mark
        self._done = False
        self._handles: list[Any] = []
        self._nvtx: Any = None
        self._op_ranges: contextlib.ExitStack | None = None
        # the code ended before the schedule did: {"phase": "before" | "during", "step": the
        # step it ended in, "recorded": whole profiled steps}; None when the schedule ran out
        self.cut: dict[str, Any] | None = None

    # -- set-up and tear-down -------------------------------------------------------
    def start(self) -> None:
        with quiet_kineto():
            self._start()

    def _start(self) -> None:
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook

        from traceviz.runners import nvtx_ranges

        self.clock = marks.StepClock()
        marks.attach(self._mark)
        self._handles.append(register_optimizer_step_post_hook(
            marks.optimizer_stepped))
        if self.profiler == "nsys" or self.modules:
            self._nvtx = nvtx_ranges.provider(torch.cuda.is_available())
        if self.modules:
            self._handles += _module_ranges(self._nvtx if self.profiler == "nsys" else None)
        self._handles.append(_ProfilerGuard())
        if self.profiler == "torch":
            self._whole = self._new_profiler(None)
            self._whole.__enter__()
        self.emit("phase", phase="warmup", total=self.warmup)

    def finish(self) -> None:
        """Stop whatever records, write the trace; safe to call twice."""
        with quiet_kineto():
            self._finish()

    def _finish(self) -> None:
        marks.detach()
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._close_op_ranges()
        if self._scheduled is not None:
            sched, self._scheduled = self._scheduled, None
            sched.__exit__(None, None, None)  # a partial active phase is saved too
            with self._writing():
                self._cut_short(len(self.clock.marks))
        if self._whole is not None:
            whole, self._whole = self._whole, None
            whole.__exit__(None, None, None)
            self._save(whole)
            if self.trace_path is None:
                return
            with self._writing():
                slices = add_time_slices(self.trace_path, self.slice_s or DEFAULT_SLICE_S)
            if self.trace_path is None:
                return
            if not slices:  # no framework op ran (a script failing on its arguments)
                self.trace_path.unlink(missing_ok=True)
                self.trace_path = None
                return
            self.notes.append(
                "the code marked no step (no optimizer.step(), no traceviz.step()): the "
                f"whole run was recorded and cut into {slices} fixed time slices of "
                f"{(self.slice_s or DEFAULT_SLICE_S) * 1e3:g} ms, taken as steps")

    def _cut_short(self, current: int) -> None:
        """The code ended in step ``current``, before the schedule's end: before an active
        step, nothing worth keeping was recorded (the trace is deleted); during them, the
        unfinished step is no step (its range is renamed, and its rows are dropped on
        import: ``traceviz/parsers/cut_step.py``). ``self.cut`` says which."""
        recorded = max(0, current - self.warmup - 1)
        if recorded == 0 or self.trace_path is None:  # no active step done
            if self.trace_path is not None:
                self.trace_path.unlink(missing_ok=True)
                self.trace_path = None
            self.cut = {"phase": "before" if current <= self.warmup else "during",
                        "step": current, "recorded": 0}
            return
        rename_step(self.trace_path, current)
        self.cut = {"phase": "during", "step": current, "recorded": recorded}

    # -- the marks -----------------------------------------------------------------
    def _new_profiler(self, schedule: Any) -> Any:
        import torch

        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        # record_shapes: FLOPs and cast dtypes; profile_memory: the memory figures
        prof = torch.profiler.profile(activities=activities, schedule=schedule,
                                      record_shapes=True, profile_memory=True,
                                      on_trace_ready=self._save if schedule else None)
        prof._traceviz = True  # type: ignore[attr-defined]  # _ProfilerGuard lets it start
        return prof

    def _save(self, prof: Any) -> None:
        # inside the code's own optimizer.step() too: a full disk must not raise into it
        self.trace_path = None
        with self._writing():
            export_trace(prof, self.out / TRACE_NAME)
            self.trace_path = self.out / TRACE_NAME
            # the profiled steps are on disk: a crash of the code from here on keeps them
            self.emit("saved", trace=str(self.trace_path))

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Writing or rewriting the trace: where it fails, no trace, and one line why."""
        try:
            yield
        except (OSError, EOFError, ValueError) as e:  # a full disk, the file cut short
            if self.trace_path is not None:
                self.trace_path.unlink(missing_ok=True)
            self.trace_path = None
            self.write_error = write_failure(self.out / TRACE_NAME, e)

    def _mark(self, source: str) -> None:
        try:
            with quiet_kineto():  # a mark may start or stop the profiler
                self._on_mark(self.clock.mark(source), source)
        finally:
            self.clock.resume()

    def _on_mark(self, k: int, source: str) -> None:  # step k begins here
        if self._done:
            return
        if k == 1:
            self.emit("note", message=f"steps are marked by {source}")
            if self._scheduled is not None:  # counted from optimizer steps: start over
                prof, self._scheduled = self._scheduled, None
                prof.__exit__(None, None, None)
                self.trace_path = None
        if self.profiler == "nsys":
            self._nsys_mark(k)
            return
        if self._whole is not None:  # marks exist: the schedule takes over
            whole, self._whole = self._whole, None
            whole.__exit__(None, None, None)
        first, last = self.warmup, self.warmup + self.active  # warm-up step, last active
        if self._scheduled is None:
            import torch

            sched = torch.profiler.schedule(skip_first=first, wait=0, warmup=1,
                                            active=self.active, repeat=1)
            prof = self._new_profiler(sched)
            # numbered as the code's steps: ProfilerStep#k is step k
            prof.step_num = k
            prof.current_action = prof._prev_schedule_action = sched(k)
            prof.__enter__()
            self._scheduled = prof
        else:
            self._scheduled.step()
        self._progress(k, first, last)
        if k > last:
            prof, self._scheduled = self._scheduled, None
            prof.__exit__(None, None, None)
            self._done = True

    def _progress(self, k: int, first: int, last: int) -> None:
        if k == first:
            self.emit("phase", phase="profiled", total=self.active + 1)
        if first <= k <= last + 1:
            self.emit("progress", phase="profiled", done=k - first, total=self.active + 1)
        elif k < first:
            self.emit("progress", phase="warmup", done=k, total=self.warmup)

    def _nsys_mark(self, k: int) -> None:
        """NVTX ``step N`` around each active step, op ranges inside (``step_ranges.py``)."""
        first, last = self.warmup + 1, self.warmup + self.active
        self._close_op_ranges()
        if self._nvtx is None:
            return
        if first <= k <= last:
            import torch

            from traceviz.runners.torch.step_ranges import op_ranges

            self._nvtx[0](f"step {k}")
            stack = contextlib.ExitStack()
            stack.callback(self._nvtx[1])
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            stack.enter_context(op_ranges(device, self._nvtx))
            self._op_ranges = stack
        self._progress(k, first - 1, last)
        if k > last:
            self._done = True

    def _close_op_ranges(self) -> None:
        if self._op_ranges is not None:
            stack, self._op_ranges = self._op_ranges, None
            stack.close()

    # -- what the run measured -----------------------------------------------------
    def step_times(self) -> dict[str, list[float]]:
        return self.clock.phases(self.warmup, self.active)


DEFAULT_SLICE_S = 1.0


def _rewrite(path: Path, change: Callable[[list[dict]], int]) -> int:
    """Apply ``change`` to a gzipped Kineto JSON's events, in place (through a temporary
    file); returns what ``change`` returns."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    result = change(doc.setdefault("traceEvents", []))
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt") as f:
        json.dump(doc, f)
    tmp.replace(path)
    return result


@contextlib.contextmanager
def quiet_kineto() -> Iterator[None]:
    """Kineto prints a ``USDT: ... profiler_start`` / ``profiler_stop`` line on stderr at
    every start and stop, which is no message to the user: while the profiler starts or
    stops, file descriptor 2 goes to a temporary file, and what was written there passes
    on without those lines. The code's stderr is its own at every other moment."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no stderr to keep clean
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().splitlines(keepends=True)
                    if not line.startswith(KINETO_NOISE) and KINETO_WRITE not in line]
            if kept:
                with contextlib.suppress(OSError):
                    os.write(2, b"".join(kept))


def rename_step(path: Path, step: int) -> int:
    """``ProfilerStep#step`` -> ``unfinished step N``: the step the code did not finish
    is no step mark (``traceviz/table/steps.py``). Returns how many ranges were renamed."""
    def change(events: list[dict]) -> int:
        hits = [e for e in events if e.get("name") == f"ProfilerStep#{step}"]
        for e in hits:
            e["name"] = f"unfinished step {step}"  # parsers/cut_step.py: CUT_STEP
            e.setdefault("args", {})["traceviz"] = "cut short: the code ended"
        return len(hits)

    return _rewrite(path, change)


def add_time_slices(path: Path, slice_s: float) -> int:
    """Mark a recording without steps: ``ProfilerStep#N`` ranges of ``slice_s`` seconds
    on the busiest host thread, from its first to its last event (args say they are
    traceviz's slices, not the code's steps). Returns how many."""
    def change(events: list[dict]) -> int:
        host = [e for e in events if e.get("ph") == "X"
                and e.get("cat") in ("cpu_op", "user_annotation")]
        if not host:
            return 0
        threads: dict[tuple, int] = {}
        for e in host:
            key = (e.get("pid"), e.get("tid"))
            threads[key] = threads.get(key, 0) + 1
        pid, tid = max(threads, key=lambda t: threads[t])
        start = min(float(e["ts"]) for e in host)
        end = max(float(e["ts"]) + float(e.get("dur", 0)) for e in host)
        step_us = slice_s * 1e6
        n = max(1, int(-(-(end - start) // step_us)))
        for i in range(n):
            ts = start + i * step_us
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}",
                           "pid": pid, "tid": tid, "ts": ts, "dur": min(step_us, end - ts),
                           "args": {"traceviz": "fixed time slice"}})
        return n

    return _rewrite(path, change)


class _ProfilerGuard:
    """Two torch.profiler sessions in one process crash it (a segmentation fault in
    Kineto): while a session runs, a profiler the code starts itself raises, saying why.
    ``remove()`` undoes it, as the hooks' handles do."""

    def __init__(self) -> None:
        import torch

        cls = torch.profiler.profile
        self._cls, self._start = cls, cls.start

        def start(prof: Any) -> None:
            if not getattr(prof, "_traceviz", False):
                raise RuntimeError(
                    "this code starts torch.profiler itself, which cannot run inside "
                    "traceviz's profiler: run it as it is and read the trace it writes with "
                    "`traceviz analyze`")
            self._start(prof)

        cls.start = start  # type: ignore[method-assign,assignment]

    def remove(self) -> None:
        self._cls.start = self._start  # type: ignore[method-assign]


def _module_ranges(nvtx: Any) -> list[Any]:
    """Global forward hooks: each ``nn.Module`` call inside a ``module: NAME`` range
    (record_function, and NVTX under nsys). Names are paths in the first module seen to
    run (the model); a module outside it is named by its class."""
    import torch
    from torch.nn.modules import module as nn_module

    names: dict[int, str] = {}
    local = threading.local()

    def name_of(mod: torch.nn.Module) -> str:
        if id(mod) not in names:
            if not names:  # the first module to run: name its whole tree
                names.update({id(m): f"{n} ({type(m).__name__})" if n else type(m).__name__
                              for n, m in mod.named_modules()})
            names.setdefault(id(mod), type(mod).__name__)
        return names[id(mod)]

    def pre(mod: torch.nn.Module, *_: Any) -> None:
        label = f"{MODULE_PREFIX}{name_of(mod)}"
        (rec := torch.autograd.profiler.record_function(label)).__enter__()
        if nvtx:
            nvtx[0](label)
        local.__dict__.setdefault("stack", []).append(rec)

    def post(mod: torch.nn.Module, *_: Any) -> None:
        stack = local.__dict__.get("stack")
        if stack:
            if nvtx:
                nvtx[1]()
            stack.pop().__exit__(None, None, None)

    return [nn_module.register_module_forward_pre_hook(pre),
            nn_module.register_module_forward_hook(post, always_call=True)]
