"""Launch overhead: the host calls that put work on a device, in three populations.

- kernel launches (``cudaLaunchKernel``, ``hipModuleLaunchKernel``...): one kernel each;
- graph launches (``cudaGraphLaunch``, ``hipGraphLaunch``): one call, many kernels. Their
  kernels are reported apart (count, time, first-kernel delay) and kept out of the
  short-kernel figure, which is about one launch per kernel; a graph kernel's launch
  delay is its wait after the graph's kernels before it (the first's: after the call);
- copy and set calls (``cudaMemcpyAsync``, ``hipMemsetAsync``...).

Calls and device rows are joined by ``launch_id``, the one link the normalizer writes
(process-aware: nsys numbers correlation ids per process).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import each, per_distinct_categorical
from traceviz.algos.intervals import union_blocks, union_in_windows
from traceviz.analyses.stats import Distribution
from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.table.launch_apis import base_api_name, is_graph_launch, launch_kind
from traceviz.table.schema import DEVICE_KINDS

if TYPE_CHECKING:  # types only: trace.py's notebook API imports analyses
    from traceviz.analyses.summary.figures import Summary
    from traceviz.trace import Trace


def launch_table(trace: Trace) -> pd.DataFrame:
    """One row per launch call with the device work it launched (if any).

    ``population`` is ``kernel``, ``graph``, ``memcpy`` or ``memset``; a graph launch
    that ran many kernels is one row: ``device_count`` rows, ``device_ns`` their summed
    time, ``delay_ns`` to the first of them.
    """
    ev = trace.events
    kind = ev["kind"]
    launch_id = ev["launch_id"].to_numpy(np.int64)
    linked = launch_id >= 0
    calls = np.flatnonzero((kind == "runtime").to_numpy() & linked)
    dev = np.flatnonzero(kind.isin(DEVICE_KINDS).to_numpy() & linked)
    # device rows by launch, then start: the first row of a launch's group ran first
    dev = dev[np.lexsort((ev["ts_ns"].to_numpy(np.int64)[dev], launch_id[dev]))]
    ids = launch_id[dev]
    lead = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(dev) else dev
    # each call's group (its launch id among the device rows'), where it has one
    at = np.minimum(np.searchsorted(ids[lead], launch_id[calls]), max(len(lead) - 1, 0))
    has = (ids[lead][at] == launch_id[calls]) if len(lead) else np.zeros(len(calls), bool)
    no_delay = np.iinfo(np.int64).max
    per_group = {
        "count": np.diff(np.r_[lead, len(dev)]),
        "device_ns": _reduce(np.add, ev["dur_ns"].to_numpy(np.int64)[dev], lead),
        # the group's first row: a graph's later rows are timed from the rows before them
        "delay_ns": ev["launch_delay_ns"].fillna(no_delay).to_numpy(np.int64)[dev][lead],
        "first": dev[lead],
    }
    got = {k: np.where(has, v[at], 0) if len(lead) else np.zeros(len(calls), np.int64)
           for k, v in per_group.items()}
    names = ev["name"].array
    call_names = names[calls]
    # text columns as categoricals: one string per distinct value, not one per call
    api = per_distinct_categorical(call_names, each(base_api_name))
    population = per_distinct_categorical(call_names, each(
        lambda n: "graph" if is_graph_launch(n) else launch_kind(n)))
    first_kernel = pd.Categorical.from_codes(
        np.where(has, names.codes[got["first"]], -1), dtype=names.dtype, validate=False
    ).remove_unused_categories()
    return pd.DataFrame({
        "launch_id": launch_id[calls],
        "api": api,
        "population": population,
        "ts_ns": ev["ts_ns"].to_numpy()[calls],
        "host_ns": ev["dur_ns"].to_numpy()[calls],
        "pid": ev["pid"].to_numpy()[calls],
        "tid": ev["tid"].to_numpy()[calls],
        "step": ev["step"].to_numpy()[calls],
        "correlation": ev["correlation"].to_numpy()[calls],
        "device_count": got["count"].astype(np.int64),
        "device_ns": got["device_ns"],
        "delay_ns": pd.arrays.IntegerArray(got["delay_ns"],
                                           ~has | (got["delay_ns"] == no_delay)),
        "first_kernel": first_kernel,
        # Int64: a call that reached no device row has no device
        "device": pd.arrays.IntegerArray(ev["device"].to_numpy(np.int64)[got["first"]], ~has),
        "matched": has,
    })


def _reduce(op: np.ufunc, values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``op`` over each run of ``values`` beginning at ``starts`` (sorted, non-empty)."""
    return op.reduceat(values, starts) if len(values) else values


@dataclass(frozen=True)
class CallGroup:
    """One population of launch calls."""

    count: int
    matched: int                # calls that reached device work in the trace
    host_ns: int                # summed call time
    api_share: float | None     # share of the windows' wall time spent in these calls
    call: Distribution          # call duration
    # (pid, tid, calls) per host thread that made these calls, the most calls first
    threads: tuple[tuple[int, int, int], ...] = ()

    def calls_of(self, pid: int, tid: int) -> int:
        """The calls one host thread made."""
        return next((n for p, t, n in self.threads if (p, t) == (pid, tid)), 0)


