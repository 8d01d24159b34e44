"""The windows' time by cause, summed over the windows a verdict is taken on.

``summary/waits.py`` splits every window of every device into start-up, busy, input,
queued and host time, and the host time by what the host did. A verdict is taken on the
windows that show the steady pace: a step window holding ``COLD_STEP`` of start-up or more
is **cold** (a first step, a step that autotunes or loads modules) and is left out where
steady step windows remain; without steps, start-up is taken out of the one window
instead. ``Budget`` holds the sums over the windows kept, with the host time grouped by
the remedy it calls for (``HOST_GROUPS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.analyses.summary.waits import BUDGET, CAUSES

if TYPE_CHECKING:  # types only
    from traceviz.analyses.summary.collectives import Communication
    from traceviz.analyses.summary.waits import HostWait

COLD_STEP = 0.10   # a step a tenth of which is start-up does not show the steady pace
# the host causes grouped by what removes them: issuing work (launch calls, the framework
# ops around them, the Python between them: graphs, compilers, bigger batches remove it),
# untraced host work (a sampling profiler says what), the OS (sleep, I/O, locks), copies
# that hold the host, synchronizations, allocation
HOST_GROUPS: dict[str, tuple[str, ...]] = {
    "launch": ("launch", "ops", "gaps", "other_api", "setup"),
    "untraced": ("untraced",),
    "os": ("sleep", "io", "lock", "other_os", "offcpu"),
    "sync_copy": ("sync_copy",),
    "sync": ("sync",),
    "alloc": ("alloc", "create"),
}


@dataclass(frozen=True)
class Budget:
    """Sums over the windows a verdict is taken on (``*_ns`` as ``waits.BUDGET``)."""

    startup_ns: int
    busy_ns: int
    input_ns: int
    queued_ns: int
    host_ns: int
    exposed_ns: int                      # exposed communication inside these windows
    causes: dict[str, int] = field(default_factory=dict)   # host wait per waits.CAUSES
    windows: int = 0                     # windows kept (per device)
    cold: int = 0                        # cold step windows left out
    steps: list[int] = field(default_factory=list)          # the steady steps' numbers

    @property
    def span_ns(self) -> int:
        """The windows' time without their start-up: what the steady verdict divides."""
        return self.busy_ns + self.input_ns + self.queued_ns + self.host_ns

    def share(self, ns: int) -> float:
        return ns / self.span_ns if self.span_ns else 0.0

    @property
    def groups(self) -> dict[str, int]:
        """The host time by ``HOST_GROUPS`` (start-up and input are not host time)."""
        return {g: sum(self.causes.get(c, 0) for c in cs) for g, cs in HOST_GROUPS.items()}

    @property
    def cause(self) -> str | None:
        """The largest host group (None: no host time)."""
        g = self.groups
        top = max(g, key=lambda k: g[k]) if g else None
        return top if top is not None and g[top] > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {**{f"{b}_ns": getattr(self, f"{b}_ns") for b in BUDGET},
                "exposed_communication_ns": self.exposed_ns, "windows": self.windows,
                "cold_windows": self.cold, "host_groups": self.groups}


def cold_windows(w: HostWait, stepped: bool) -> np.ndarray:
    """Per row of ``w.steps``: a step window that is cold (always False without steps)."""
    s = w.steps
    if not stepped or s.empty:
        return np.zeros(len(s), dtype=bool)
    window = (s["end_ns"] - s["start_ns"]).to_numpy(np.int64)
    return s["startup_ns"].to_numpy(np.int64) >= COLD_STEP * np.maximum(window, 1)


def budget(w: HostWait, comm: Communication | None, keep: np.ndarray | None = None
           ) -> Budget:
    """The sums over the rows of ``w.steps`` that ``keep`` marks (all: None), with the
    exposed communication of the steps kept (all of it without steps)."""
    s = w.steps if keep is None else w.steps[keep]
    total = {b: int(s[f"{b}_ns"].sum()) for b in BUDGET}
    causes = {c: int(s[f"wait_{c}_ns"].sum()) for c in CAUSES
              if c not in ("startup", "input")}
    exposed = 0
    if comm is not None and len(comm.per_step):
        per = comm.per_step
        kept_steps = set(s["step"].tolist())
        exposed = int(per.loc[per["step"].isin(kept_steps), "exposed_ns"].sum()) \
            if keep is not None else int(per["exposed_ns"].sum())
    steps = sorted({int(x) for x in s["step"].tolist() if x >= 0})
    return Budget(total["startup"], total["busy"], total["input"], total["queued"],
                  total["host"], exposed, causes, len(s),
                  0 if keep is None else int((~keep).sum()), steps)


def largest_parts(b: Budget, n: int = 3) -> list[tuple[str, int]]:
    """The host time's largest causes (fine-grained), largest first."""
    parts = pd.Series(b.causes, dtype=np.int64)
    parts = parts[parts > 0].sort_values(ascending=False, kind="stable")
    return [(str(k), int(v)) for k, v in parts.head(n).items()]
