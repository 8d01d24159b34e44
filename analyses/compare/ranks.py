"""Many ranks of one distributed job: a table per rank, stragglers per step, and the top
kernels across ranks.

A rank is analysed on its own (``summarize``) and kept as small figures (``RankFigures``),
so memory holds one rank's events at a time, whatever the number of ranks.

Communication/computation overlap follows HTA's ``get_comm_comp_overlap``: the share of
the union of communication-kernel time during which a computation kernel runs. Here
communication kernels are the ``communication`` category (NCCL, RCCL, gloo, c10d...;
HTA: names containing "nccl"), computation kernels every other kernel (memcpy/memset rows
are neither, as in HTA), per device and summed over a rank's devices (HTA mixes a rank's
devices into one timeline), over the whole trace. Equal start and end times are handled
as closed-open intervals; HTA's cumulative-status sweep depends on sort order at ties.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import categorical_of, groups
from traceviz.algos.intervals import union_blocks
from traceviz.analyses.compare.arrival import COLUMNS, Arrivals, arrivals, rank_collectives
from traceviz.analyses.stats import plain_row
from traceviz.analyses.summary.collectives import comm_rows
from traceviz.analyses.summary.idle_breakdown import (
    Idle,
    host_wait_total,
    idle_breakdown,
    launch_bound,
)
from traceviz.analyses.work import analysis_windows, work_rows
from traceviz.table.schema import is_in

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

_RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_=]?(\d+)", re.IGNORECASE)


def rank_from(path: Path, meta: dict[str, Any]) -> int | None:
    """``distributedInfo.rank`` where the trace records it, else the number in the file
    name (``rank-3``, ``rank_3``, ``worker3``, ``rank=3``), else None."""
    info = meta.get("kineto_distributedInfo") or {}
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    if isinstance(meta.get("rank"), int):
        return int(meta["rank"])
    m = _RANK_IN_NAME.search(path.name) or _RANK_IN_NAME.search(path.parent.name)
    return int(m.group(1)) if m else None


def overlap_ns(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray,
               b_end: np.ndarray) -> int:
    """Length of (union of a) ∩ (union of b)."""
    from traceviz.algos.intervals import covered_until

    sa, ea = union_blocks(a_start, a_end)
    sb, eb = union_blocks(b_start, b_end)
    if not len(sa) or not len(sb):
        return 0
    # for each block of a: how much of b's union lies inside it
    return int((covered_until(sb, eb, ea) - covered_until(sb, eb, sa)).sum())


def comm_overlap(work: pd.DataFrame) -> tuple[int, int]:
    """(union of communication-kernel time, the part of it a computation kernel overlaps),
    per device, summed."""
    kernel = is_in(work["kind"], "kernel")
    comm = is_in(work["category"], "communication") & kernel
    if not comm.any():
        return 0, 0
    start = work["ts_ns"].to_numpy(np.int64)
    end = start + work["dur_ns"].to_numpy(np.int64)
    comm_total = overlap = 0
    for _, idx in groups(work["device"].to_numpy(np.int64)):
        c, k = comm[idx], kernel[idx] & ~comm[idx]
        s, e = start[idx], end[idx]
        cs, ce = union_blocks(s[c], e[c])
        comm_total += int((ce - cs).sum())
        overlap += overlap_ns(s[c], e[c], s[k], e[k])
    return comm_total, overlap


def kernels_per_name(kernels: pd.DataFrame, rows: np.ndarray | None = None) -> pd.DataFrame:
    """name, category, count, total_ns per (name, category) of ``kernels`` (of its
    ``rows``, a mask, when given), largest total first (ties: the first seen first).
    Summed on the categorical codes: a pandas groupby cost several milliseconds a rank,
    more than the sums."""
    name, category = categorical_of(kernels["name"]), categorical_of(kernels["category"])
    named = (name.codes >= 0) & (category.codes >= 0)  # as groupby: no group for a gap
    if rows is not None:
        named &= rows
    name, category = name[named], category[named]
    dur = kernels["dur_ns"].to_numpy(np.int64)[named]
    key = name.codes.astype(np.int64) * len(category.categories) + category.codes
    order = np.argsort(key, kind="stable")
    key_sorted = key[order]
    starts = np.flatnonzero(np.r_[True, key_sorted[1:] != key_sorted[:-1]]) if len(key) \
        else np.zeros(0, np.int64)
    first = order[starts]  # each group's first row
    count = np.diff(np.append(starts, len(key)))
    total = np.add.reduceat(dur[order], starts) if len(key) else np.zeros(0, np.int64)
    seen = np.argsort(first, kind="stable")
    rank = seen[np.argsort(-total[seen], kind="stable")]
    rows = first[rank]
    return pd.DataFrame({
        "name": pd.array(name.categories.take(name.codes[rows]).astype(str), dtype="str"),
        "category": pd.array(category.categories.take(category.codes[rows]).astype(str),
                             dtype="str"),
        "count": count[rank].astype(np.int64), "total_ns": total[rank].astype(np.int64)})


@dataclass
class RankFigures:
    rank: int
    file: str
    steps: int
    step_ns: float | None          # median step window length (None without steps)
    span_ns: int
    busy_ns: int
    host_wait_ns: int | None
    launch_bound_fraction: float | None
    comm_ns: int                   # union of communication-kernel time
    comm_overlap_ns: int           # the part of it overlapped by computation kernels
    kernel_count: int
    kernel_total_ns: int
    top_kernel: str
    step_times: dict[int, int] = field(repr=False)   # step -> window length (max device)
    # name, category, count, total_ns; a rank folder's analysis empties it once it is
    # folded into the cross-rank table (KernelTotals), so thousands of ranks fit
    kernels: pd.DataFrame = field(repr=False)
    # what must agree between ranks of one job: device names and the model (if named)
    identity: str = ""
    # its collectives, for matching across ranks (arrival.rank_collectives)
    collectives: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COLUMNS),
                                      repr=False)

    @property
    def compared_ns(self) -> float:
        """What ranks are compared by (``rank_time``)."""
        return rank_time(self)

    @property
    def comm_overlap_fraction(self) -> float | None:
        return self.comm_overlap_ns / self.comm_ns if self.comm_ns else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "file": self.file, "steps": self.steps,
            "step_ns": None if self.step_ns is None else int(round(self.step_ns)),
            "span_ns": self.span_ns, "busy_ns": self.busy_ns,
            "host_wait_ns": self.host_wait_ns,
            "launch_bound_fraction": self.launch_bound_fraction,
            "kernels": {"count": self.kernel_count, "total_ns": self.kernel_total_ns},
            "comm_ns": self.comm_ns, "comm_overlap_ns": self.comm_overlap_ns,
            "comm_overlap_fraction": self.comm_overlap_fraction,
            "top_kernel": self.top_kernel,
        }


def rank_figures(trace: Trace, rank: int, file: str) -> RankFigures:
    """The figures of one rank: the parts of ``summarize`` the rank table needs (windows,
    busy and idle per device, kernels per name) and the communication overlap."""
    work = work_rows(trace)
    windows = analysis_windows(trace, work)
    devices = idle_breakdown(trace, work, windows, streams=False)
    steps = max((int((w["step"] >= 0).sum()) for w in windows.values()), default=0)
    step_times = _step_times(devices)
    comm, overlap = comm_overlap(work)
    kernel = np.ones(len(work), bool) if trace.is_cpu else is_in(work["kind"], "kernel")
    per_name = kernels_per_name(work, kernel)
    return RankFigures(
        rank=rank, file=file, steps=steps,
        step_ns=float(np.median(list(step_times.values()))) if step_times else None,
        span_ns=sum(d.span_ns for d in devices), busy_ns=sum(d.busy_ns for d in devices),
        host_wait_ns=None if trace.is_cpu else host_wait_total(devices),
        launch_bound_fraction=None if trace.is_cpu else launch_bound(devices),
        comm_ns=comm, comm_overlap_ns=overlap,
        kernel_count=int(kernel.sum()),
        kernel_total_ns=int(work["dur_ns"].to_numpy(np.int64)[kernel].sum()),
        top_kernel=str(per_name["name"].iloc[0]) if len(per_name) else "",
        step_times=step_times, kernels=per_name, identity=run_identity(trace.meta),
        collectives=_collectives(trace),
    )


def _collectives(trace: Trace) -> pd.DataFrame:
    rows = comm_rows(trace)
    if rows.empty:
        return pd.DataFrame(columns=COLUMNS)
    launch = trace.events["launch_ts_ns"].to_numpy()[rows["row"].to_numpy()] \
        if "launch_ts_ns" in trace.events else np.full(len(rows), np.nan)
    launch = np.where(np.isnan(launch.astype(float)), -1, launch).astype(np.int64)
    return rank_collectives(rows, int(trace.meta.get("origin_ns", 0)), launch)


def run_identity(meta: Mapping[str, Any]) -> str:
    """The devices (by name) and model a trace ran: ranks of one job share them."""
    names = sorted({str(v) for v in (meta.get("devices") or {}).values() if v})
    model = meta.get("model")
    return " · ".join([", ".join(names) or "CPU", *([str(model)] if model else [])])


def _step_times(devices: list[Idle]) -> dict[int, int]:
    """Step -> its longest window over the devices."""
    per_step = [d.per_step for d in devices]
    if not per_step:
        return {}
    step = np.concatenate([p["step"].to_numpy(np.int64) for p in per_step])
    span = np.concatenate([p["span_ns"].to_numpy(np.int64) for p in per_step])
    steps, inverse = np.unique(step[step >= 0], return_inverse=True)
    longest = np.zeros(len(steps), np.int64)
    np.maximum.at(longest, inverse, span[step >= 0])
    return dict(zip(steps.tolist(), longest.tolist(), strict=True))


@dataclass
class RanksSummary:
    ranks: list[RankFigures]
    stragglers: pd.DataFrame   # step, ranks, slowest_rank, max_ns, median_ns, spread
    top_kernels: pd.DataFrame  # name, category, ranks, count, total_ns, mean_per_rank_ns,
    #                            min_rank_ns, max_rank_ns, share
    notes: list[str] = field(default_factory=list)
    arrivals: Arrivals | None = None  # collectives matched across ranks (arrival.py)

    def slowest(self, n: int) -> list[RankFigures]:
        """The ``n`` slowest ranks (``slowest_ranks``), for a renderer to list."""
        return slowest_ranks(self.ranks, n)

    def fastest(self) -> RankFigures:
        """The fastest rank (``rank_time``), the lowest rank of equal times."""
        return min(self.ranks, key=lambda r: (rank_time(r), r.rank))

    def median_time(self) -> float:
        """The median over the ranks of what they are compared by (``rank_time``)."""
        import statistics

        return statistics.median(rank_time(r) for r in self.ranks)

    def widest_steps(self, n: int) -> pd.DataFrame:
        """The ``n`` steps of widest spread (``widest_steps``), in step order."""
        return widest_steps(self.stragglers, n)

    def to_dict(self, top: int = 20) -> dict[str, Any]:
        return {
            "ranks": [r.to_dict() for r in self.ranks],
            "stragglers": [plain_row(r) for r in self.stragglers.to_dict("records")],
            "arrivals": None if self.arrivals is None else self.arrivals.to_dict(),
            "top_kernels": [plain_row(r) for r in self.top_kernels.head(top).to_dict("records")],
            "notes": self.notes,
        }


def summarize_ranks(ranks: list[RankFigures],
                    top_kernels: pd.DataFrame | None = None) -> RanksSummary:
    """The straggler view and the cross-rank kernel table of per-rank figures (or
    ``top_kernels``, that table built as the ranks came: ``KernelTotals``)."""
    ranks = sorted(ranks, key=lambda r: r.rank)
    kinds = sorted({r.identity for r in ranks if r.identity})
    if len(kinds) > 1:  # unrelated traces: a straggler is not a slow rank of the job
        notes = [f"these traces are not ranks of one job: they ran on different devices or "
                 f"models ({'; '.join(kinds[:4])}{'; ...' if len(kinds) > 4 else ''}); no "
                 "stragglers are reported (compare them with `traceviz compare`)"]
        stragglers = straggler_table([])
        return RanksSummary(ranks, stragglers, cross_rank_kernels(ranks)
                            if top_kernels is None else top_kernels, notes)
    return RanksSummary(ranks, straggler_table(ranks),
                        cross_rank_kernels(ranks) if top_kernels is None else top_kernels,
                        arrivals=arrivals({r.rank: r.collectives for r in ranks}))


def rank_time(r: RankFigures) -> float:
    """What ranks are compared by: the median step, or the span of a rank without steps."""
    return float(r.span_ns if r.step_ns is None else r.step_ns)


def slowest_ranks(ranks: list[RankFigures], n: int) -> list[RankFigures]:
    """The ``n`` ranks of the longest median step (span without steps), slowest first;
    equal times in rank order."""
    return sorted(ranks, key=lambda r: (-rank_time(r), r.rank))[:n]


def widest_steps(stragglers: pd.DataFrame, n: int) -> pd.DataFrame:
    """The ``n`` rows of the straggler table with the largest max/median, in step order
    (a step whose median is 0 has no spread and comes last)."""
    spread = stragglers["spread"].astype(float).fillna(-1.0).to_numpy()
    # a stable sort of the negated spreads: equal spreads keep their step order
    keep = np.sort(np.argsort(-spread, kind="stable")[:n])
    return stragglers.iloc[keep].reset_index(drop=True)


def straggler_table(ranks: list[RankFigures]) -> pd.DataFrame:
    """Per step: how many ranks ran it, the slowest rank, its step time, the median, and
    spread = max / median."""
    rows = [(step, r.rank, ns) for r in ranks for step, ns in r.step_times.items()]
    cols = ["step", "ranks", "slowest_rank", "max_ns", "median_ns", "spread"]
    if not rows:
        return pd.DataFrame(columns=cols)
    d = pd.DataFrame(rows, columns=["step", "rank", "ns"])
    d = d.sort_values(["step", "ns", "rank"], ascending=[True, False, True], kind="stable")
    g = d.groupby("step", sort=True)
    out = pd.DataFrame({"ranks": g.size(), "slowest_rank": g["rank"].first(),
                        "max_ns": g["ns"].max(), "median_ns": g["ns"].median()})
    out["spread"] = out["max_ns"] / out["median_ns"].where(out["median_ns"] > 0)
    out["median_ns"] = out["median_ns"].round().astype(np.int64)
    return out.reset_index()[cols]


KERNEL_COLUMNS = ["name", "category", "ranks", "count", "total_ns", "mean_per_rank_ns",
                  "min_rank_ns", "max_rank_ns", "share"]


def cross_rank_kernels(ranks: list[RankFigures]) -> pd.DataFrame:
    """Kernel names over all ranks: total, per-rank mean, min and max rank totals."""
    totals = KernelTotals()
    for r in ranks:
        totals.add(r.kernels)
    return totals.table()


class KernelTotals:
    """The cross-rank kernel table built one rank at a time, so that a folder of thousands
    of ranks holds one row per (name, category), not one per rank and name (a rank's
    kernel table is ~80 KB). Ranks are folded in batches: a groupby per rank would cost
    more than the rank's own figures."""

    BATCH = 64

    def __init__(self) -> None:
        self.ranks = 0               # ranks added, with kernels or not
        self.ranks_without = 0       # ranks whose table was empty
        self._sums: pd.DataFrame | None = None  # (name, category) -> ranks, count, ...
        self._pending: list[pd.DataFrame] = []

    def add(self, kernels: pd.DataFrame) -> None:
        """One rank's ``kernels_per_name`` table (one row per name and category)."""
        self.ranks += 1
        if not len(kernels):
            self.ranks_without += 1
            return
        self._pending.append(kernels)
        if len(self._pending) >= self.BATCH:
            self._fold()

    def _fold(self) -> None:
        if not self._pending:
            return
        d = pd.concat(self._pending, ignore_index=True)
        self._pending = []
        part = pd.DataFrame({"name": d["name"].astype(str), "category": d["category"].astype(str),
                             "ranks": np.ones(len(d), np.int64), "count": d["count"],
                             "total_ns": d["total_ns"], "min_ns": d["total_ns"],
                             "max_ns": d["total_ns"]})
        if self._sums is not None:
            part = pd.concat([self._sums, part], ignore_index=True)
        g = part.groupby(["name", "category"], sort=False)
        self._sums = g.agg(ranks=("ranks", "sum"), count=("count", "sum"),
                           total_ns=("total_ns", "sum"), min_ns=("min_ns", "min"),
                           max_ns=("max_ns", "max")).reset_index()

    def table(self) -> pd.DataFrame:
        """name, category, ranks, count, total_ns, mean_per_rank_ns, min_rank_ns (0 where a
        rank lacks the kernel), max_rank_ns, share; largest total first, ties by name."""
        self._fold()
        if self._sums is None:
            return pd.DataFrame(columns=KERNEL_COLUMNS)
        out = self._sums.copy()
        n = self.ranks
        out["mean_per_rank_ns"] = out["total_ns"] / n
        out["min_rank_ns"] = np.where(out["ranks"] < n, 0, out["min_ns"])
        out["max_rank_ns"] = out["max_ns"]
        total = out["total_ns"].sum()
        out["share"] = out["total_ns"] / total if total else 0.0
        # the order DuckDB's table of a dataset has: the same answer from a folder
        out = out.sort_values(["total_ns", "name", "category"], ascending=[False, True, True],
                              kind="stable")
        return out[KERNEL_COLUMNS].reset_index(drop=True)
