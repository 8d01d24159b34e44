"""``traceviz.profile()``: a notebook's or a training loop's own code, profiled in-process.

::

    with traceviz.profile(steps=3) as p:
        for batch in loader:
            train_step(batch)
            p.step()          # or traceviz.step(), or let optimizer.step() mark steps
    p.trace.summary()         # the Trace; p.run_dir holds what `traceviz capture` writes

The schedule is the script capture's (``runners/torch/torch_session.py``): ``warmup``
unprofiled steps, one profiler warm-up step, ``steps`` recorded, the rest unprofiled.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from traceviz.runners import marks

if TYPE_CHECKING:
    from traceviz.notebook_api import TraceAnalysis


class Profile:
    """The context manager ``traceviz.profile`` returns."""

    def __init__(self, steps: int = 3, warmup: int = 3, out: str | Path | None = None,
                 modules: bool = False, force: bool = False,
                 slice_s: float | None = None, batch_size: int | None = None) -> None:
        from traceviz.errors import TraceVizError, UsageError
        from traceviz.files.runclaim import new_run_dir, prepare_run_dir
        from traceviz.system.install_hint import pip_install

        if steps < 1 or warmup < 0:
            raise UsageError("steps is at least 1 and warmup at least 0")
        if batch_size is not None and batch_size < 1:
            raise UsageError("batch_size is at least 1")
        self.batch_size = batch_size
        try:
            import torch  # noqa: F401  (the session imports it again; here, before a run folder)
        except ImportError as e:
            raise TraceVizError(f"traceviz.profile() profiles PyTorch code, and torch is not "
                                f"importable here ({e}); {pip_install('torch')}") from None
        if out is None:  # made here, exclusively: a name of its own
            self.run_dir = new_run_dir("profile")
        else:
            self.run_dir = Path(out)
            prepare_run_dir(self.run_dir, force)
        from traceviz.runners.torch.torch_session import TorchSession

        self._session = TorchSession(self.run_dir, warmup, steps, modules=modules,
                                     slice_s=slice_s)
        self.trace: TraceAnalysis | None = None
        self.bench: dict[str, Any] = {}
        self.notes: list[str] = []

    def __enter__(self) -> Profile:
        self._session.start()
        return self

    def step(self) -> None:
        """A step ends here (as ``traceviz.step()``)."""
        marks.step()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        from traceviz.capture.user_script import save_trace
        from traceviz.notebook_api import TraceAnalysis
        from traceviz.runners.capture_protocol import run_result, step_bench
        from traceviz.runners.script import versions

        s = self._session
        s.finish()
        self.notes = list(s.notes)
        if s.cut is not None:  # the code ended before the schedule did: say where
            from traceviz.capture.outcome import (
                INTERRUPTED,
                Ending,
                ending_note,
                nothing_recorded,
            )

            status = 0 if kind is None else (
                INTERRUPTED if issubclass(kind, KeyboardInterrupt) else 1)
            end = Ending("the code", status, None, len(s.clock.marks), s.cut, s.warmup,
                         s.active, raised=kind.__name__ if status == 1 and kind else None)
            said = nothing_recorded(end).message if s.trace_path is None else ending_note(end)
            self.notes.append(str(said).replace(", no run folder left", ""))
        self.bench = step_bench(s.step_times(), s.clock.source)
        meta = versions("torch") | {
            "profiler": "torch.profiler", "command": "traceviz.profile()",
            "step_marks": len(s.clock.marks),
            "error": f"{kind.__name__}: {error}" if kind else None, "notes": s.notes}
        run_result(self.run_dir, self.bench, meta, s.trace_path)
        workload = {"batch": self.batch_size} if self.batch_size else {}
        if workload:  # the run's config: what traceviz reads back from the folder alone
            import json

            (self.run_dir / "config.json").write_text(json.dumps(
                {"framework": "torch", "profiler": "torch", "batch_size": self.batch_size},
                indent=2))
        if s.trace_path is not None:
            trace, _ = save_trace(s.trace_path, self.run_dir, {
                "model": "traceviz.profile", "variant": "traceviz.profile",
                "bench": self.bench, "runner": meta, "profiler": "torch.profiler",
                **({"workload": workload} if workload else {})})
            self.trace = TraceAnalysis.of(trace)  # p.trace.summary() in a notebook

