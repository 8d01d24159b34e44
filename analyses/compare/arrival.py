"""Ranks by arrival: every collective matched across the ranks of one job, when each rank
reached it, who waited, and the rank that arrives last.

A collective ends only when every rank of its group has reached it: the rank that comes
last is the one the others wait for; they wait inside the collective, so the rank whose
step looks longest is often a waiting one, not the cause. Ranks run the collectives of a
process group in the same order, so the k-th collective of one kind in one group on one
rank is the k-th on every other (the group where Kineto records it, "Process Group
Name"; one group otherwise).

A rank's arrival at a collective is its launch (the host's launch call, where the trace
links it; else the kernel's start) and its kernel's start. Its wait is the latest kernel
start over the ranks less its own: the time its kernel ran before the last rank's began.
The rank that arrives last is the one whose launch came last; the wait it causes is the
others' waits on that collective. The straggler is the rank that arrives last most often
(ties: the larger wait caused), named apart from the ranks that wait longest.

Clocks: the ranks' collectives end together (NCCL kernels within microseconds; a CPU
backend's within a millisecond or so, its threads scheduled among the others), so each
rank's clock offset is the median, over its collectives, of its end less the collective's
median end. Ranks on one host share its clock; where an offset exceeds ``CLOCK_SKEW_NS``
(ranks on several hosts, whose clocks NTP keeps milliseconds apart) every time of that
rank is corrected by it before arrivals are compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceviz.analyses.stats import plain_row

CLOCK_SKEW_NS = 2_000_000
COLUMNS = ["kind", "pg", "seq", "launch_ns", "start_ns", "end_ns"]


def rank_collectives(rows: pd.DataFrame, origin_ns: int, launch_ns: np.ndarray
                     ) -> pd.DataFrame:
    """One rank's collectives for matching: kind, process group, its order among the
    collectives of that kind and group (``seq``), launch, start and end on the trace's
    absolute clock. ``rows``: ``summary.comm.comm_rows``; ``launch_ns``: each row's
    launch call start (-1 where none)."""
    start = rows["ts_ns"].to_numpy(np.int64) + origin_ns
    launch = np.where(launch_ns >= 0, launch_ns + origin_ns, start)
    out = pd.DataFrame({"kind": rows["kind"].astype(str).to_numpy(),
                        "pg": rows["pg"].astype(str).to_numpy(),
                        "launch_ns": launch, "start_ns": start,
                        "end_ns": start + rows["dur_ns"].to_numpy(np.int64)})
    out = out.sort_values("start_ns", kind="stable").reset_index(drop=True)
    out["seq"] = out.groupby(["kind", "pg"], sort=False).cumcount()
    return out[COLUMNS]


@dataclass
class Arrivals:
    """Collectives matched across ranks (see the module's docstring)."""

    collectives: pd.DataFrame  # kind, pg, seq, ranks, last_rank (by launch), launch_lag_ns,
    #                            last_start_rank, max_wait_ns, caused_ns, end_spread_ns
    per_rank: pd.DataFrame     # rank, last (times it arrived last), caused_ns, wait_ns,
    #                            launch_late_ns, start_late_ns (summed over collectives:
    #                            its launch / kernel start after the first rank's), offset_ns
    straggler: int | None      # the rank that arrives last most often
    waits_longest: list[int] = field(default_factory=list)
    clock_corrected: bool = False
    kinds: pd.DataFrame = field(default_factory=pd.DataFrame)  # kinds_across

    def to_dict(self) -> dict[str, Any]:
        return {"straggler": self.straggler,
                "kinds": [plain_row(r) for r in self.kinds.to_dict("records")],
                "waits_longest": self.waits_longest,
                "clock_corrected": self.clock_corrected,
                "collectives": [plain_row(r) for r in self.collectives.to_dict("records")],
                "per_rank": [plain_row(r) for r in self.per_rank.to_dict("records")]}


def arrivals(per_rank: dict[int, pd.DataFrame]) -> Arrivals | None:
    """Match each rank's ``rank_collectives`` (rank -> frame); None with fewer than two
    ranks holding collectives or none in common."""
    parts = [f.assign(rank=r) for r, f in per_rank.items() if len(f)]
    if len(parts) < 2:
        return None
    d = pd.concat(parts, ignore_index=True)
    key = ["kind", "pg", "seq"]
    n = d.groupby(key, sort=False)["rank"].transform("nunique")
    d = d[n == len(parts)].copy()  # a collective every rank ran
    if d.empty:
        return None
    offsets = _clock_offsets(d)
    corrected = bool((offsets.abs() > CLOCK_SKEW_NS).any())
    if corrected:
        shift = d["rank"].map(offsets).to_numpy(np.int64)
        for c in ("launch_ns", "start_ns", "end_ns"):
            d[c] = d[c].to_numpy(np.int64) - shift
    g = d.groupby(key, sort=False)
    latest_start = g["start_ns"].transform("max").to_numpy(np.int64)
    d["wait_ns"] = latest_start - d["start_ns"].to_numpy(np.int64)
    # how late each rank's launch and kernel start came after the first rank's
    d["launch_late_ns"] = d["launch_ns"] - g["launch_ns"].transform("min")
    d["start_late_ns"] = d["start_ns"] - g["start_ns"].transform("min")
    # the last to arrive: the latest launch; ties: the lowest rank
    order = d.sort_values(key + ["launch_ns", "rank"], ascending=[True] * 3 + [False, True],
                          kind="stable")
    last = order.drop_duplicates(key).set_index(key)["rank"]
    by_start = d.sort_values(key + ["start_ns", "rank"], ascending=[True] * 3 + [False, True],
                             kind="stable").drop_duplicates(key).set_index(key)["rank"]
    idx = d.set_index(key).index
    d["last"] = last.reindex(idx).to_numpy(np.int64)
    # the wait the last rank causes: each other rank's wait for the last rank's kernel
    last_start = d.assign(mine=d["rank"] == d["last"]).query("mine").set_index(key)["start_ns"]
    caused = np.maximum(last_start.reindex(idx).to_numpy(np.int64)
                        - d["start_ns"].to_numpy(np.int64), 0)
    d["caused_ns"] = np.where(d["rank"] == d["last"], 0, caused)
    coll = g.agg(ranks=("rank", "nunique"), first_ns=("start_ns", "min"),
                 max_wait_ns=("wait_ns", "max"), end_min=("end_ns", "min"),
                 end_max=("end_ns", "max"), launch_max=("launch_ns", "max"),
                 launch_median=("launch_ns", "median"))
    coll["caused_ns"] = d.groupby(key, sort=False)["caused_ns"].sum()
    coll["last_rank"] = last.reindex(coll.index)
    coll["last_start_rank"] = by_start.reindex(coll.index)
    coll["launch_lag_ns"] = (coll["launch_max"] - coll["launch_median"]).round().astype(np.int64)
    coll["end_spread_ns"] = coll["end_max"] - coll["end_min"]
    coll = coll.reset_index().sort_values("first_ns", kind="stable").reset_index(drop=True)
    coll = coll[["kind", "pg", "seq", "ranks", "last_rank", "launch_lag_ns",
                 "last_start_rank", "max_wait_ns", "caused_ns", "end_spread_ns"]]
    ranks = sorted(d["rank"].unique().tolist())
    times_last = coll["last_rank"].value_counts()
    caused_by = coll.groupby("last_rank")["caused_ns"].sum()
    waited = d.groupby("rank")["wait_ns"].sum()
    late = d.groupby("rank")[["launch_late_ns", "start_late_ns"]].sum()
    table = pd.DataFrame({
        "rank": ranks,
        "last": [int(times_last.get(r, 0)) for r in ranks],
        "caused_ns": [int(caused_by.get(r, 0)) for r in ranks],
        "wait_ns": [int(waited.get(r, 0)) for r in ranks],
        "launch_late_ns": [int(late["launch_late_ns"].get(r, 0)) for r in ranks],
        "start_late_ns": [int(late["start_late_ns"].get(r, 0)) for r in ranks],
        "offset_ns": [int(offsets.get(r, 0)) for r in ranks]})
    top = table.sort_values(["last", "caused_ns", "rank"], ascending=[False, False, True],
                            kind="stable")
    straggler = int(top["rank"].iloc[0]) if int(top["last"].iloc[0]) else None
    # the ranks that wait longest, the straggler left out: they wait, it is late
    longest = table[table["rank"] != (-1 if straggler is None else straggler)].sort_values(
        ["wait_ns", "rank"], ascending=[False, True], kind="stable")
    return Arrivals(coll, table, straggler,
                    [int(r) for r in longest["rank"].head(3)], corrected,
                    kinds_across(per_rank))


def _clock_offsets(d: pd.DataFrame) -> pd.Series:
    """Per rank: the median of its collectives' ends less each collective's median end."""
    common = d.groupby(["kind", "pg", "seq"], sort=False)["end_ns"].transform("median")
    return (d["end_ns"] - common).groupby(d["rank"]).median().round().astype(np.int64)


def kinds_across(per_rank: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """Per collective kind over the ranks: ranks that ran it, count and time in all, and
    the largest one rank's time (its collectives' durations, waiting included)."""
    parts = [f.assign(rank=r) for r, f in per_rank.items() if len(f)]
    cols = ["kind", "ranks", "count", "total_ns", "max_rank_ns"]
    if not parts:
        return pd.DataFrame(columns=cols)
    d = pd.concat(parts, ignore_index=True)
    d["dur_ns"] = d["end_ns"].to_numpy(np.int64) - d["start_ns"].to_numpy(np.int64)
    per = d.groupby(["kind", "rank"], sort=False)["dur_ns"].agg(["size", "sum"]).reset_index()
    out = per.groupby("kind", sort=False).agg(ranks=("rank", "nunique"), count=("size", "sum"),
                                              total_ns=("sum", "sum"),
                                              max_rank_ns=("sum", "max")).reset_index()
    return out.sort_values("total_ns", ascending=False, kind="stable")[cols] \
        .reset_index(drop=True)
