"""Launch overhead: the host calls that put work on a device, in three populations.

- kernel launches (``cudaLaunchKernel``, ``hipModuleLaunchKernel``...): one kernel each;
- graph launches (``cudaGraphLaunch``, ``hipGraphLaunch``): one call, many kernels. Their
  kernels are reported apart (count, time, first-kernel delay) and kept out of the
  launch-delay and short-kernel figures, which are about one launch per kernel;
- copy and set calls (``cudaMemcpyAsync``, ``hipMemsetAsync``...).

Calls and device rows are joined by ``launch_id``, the one link the normalizer writes
(process-aware: nsys numbers correlation ids per process).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceviz.analyses.stats import Distribution
from traceviz.categorical import each, per_distinct
from traceviz.intervals import union_blocks, union_in_windows
from traceviz.launch_apis import base_api_name, is_graph_launch, launch_kind
from traceviz.schema import DEVICE_KINDS
from traceviz.trace import Trace


def launch_table(trace: Trace) -> pd.DataFrame:
    """One row per launch call with the device work it launched (if any).

    ``population`` is ``kernel``, ``graph``, ``memcpy`` or ``memset``; a graph launch
    that ran many kernels is one row: ``device_count`` rows, ``device_ns`` their summed
    time, ``delay_ns`` to the first of them.
    """
    ev = trace.events
    calls = ev[(ev["kind"] == "runtime") & (ev["launch_id"] >= 0)]
    dev = ev[ev["kind"].isin(DEVICE_KINDS) & (ev["launch_id"] >= 0)]
    g = dev.sort_values("ts_ns", kind="stable").groupby("launch_id")
    agg = pd.DataFrame({
        "device_count": g.size(),
        "device_ns": g["dur_ns"].sum(),
        "delay_ns": g["launch_delay_ns"].min(),
        "first_kernel": g["name"].first().astype(str),
        "device": g["device"].first(),
    })
    api = per_distinct(calls["name"], each(base_api_name))
    population = np.where(per_distinct(calls["name"], each(is_graph_launch)).astype(bool), "graph",
                          per_distinct(calls["name"], each(launch_kind)))
    out = pd.DataFrame({
        "launch_id": calls["launch_id"].to_numpy(),
        "api": api,
        "population": population,
        "ts_ns": calls["ts_ns"].to_numpy(),
        "host_ns": calls["dur_ns"].to_numpy(),
        "pid": calls["pid"].to_numpy(),
        "tid": calls["tid"].to_numpy(),
        "step": calls["step"].to_numpy(),
        "correlation": calls["correlation"].to_numpy(),
    })
    out = out.merge(agg, left_on="launch_id", right_index=True, how="left")
    out["device_count"] = out["device_count"].fillna(0).astype(np.int64)
    out["device_ns"] = out["device_ns"].fillna(0).astype(np.int64)
    out["matched"] = out["device_count"] > 0
    return out.reset_index(drop=True)


@dataclass(frozen=True)
class CallGroup:
    """One population of launch calls."""

    count: int
    matched: int                # calls that reached device work in the trace
    host_ns: int                # summed call time
    api_share: float | None     # share of the windows' wall time spent in these calls
    call: Distribution          # call duration


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
    delay: Distribution         # kernel start - launch end, clipped at 0 (graphs aside)
    short_kernels: int          # kernels shorter than their launch call (graphs aside)
    unlaunched_kernels: int     # kernels whose launch call is not in the trace


def _group(calls: pd.DataFrame, win_start: np.ndarray, win_end: np.ndarray) -> CallGroup:
    start = calls["ts_ns"].to_numpy(np.int64)
    end = start + calls["host_ns"].to_numpy(np.int64)
    wall = int((win_end - win_start).sum())
    inside = int(union_in_windows(start, end, win_start, win_end).sum())
    return CallGroup(count=len(calls), matched=int(calls["matched"].sum()),
                     host_ns=int(calls["host_ns"].sum()),
                     api_share=inside / wall if wall else None,
                     call=Distribution.of(calls["host_ns"].to_numpy()))


def launch_figures(trace: Trace, table: pd.DataFrame, win_start: np.ndarray,
                   win_end: np.ndarray) -> Launches:
    """Figures of ``launch_table`` rows; api shares over the wall-clock windows."""
    win_start, win_end = union_blocks(win_start, win_end)
    pop = table["population"]
    graphs = table[pop == "graph"]
    kernels = trace.kernel_events
    graph_ids = graphs["launch_id"].to_numpy()
    in_graph = kernels["launch_id"].isin(graph_ids).to_numpy()
    single = kernels[~in_graph & kernels["launch_dur_ns"].notna().to_numpy()]
    g_matched = graphs[graphs["matched"]]
    return Launches(
        kernel=_group(table[pop == "kernel"], win_start, win_end),
        copies=_group(table[pop.isin(["memcpy", "memset"])], win_start, win_end),
        graphs=GraphLaunches(
            count=len(graphs), kernels=int(in_graph.sum()),
            kernel_ns=int(kernels["dur_ns"].to_numpy()[in_graph].sum()),
            host_ns=int(graphs["host_ns"].sum()),
            first_delay=Distribution.of(g_matched["delay_ns"].to_numpy(np.float64))),
        delay=Distribution.of(single["launch_delay_ns"].to_numpy(np.float64)),
        short_kernels=int((single["dur_ns"].to_numpy()
                           < single["launch_dur_ns"].to_numpy(np.int64)).sum()),
        unlaunched_kernels=int(kernels["launch_dur_ns"].isna().sum()),
    )
