"""Launch overhead: launch calls, their host time, launch delay and short kernels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from traceviz.analyses.stats import Distribution

from traceviz.launch_apis import base_api_name, launch_kind
from traceviz.schema import DEVICE_KINDS
from traceviz.trace import Trace


def launch_calls(trace: Trace) -> pd.DataFrame:
    """Runtime rows that are launch API calls (kernel, memcpy or memset launches)."""
    ev = trace.events
    rt = ev[ev["kind"] == "runtime"]
    names = rt["name"].astype("category")
    known = np.array(
        [launch_kind(str(c)) is not None for c in names.cat.categories] + [False], dtype=bool
    )
    return rt[known[names.cat.codes.to_numpy()]]


def _base_names(names: pd.Series) -> np.ndarray:
    cat = names.astype("category")
    lookup = np.array([base_api_name(str(c)) for c in cat.cat.categories] + [""], dtype=object)
    return lookup[cat.cat.codes.to_numpy()]


def launch_table(trace: Trace) -> pd.DataFrame:
    """One row per launch call with the device work it launched (if any).

    A graph launch that ran many kernels is one row: ``device_count`` kernels,
    ``device_ns`` their summed time, ``delay_ns`` to the first of them.
    """
    calls = launch_calls(trace)
    ev = trace.events
    dev = ev[ev["kind"].isin(DEVICE_KINDS) & ev["launch_ts_ns"].notna()]
    dev = dev[dev["correlation"] >= 0]
    g = dev.groupby("correlation")
    agg = pd.DataFrame({
        "device_count": g.size(),
        "device_ns": g["dur_ns"].sum(),
        "delay_ns": g["launch_delay_ns"].min(),
        "first_kernel": g["name"].first().astype(str),
        "device": g["device"].first(),
    })
    out = pd.DataFrame({
        "api": _base_names(calls["name"]),
        "ts_ns": calls["ts_ns"].to_numpy(),
        "host_ns": calls["dur_ns"].to_numpy(),
        "pid": calls["pid"].to_numpy(),
        "tid": calls["tid"].to_numpy(),
        "step": calls["step"].to_numpy(),
        "correlation": calls["correlation"].to_numpy(),
    })
    out = out.merge(agg, left_on="correlation", right_index=True, how="left")
    out["device_count"] = out["device_count"].fillna(0).astype(np.int64)
    out["matched"] = out["device_count"] > 0
    return out.reset_index(drop=True)


@dataclass(frozen=True)
class LaunchOverhead:
    count: int
    matched: int
    host_ns: int                # summed launch call time
    api_share: float | None     # host_ns / span
    call: Distribution          # launch call duration
    delay: Distribution         # kernel start - launch end, clipped at 0
    short_kernels: int          # kernels shorter than their launch call
    unlaunched_kernels: int     # kernels whose launch call is not in the trace


def launch_overhead(trace: Trace, span_ns: int) -> LaunchOverhead:
    calls = launch_calls(trace)
    kernels = trace.kernels
    # a call is matched when a device row was linked to it; (correlation, start) names
    # the call even where correlation ids repeat across processes (nsys)
    dev = trace.device_rows
    dev = dev[dev["launch_ts_ns"].notna()]
    linked_calls = pd.MultiIndex.from_arrays([dev["correlation"].to_numpy(np.int64),
                                              dev["launch_ts_ns"].to_numpy(np.int64)])
    matched = int(pd.MultiIndex.from_arrays([calls["correlation"].to_numpy(np.int64),
                                             calls["ts_ns"].to_numpy(np.int64)])
                  .isin(linked_calls).sum())
    host_ns = int(calls["dur_ns"].sum())
    linked = kernels[kernels["launch_dur_ns"].notna()]
    short = int((linked["dur_ns"].to_numpy() < linked["launch_dur_ns"].to_numpy(np.int64)).sum())
    return LaunchOverhead(
        count=len(calls),
        matched=matched,
        host_ns=host_ns,
        api_share=host_ns / span_ns if span_ns else None,
        call=Distribution.of(calls["dur_ns"].to_numpy()),
        delay=Distribution.of(linked["launch_delay_ns"].to_numpy(np.float64)),
        short_kernels=short,
        unlaunched_kernels=len(kernels) - len(linked),
    )
