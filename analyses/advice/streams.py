"""Advice on streams: work spread over several streams that never runs two at once."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.analyses.advice.finding import Finding
from traceviz.analyses.work import work_rows
from traceviz.table.launch_apis import event_role
from traceviz.table.schema import is_in
from traceviz.units import fmt_ns, fmt_pct

if TYPE_CHECKING:  # the rules take it; advising.py makes it from the rules' registry
    from traceviz.analyses.advice.advising import Context


def streams_never_overlap(ctx: Context) -> Finding | None:
    """A device ran kernels on two or more streams, and (almost) never two of them at once
    (``analyses/summary/stream_overlap.py``): the streams cost event records and waits and bought
    no concurrency. A stream of copies alone (TF's input and output copy streams) is no
    compute stream that failed to overlap: it is not counted."""
    s = ctx.summary
    idle = [o for o in s.stream_overlap if o.never_overlaps]
    if not idle:
        return None
    per = max(s.steps, 1)
    unit = "per step" if s.steps else "in the trace"
    evidence = []
    for o in idle:
        d = next(d for d in s.devices if d.device == o.device)
        ran = d.streams[d.streams["stream"].isin(o.kernel_stream_ids)]
        counts = ", ".join(f"{int(r.work_count / per):,}" for r in
                           ran.sort_values("busy_ns", ascending=False)
                           .itertuples(index=False))
        copies = o.streams - o.kernel_streams
        evidence.append(
            f"device {o.device}: {o.kernel_streams} streams ran kernels ({counts} device ops "
            f"{unit}), {fmt_ns(o.kernel_multi_ns / per)} {unit} with two or more of them busy "
            f"({fmt_pct(o.kernel_overlap_fraction)} of its busy time): one stream at a time"
            + (f"; {copies} more held copies alone (not counted)" if copies else ""))
    calls: dict[str, int] = {}
    host = 0
    if s.host is not None:
        for r in s.host.apis.itertuples(index=False):
            role = event_role(str(r.name))
            if role is not None:
                calls[role] = calls.get(role, 0) + int(r.calls)
                host += int(r.total_ns)
    if calls:
        evidence.append("cross-stream bookkeeping on the launching thread: " + ", ".join(
            f"{n / per:,.0f} event {role} calls" for role, n in sorted(calls.items()))
            + f" {unit}, {fmt_ns(host / per)} of API time")
    main = s.host.main if s.host is not None else None
    if main is not None and s.launch_bound_fraction and s.launch_bound_fraction > 0.25:
        evidence.append(f"the device waits for the host {fmt_pct(s.launch_bound_fraction)} of "
                        "the span: each stream's work is launched only after the previous "
                        "stream's, so there is nothing queued to run beside it")
    title = "Work on several streams never overlaps" if not any(o.kernel_multi_ns for o in idle) \
        else "Work on several streams (almost) never overlaps"
    comm = _collective_streams(ctx, [o.device for o in idle])
    if comm:
        # a collective library's own stream is not the user's to merge: what it lacks is
        # computation issued beside its collectives
        evidence.append(f"{comm} of these streams {'runs' if comm == 1 else 'run'} only "
                        "collectives: the communication library's own, which the next "
                        "computation waits for")
    action = ("the collectives run on their own stream and the computation waits for each "
              "before it goes on: give them independent work to overlap (the communication "
              "finding's remedies), not fewer streams" if comm else
              "the streams buy nothing here: launch the work from one stream (the event "
              "records and waits go), or give the streams work that is ready together — "
              "enough queued (fewer, larger kernels; a CUDA graph of the step) for the "
              "device to run them side by side")
    return Finding(
        "streams_never_overlap", title, evidence, action,
        None, None, {"devices": [o.to_dict() for o in idle], "collective_streams": comm})


def _collective_streams(ctx: Context, devices: list[int]) -> int:
    """How many streams of ``devices`` ran collectives and nothing else (NCCL's)."""
    work = work_rows(ctx.trace)
    work = work[np.isin(work["device"].to_numpy(), devices)]
    if work.empty:
        return 0
    comm = is_in(work["category"], "communication")
    key = work["device"].to_numpy(np.int64) * (1 << 32) + work["stream"].to_numpy(np.int64)
    only = pd.Series(comm).groupby(key).all()
    return int(only.sum())
