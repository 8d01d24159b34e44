"""Across ranks: for every collective on the slowest rank's critical path, the rank it
waited for (``traceviz.rankset.slowest_path`` reads the ranks and calls this).

A collective kernel ends only when every rank has reached it, so the rank that reached
it last sets its end: on the waiting ranks the kernel starts early and runs long. Ranks
run the same collectives in the same order, so the k-th call of a collective kernel on
one rank is the k-th on every other; the rank whose k-th call started last is the one
waited for, and the difference of the starts is how long (the ranks' clocks taken to
agree: one machine's, or synchronized ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.analyses.critical_path.path import CriticalPath

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace


def collective_starts(trace: Trace) -> pd.DataFrame:
    """Per communication kernel: its name, its occurrence among the kernels of that name
    (0, 1, ... in start order), its start on the trace's clock, its row."""
    ev = trace.events
    comm = ev[((ev["category"] == "communication") & (ev["kind"] == "kernel")).to_numpy()]
    comm = comm.sort_values("ts_ns", kind="stable")
    out = pd.DataFrame({"name": comm["name"].astype(str).to_numpy(),
                        "start_ns": comm["ts_ns"].to_numpy(np.int64)
                        + int(trace.meta.get("origin_ns", 0)),
                        "row": comm.index.to_numpy()})
    out["occurrence"] = out.groupby("name").cumcount()
    return out


@dataclass
class RanksPath:
    rank: int                 # the slowest rank
    file: str
    path: CriticalPath        # its critical path
    waits: pd.DataFrame       # per collective on the path: name, occurrence, on_path_ns,
    #                           waited_for (rank), lag_ns (its start - this rank's start)

    def to_dict(self, top: int = 20) -> dict[str, Any]:
        return {"rank": self.rank, "file": self.file, **self.path.to_dict(top=top),
                "collectives": [{k: (v.item() if hasattr(v, "item") else v)
                                 for k, v in r.items()} for r in self.waits.to_dict("records")]}


def waits_of(slowest: int, trace: Trace, cp: CriticalPath,
             others: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """For each collective kernel on ``cp`` (the path of rank ``slowest``): the rank whose
    same call started last (``others``: each other rank's ``collective_starts``)."""
    mine = collective_starts(trace)
    on = mine[mine["row"].isin(cp.rows)].copy()
    on["on_path_ns"] = trace.events.loc[on["row"], "dur_ns"].to_numpy(np.int64)
    cols = ["name", "occurrence", "on_path_ns", "waited_for", "lag_ns"]
    if on.empty:
        return pd.DataFrame(columns=cols)
    starts = pd.concat([on.assign(rank=slowest)[["name", "occurrence", "start_ns", "rank"]],
                        *(o.assign(rank=r)[["name", "occurrence", "start_ns", "rank"]]
                          for r, o in others.items())])
    starts = starts[starts.set_index(["name", "occurrence"]).index.isin(
        on.set_index(["name", "occurrence"]).index)]
    # the latest start per call; ties: the lowest rank
    starts = starts.sort_values(["name", "occurrence", "start_ns", "rank"],
                                ascending=[True, True, False, True], kind="stable")
    last = starts.drop_duplicates(["name", "occurrence"]).rename(
        columns={"rank": "waited_for", "start_ns": "latest_ns"})
    on = on.merge(last, on=["name", "occurrence"], how="left")
    on["lag_ns"] = on["latest_ns"] - on["start_ns"]
    return on.sort_values("on_path_ns", ascending=False, kind="stable")[cols] \
        .reset_index(drop=True)
