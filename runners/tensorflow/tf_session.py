"""Profiling a user's own TensorFlow/Keras code under the TensorFlow profiler.

Steps come from ``Model.fit``'s batches (a callback every ``fit`` call gets) or from
``traceviz.step()`` in a custom loop (``runners/marks.py``): ``warmup`` steps unprofiled,
the profiler started at the next mark, the ``active`` steps after it inside
``tf.profiler.experimental.Trace("train", step_num=N, _r=1)`` (the step marks xprof and
traceviz read), then the profiler stops. Code that marks no step is profiled from start
to end, without steps.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traceviz.runners import marks

FIT_SOURCE = "Model.fit batches"


class TfSession:
    def __init__(self, out: Path, warmup: int = 3, active: int = 3,
                 on_event: Callable[..., None] = lambda event, **fields: None) -> None:
        self.out, self.warmup, self.active = out, max(1, warmup), active
        self.emit = on_event
        self.clock = marks.StepClock()
        self.trace_path: Path | None = None
        self.notes: list[str] = []
        self.cut: dict[str, Any] | None = None  # as TorchSession.cut
        self.logdir = out / "tfprofile"
        self._tf: Any = None
        self._running = False
        self._done = False
        self._step: Any = None  # the open Trace("train") of the current active step
        self._unpatch: Callable[[], None] = lambda: None

    def start(self) -> None:
        import tensorflow as tf

        self._tf = tf
        shutil.rmtree(self.logdir, ignore_errors=True)
        self.clock = marks.StepClock()
        marks.attach(self._mark)
        self._unpatch = _fit_marks(lambda: self._mark(FIT_SOURCE))
        self.emit("phase", phase="warmup", total=self.warmup)
        # recorded from the start until a mark says where steps are (then restarted)
        self._profile(True)

    def _profile(self, on: bool) -> None:
        if on and not self._running:
            self._tf.profiler.experimental.start(str(self.logdir))
        elif not on and self._running:
            self._tf.profiler.experimental.stop()
        self._running = on

    def _mark(self, source: str) -> None:
        try:
            self._on_mark(self.clock.mark(source), source)
        finally:
            self.clock.resume()

    def _on_mark(self, k: int, source: str) -> None:
        if self._done:
            return
        if self._step is not None:
            self._step.__exit__(None, None, None)
            self._step = None
        first, last = self.warmup + 1, self.warmup + self.active
        if k == 1:
            self.emit("note", message=f"steps are marked by {source}")
            self._profile(False)  # the unmarked recording is dropped below
            shutil.rmtree(self.logdir, ignore_errors=True)
        if k == first - 1:
            self._profile(True)
            self.emit("phase", phase="profiled", total=self.active)
        if first <= k <= last:
            self._step = self._tf.profiler.experimental.Trace("train", step_num=k, _r=1)
            self._step.__enter__()
            self.emit("progress", phase="profiled", done=k - first, total=self.active)
        elif k > last:
            self._profile(False)
            self._done = True
            self.emit("progress", phase="profiled", done=self.active, total=self.active)
        else:
            self.emit("progress", phase="warmup", done=k, total=self.warmup)

    def finish(self) -> None:
        marks.detach()
        self._unpatch()
        if self._step is not None:
            self._step.__exit__(None, None, None)
            self._step = None
        if not self.clock.marks:
            self.notes.append("the code marked no step (no Model.fit, no traceviz.step()): "
                              "the whole run was profiled, without steps")
        self._profile(False)
        files = sorted(self.logdir.glob("plugins/profile/*/*.xplane.pb"))
        if files:
            self.trace_path = files[-1]
        elif self.clock.marks:  # ended before the profiled steps: nothing recorded
            n = len(self.clock.marks)
            self.cut = {"phase": "before" if n <= self.warmup else "during", "step": n,
                        "recorded": 0}

    def step_times(self) -> dict[str, list[float]]:
        return self.clock.phases(self.warmup, self.active)


def _fit_marks(mark: Callable[[], None]) -> Callable[[], None]:
    """Give every ``keras.Model.fit`` call a callback marking each batch's end; returns
    the undo."""
    import keras

    original = keras.Model.fit

    class StepMarks(keras.callbacks.Callback):
        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            mark()

    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        callbacks = list(kwargs.pop("callbacks", None) or [])
        return original(self, *args, callbacks=[*callbacks, StepMarks()], **kwargs)

    keras.Model.fit = fit  # type: ignore[method-assign]

    def undo() -> None:
        keras.Model.fit = original  # type: ignore[method-assign]

    return undo
