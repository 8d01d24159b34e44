"""Advice on the device left idle by what lies outside the step's work (theme ``idle``):
long gaps inside the windows (steps waiting for their data: ``inputs.py``).
``rules.py`` registers them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from traceviz.algos.intervals import union_blocks
from traceviz.analyses.advice.finding import Finding
from traceviz.analyses.advice.host_causes import label
from traceviz.analyses.work import work_rows
from traceviz.units import fmt_ns, fmt_pct, plural

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context

LONG_GAP_NS = 1_000_000
LONG_GAPS_SHARE = 0.10


def long_gaps(ctx: Context) -> Finding | None:
    """Idle stretches of >= 1 ms inside the windows, together >= 10% of the span."""
    work = work_rows(ctx.trace)
    windows = ctx.windows
    total, count, longest = 0, 0, 0
    for device, w in windows.items():
        rows = work[work["device"] == device]
        s = rows["ts_ns"].to_numpy(np.int64)
        bs, be = union_blocks(s, s + rows["dur_ns"].to_numpy(np.int64))
        ws, we = w["start_ns"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64)
        gs, ge = _idle_in(bs, be, ws, we)
        length = ge - gs
        big = length >= LONG_GAP_NS
        total += int(length[big].sum())
        count += int(big.sum())
        longest = max(longest, int(length.max()) if len(length) else 0)
    span = ctx.summary.span_ns
    if not span or total < LONG_GAPS_SHARE * span:
        return None
    if ctx.bound.by in ("host", "startup", "input"):
        return None  # the verdict's own finding says what the host does in the gaps
    s = ctx.summary
    cause = "dependencies or synchronization (launched work waited)"
    if (s.host_wait_ns or 0) >= (s.queued_idle_ns or 0):
        w = s.host_wait_split
        top = max(w.causes.items(), key=lambda kv: kv[1])[0] if w is not None else None
        cause = "the host (nothing launched was pending)" + (
            f", mostly {label(ctx, top)}" if top else "")
    if s.cpu_trace:  # no device: the gaps are the host threads' time outside CPU ops
        cause = "the host threads' work outside the CPU ops (Python, the framework, " \
            "anything unrecorded)"
    return Finding(
        "long_gaps", "Long gaps between the CPU ops on the host threads" if s.cpu_trace
        else "Long idle gaps on the device",
        [f"{plural(count, 'gap')} of >= {fmt_ns(LONG_GAP_NS)}, {fmt_ns(total)} in all "
         f"({fmt_pct(total / span)} of the span), longest {fmt_ns(longest)}",
         f"most gap time goes to {cause}" if s.cpu_trace
         else f"most idle time waits for {cause}"],
        "look at what the host does in the gaps (traceviz analyze --plot, the phases): "
        + ("data loading, logging, checkpointing" if ctx.run.mode == "training" else
           # no optimizer, no checkpoint: a forward's own host work
           "preparing inputs, post-processing outputs, logging")
        + (" or a synchronizing call; overlap it with device work" if not s.cpu_trace
           else ": move it out of the step or onto another thread"),
        None, None, {"count": count, "total_ns": total, "longest_ns": longest})


def _idle_in(bs: np.ndarray, be: np.ndarray, ws: np.ndarray, we: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """The idle intervals (complement of the busy blocks) clipped to the windows."""
    gap_s = np.concatenate([[np.iinfo(np.int64).min], be])
    gap_e = np.concatenate([bs, [np.iinfo(np.int64).max]])
    out_s, out_e = [], []
    for a, b in zip(ws, we, strict=True):  # per window, few
        s = np.maximum(gap_s, a)
        e = np.minimum(gap_e, b)
        keep = e > s
        out_s.append(s[keep])
        out_e.append(e[keep])
    if not out_s:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out_s), np.concatenate(out_e)