@dataclass(frozen=True)
class GraphLaunches:
    count: int
    kernels: int
    kernel_ns: int
    host_ns: int
    first_delay: Distribution   # first kernel start - launch end, per graph launch


@dataclass(frozen=True)
class Launches:
    kernel: CallGroup           # one kernel per call
    copies: CallGroup           # memcpy and memset calls
    graphs: GraphLaunches
    delay: Distribution         # kernel start - launch end (in a graph: - the end of the
                                # graph's kernels before it), clipped at 0
    short_kernels: int          # kernels shorter than their launch call (graphs aside)
    unlaunched_kernels: int     # kernels whose launch call is not in the trace


def _group(calls: pd.DataFrame, win_start: np.ndarray, win_end: np.ndarray) -> CallGroup:
    start = calls["ts_ns"].to_numpy(np.int64)
    end = start + calls["host_ns"].to_numpy(np.int64)
    wall = int((win_end - win_start).sum())
    inside = int(union_in_windows(start, end, win_start, win_end).sum())
    # per host thread: the launching thread's API calls (the host rows) are one of these
    per = calls.groupby(["pid", "tid"], sort=False).size().sort_values(
        ascending=False, kind="stable")
    return CallGroup(count=len(calls), matched=int(calls["matched"].sum()),
                     host_ns=int(calls["host_ns"].sum()),
                     api_share=inside / wall if wall else None,
                     call=Distribution.of(calls["host_ns"].to_numpy()),
                     threads=tuple((int(p), int(t), int(n)) for (p, t), n in per.items()))


def launch_figures(trace: Trace, table: pd.DataFrame, win_start: np.ndarray,
                   win_end: np.ndarray) -> Launches:
    """Figures of ``launch_table`` rows; api shares over the wall-clock windows."""
    win_start, win_end = union_blocks(win_start, win_end)
    pop = table["population"]
    graphs = table[pop == "graph"]
    ev = trace.events
    kernel = np.flatnonzero((ev["kind"] == "kernel").to_numpy())

    def at_kernels(col: str) -> np.ndarray:  # taken before converting: a few rows of many
        return ev[col].array.take(kernel).to_numpy(np.float64, na_value=np.nan)

    dur = ev["dur_ns"].to_numpy(np.int64)[kernel]
    launch_dur = at_kernels("launch_dur_ns")
    in_graph = np.isin(ev["launch_id"].to_numpy(np.int64)[kernel], graphs["launch_id"].to_numpy())
    single = ~in_graph & ~np.isnan(launch_dur)
    launched = ~np.isnan(launch_dur)
    delay = at_kernels("launch_delay_ns")[launched]
    g_matched = graphs[graphs["matched"]]
    return Launches(
        kernel=_group(table[pop == "kernel"], win_start, win_end),
        copies=_group(table[pop.isin(["memcpy", "memset"])], win_start, win_end),
        graphs=GraphLaunches(
            count=len(graphs), kernels=int(in_graph.sum()),
            kernel_ns=int(dur[in_graph].sum()),
            host_ns=int(graphs["host_ns"].sum()),
            first_delay=Distribution.of(g_matched["delay_ns"].to_numpy(np.float64))),
        delay=Distribution.of(delay),
        short_kernels=int((dur[single] < launch_dur[single]).sum()),
        unlaunched_kernels=int(np.isnan(launch_dur).sum()),
    )


def _json(s: Summary, top: int) -> dict[str, Any]:
    """The three populations of ``--json``: kernel launches, copies, graph launches."""
    lo = s.launches
    return {
        "launches": {
            "count": lo.kernel.count, "matched": lo.kernel.matched,
            "host_ns": lo.kernel.host_ns, "api_share": lo.kernel.api_share,
            "call_ns": asdict(lo.kernel.call), "delay_ns": asdict(lo.delay),
            "short_kernels": lo.short_kernels,
            "unlaunched_kernels": lo.unlaunched_kernels,
            "threads": [{"pid": p, "tid": t, "calls": n} for p, t, n in lo.kernel.threads],
        },
        "copies": {"count": lo.copies.count, "matched": lo.copies.matched,
                   "host_ns": lo.copies.host_ns, "api_share": lo.copies.api_share,
                   "call_ns": asdict(lo.copies.call)},
        "graphs": {"launches": lo.graphs.count, "kernels": lo.graphs.kernels,
                   "kernel_ns": lo.graphs.kernel_ns, "host_ns": lo.graphs.host_ns,
                   "first_kernel_delay_ns": asdict(lo.graphs.first_delay)},
    }


def _compute(i: Inputs, s: Summary) -> Launches:
    return launch_figures(i.trace, launch_table(i.trace), i.ws, i.we)


SECTION = Section(_json, _compute, keys=("launches", "copies", "graphs"))
