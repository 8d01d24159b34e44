"""How a script's capture ended, said once: ``capture -- python train.py``'s one note.

The runner reports the script's exit status, its error, how many steps it marked, and
where the code's end cut the profiler's schedule (``meta.json``'s ``schedule_cut``, set by
the session: ``runners/torch/torch_session.py``). From these the parent words one line: with a
recorded step, a note beside the run; without one, the error that leaves no run folder
(``NothingRecorded``: exit 130 when interrupted, else 2).
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traceviz.errors import RunFailed

INTERRUPTED = 128 + signal.SIGINT  # what a script stopped by Ctrl-C exits with (130)
# the signals of a process's own fault (a segfault, os.abort()), not of a kill from outside
CRASHES = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}


class NothingRecorded(RunFailed):
    """The script ended, failed or was interrupted before a whole profiled step was
    recorded: no run folder is left. Exit 130 when interrupted, else 2."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Ending:
    """What the runner said of the script's end."""

    name: str                       # the script's (or module's) name
    status: int                     # its exit status; -N: killed by signal N
    error: str | None = None        # "KeyboardInterrupt", "sys.exit(2)", "ValueError: ..."
    marks: int = 0                  # step marks seen
    cut: dict[str, Any] | None = None  # the session's schedule_cut
    warmup: int = 1                 # unprofiled steps (at least 1)
    active: int = 3                 # profiled steps asked for
    raised: str | None = None       # in-process code: the exception it raised

    @property
    def interrupted(self) -> bool:
        return self.status in (INTERRUPTED, -signal.SIGINT)

    @property
    def profiled(self) -> str:
        """The profiled steps by number: ``4-6`` (step 0 runs up to the first mark)."""
        first = self.warmup + 1
        last = first + self.active - 1
        return f"{first}" if first == last else f"{first}-{last}"

    def how(self) -> str:
        """``interrupted``, ``train.py exited with status 1 (ValueError: ...)`` or
        ``train.py ended``."""
        if self.interrupted:
            return "interrupted"
        if self.raised:
            return f"{self.name} raised {self.raised}"
        if self.status < 0:
            name = signal.Signals(-self.status).name
            if -self.status in CRASHES:
                return f"{self.name} crashed ({name})"
            return f"{self.name} was killed by {name}"
        if self.status != 0:  # the error, unless it is only the status again
            said = self.error not in (None, f"sys.exit({self.status})")
            return f"{self.name} exited with status {self.status}" + (
                f" ({self.error})" if said else "")
        return f"{self.name} ended"

    def where(self) -> str:
        """Where in the schedule the code ended."""
        cut = self.cut or {}
        step = cut.get("step", self.marks)
        if cut.get("phase") == "during" and cut.get("recorded"):
            return f"in step {step}, during the profiled steps ({self.profiled})"
        if cut.get("phase") == "during":
            return f"in step {step}, before a whole profiled step ({self.profiled})"
        if cut.get("phase") == "before" or self.marks:
            return f"in step {step}, before the profiled steps ({self.profiled})"
        return "before it ran anything to profile"


def nothing_recorded(end: Ending, why: str | None = None) -> NothingRecorded:
    """The one line of a capture that recorded no whole profiled step (``why``: what
    reading the recording said, when there was one)."""
    text = f"{end.how()} {end.where()}: nothing recorded, no run folder left"
    if end.status == 0 and end.cut:  # the script ran out of steps: ask for fewer
        text += f"; lower --warmup (now {end.warmup}) or run more steps"
    elif why and not end.marks and end.status == 0:  # it ran, but no framework op
        text = f"{end.how()} with nothing to analyze ({why}): no run folder left"
    return NothingRecorded(text, 130 if end.interrupted else 2)


def settled_status(status: int, interrupted: bool) -> int:
    """The status of processes that Ctrl-C was passed on to is 130, however they ended:
    torchrun exits 1 when its ranks stop, a script may catch KeyboardInterrupt."""
    return INTERRUPTED if interrupted and status != 0 else status


def exit_status(status: int) -> int:
    """The command's exit status for the script's: killed by signal N (-N), 128 + N, as a
    shell reports it."""
    return 128 - status if status < 0 else status


def read_results(folder: Path) -> tuple[dict, dict] | None:
    """The runner's ``bench.json`` and ``meta.json`` in ``folder``; None where it wrote
    none (it ended before the profile was written)."""
    try:
        return (json.loads((folder / "bench.json").read_text()),
                json.loads((folder / "meta.json").read_text()))
    except (OSError, ValueError):
        return None


def no_results(end: Ending, otherwise: str) -> RunFailed:
    """The one line of processes that wrote no results: interrupted (130), killed or
    crashed before the profile was written, or ``otherwise`` (2)."""
    if end.interrupted:
        return nothing_recorded(end)
    if end.status < 0:
        return RunFailed(f"{end.how()} before its profile was written: nothing recorded, "
                         "no run folder left")
    return RunFailed(otherwise)


def after_crash(end: Ending, meta: dict[str, Any]) -> None:
    """A script killed (-N) once its profile was written: ``meta`` (written when the
    profile was, ``exit_status`` null) records how it ended."""
    meta["exit_status"] = end.status
    meta["error"] = meta.get("error") or end.how().removeprefix(f"{end.name} ")
    end.error = meta["error"]


def ending_note(end: Ending) -> str | None:
    """The note beside a run that was recorded; None when the script ran to its end and
    the schedule was complete."""
    cut = end.cut or {}
    if cut.get("phase") == "during":
        done = int(cut.get("recorded", 0))
        first = end.warmup + 1
        steps = f"step {first}" if done == 1 else f"steps {first}-{first + done - 1}"
        return (f"{end.how()} {end.where()}: {done} of {end.active} recorded ({steps}); "
                "the run folder keeps them")
    if end.status == 0:
        return None
    if end.status < 0 and not end.interrupted:
        return f"{end.how()} after its profile was written; the run folder keeps the profile"
    if end.marks:
        return f"{end.how()} after the profiled steps; the run folder keeps them"
    return f"{end.how()}; the run folder keeps what was recorded"
