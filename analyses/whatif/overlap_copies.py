"""The ``overlap_copies`` what-if scenario: host-to-device copies that no kernel overlaps
(``analyses/summary/exposed_copies.py``) are made one step ahead, beside the compute of the step
before (tf.data's ``prefetch_to_device``, a PyTorch prefetcher on a side stream with pinned
memory, ``flax.jax_utils.prefetch_to_device``), so the work that waited for them does not.

The model: a copy engine moves the batch while the kernels of the step before run, so a
copy hides behind as much compute as that step has; in a steady run the step before
computes what this one does, so each copy's room is its own window's kernel time (shared
by the copies of that window in order). The part of a copy longer than its room stays on
the path. The copy's launch keeps its place: what makes the host late to launch it (the
input pipeline) is ``overlap_input``'s to remove.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz.analyses.replay.graph import ReplayGraph
from traceviz.analyses.summary.exposed_copies import exposed_copies
from traceviz.analyses.whatif.given import Given
from traceviz.analyses.work import work_rows
from traceviz.units import fmt_ns, plural


def overlap_copies(g: ReplayGraph, _: float, given: Given) -> tuple[ReplayGraph, list[str]]:
    trace = g.trace
    work = work_rows(trace)
    c = exposed_copies(trace, work, given.windows).rows
    c = c[c["direction"] == "HtoD"]
    pos = pd.Index(g.d_rows).get_indexer(c["row"].to_numpy())
    c = c[pos >= 0].assign(pos=pos[pos >= 0])
    if c.empty:
        return g, []
    c = c[~g.d_removed[c["pos"].to_numpy()]]
    if c.empty:
        return g, []
    # each window's compute is shared by its copies in recorded order
    c = c.sort_values(["device", "step", "pos"], kind="stable")
    dur = g.d_dur[c["pos"].to_numpy()]
    before = pd.Series(dur).groupby([c["device"].to_numpy(), c["step"].to_numpy()]).cumsum() \
        .to_numpy(np.int64) - dur
    hidden = np.clip(c["compute_ns"].to_numpy(np.int64) - before, 0, dur)
    if not hidden.any():
        return g, []
    pos = c["pos"].to_numpy()
    d_dur = g.d_dur.copy()
    d_dur[pos] = dur - hidden
    changes, held = _held_calls(g, pos[hidden > 0], hidden[hidden > 0])
    _release_waiters(g, pos[hidden > 0], hidden[hidden > 0], changes)
    left = int((dur - hidden).sum())
    text = [f"{plural(len(c), 'host-to-device copy', 'host-to-device copies')} that no "
            f"kernel overlapped ({fmt_ns(int(dur.sum()))}) run one step ahead, beside the "
            f"kernels of the step before (prefetched to the device on a copy engine): "
            f"{fmt_ns(int(hidden.sum()))} of them leave the step's path",
            "the step before computes as long as the copy's own step (a steady run); the "
            "copy's launch, and the host time before it, keep their place",
            "the host work after a copy waited for it (the step's ops consume the batch): "
            "a thread that stood idle when the copy (or its held call) ended, and every "
            "thread that started after it, starts that much sooner"]
    if held:
        text.append(f"the {plural(held, 'host call')} the copies held until they ended "
                    "(a pageable copy's own call returns as its last chunk is staged; a call "
                    "of another thread the driver held) return when the shortened copies end")
    if left:
        text.append(f"{fmt_ns(left)} of copy time is longer than the compute beside it "
                    "and stays")
    return g.with_changes(d_dur=d_dur, **changes), text


# a host call ending this close to a copy's end, after lasting longer, waited for it
HELD_SLACK_NS = 200_000


def _held_calls(g: ReplayGraph, pos: np.ndarray, hidden: np.ndarray
                ) -> tuple[dict[str, np.ndarray], int]:
    """The host calls that returned when a copy of ``pos`` ended, made to wait for it
    (``h_await``, ``h_tail``), so that they return when it does in the replay: the copy's
    own launch call, or a call of its process started during it, that lasted more than
    ``HELD_SLACK_NS`` and ended within that of the copy's recorded end (before it too: a
    pageable copy's call returns once its last chunk is staged). A call the graph already
    has waiting for another row keeps it. A copy whose own call waits for it is ready
    from the call's start, as the graph's synchronous copies are (else it would wait for
    itself); a row another held call launched and the graph places from that call's
    start (it ran before the call returned) is ready what the copy lost sooner. Returns
    the changed arrays and the number of calls."""
    h_await, h_tail, h_dur = g.h_await.copy(), g.h_tail.copy(), g.h_dur.copy()
    d_from_start, d_offset = g.d_from_start.copy(), g.d_offset.copy()
    changes = {"h_await": h_await, "h_tail": h_tail, "h_dur": h_dur,
               "d_from_start": d_from_start, "d_offset": d_offset}
    if not len(pos) or not len(g.h_ts):
        return changes, 0
    c_start, c_end = g.d_ts[pos], g.d_ts[pos] + g.d_dur[pos]
    order = np.argsort(c_end, kind="stable")
    ends = c_end[order]
    call_end = g.h_end_rec
    k = np.searchsorted(ends, call_end)
    lo, hi = np.clip(k - 1, 0, len(ends) - 1), np.clip(k, 0, len(ends) - 1)
    j = order[np.where(np.abs(call_end - ends[lo]) <= np.abs(call_end - ends[hi]), lo, hi)]
    pid = g.trace.events["pid"].to_numpy(np.int64)[g.h_rows]
    launch = g.d_launch[pos[j]]
    own = np.arange(len(g.h_ts)) == launch
    same = (launch < 0) | (pid == pid[np.maximum(launch, 0)])
    held = (np.abs(call_end - c_end[j]) <= HELD_SLACK_NS) & same \
        & (call_end - g.h_ts > HELD_SLACK_NS) & (own | (g.h_ts >= c_start[j])) \
        & ((h_await < 0) | (h_await == pos[j]))
    tail = np.maximum(call_end - c_end[j], 0)
    h_await[held] = pos[j][held]
    h_tail[held] = tail[held]
    h_dur[held] = np.minimum(call_end - g.h_ts, tail)[held]
    rows = pos[j][held & own]
    d_offset[rows] = g.d_ts[rows] - g.h_ts[g.d_launch[rows]]
    d_from_start[rows] = True
    lost = np.zeros(len(g.h_ts), np.int64)
    lost[held & ~own] = hidden[j][held & ~own]
    li = np.maximum(g.d_launch, 0)
    early = (g.d_launch >= 0) & g.d_from_start & (lost[li] > 0)
    d_offset[early] = np.maximum(g.d_offset[early] - lost[li][early], 0)
    return changes, int(held.sum())


def _release_waiters(g: ReplayGraph, pos: np.ndarray, hidden: np.ndarray,
                     changes: dict[str, np.ndarray]) -> None:
    """The host work a copy released starts sooner by what the copy lost: per process, the
    release is the copy's recorded end, or its own held call's end where that came first
    (the thread that consumes the batch is told by the call); a thread's first call after
    a release starts that much sooner (the graph anchors a thread's first call where it
    was recorded: nothing else would move it), and a gap of a thread idle across a
    release shrinks by it, never below what the thread took after the release. Several
    releases add up."""
    if not len(pos) or not len(g.h_ts):
        return
    h_await = changes["h_await"]
    pid = g.trace.events["pid"].to_numpy(np.int64)[g.h_rows]
    launch = g.d_launch[pos]
    end = g.d_ts[pos] + g.d_dur[pos]
    own_end = np.full(len(pos), np.iinfo(np.int64).max)
    own = (launch >= 0) & (h_await[np.maximum(launch, 0)] == pos)
    own_end[own] = g.h_end_rec[launch[own]]
    release = np.minimum(end, own_end)
    copy_pid = np.where(launch >= 0, pid[np.maximum(launch, 0)], -1)
    h_ts, h_gap = changes.setdefault("h_ts", g.h_ts.copy()), \
        changes.setdefault("h_gap", g.h_gap.copy())
    for p in np.unique(copy_pid):  # per process, one or few
        mine = (copy_pid == p) | (copy_pid < 0)
        order = np.argsort(release[mine], kind="stable")
        r, lost = release[mine][order], np.cumsum(hidden[mine][order])
        nodes = np.flatnonzero(pid == p) if p >= 0 else np.arange(len(g.h_ts))
        # lost time released up to t: sum of the losses of the releases at or before t
        k = np.searchsorted(r, g.h_ts[nodes], side="right") - 1
        up_to = np.where(k >= 0, lost[np.maximum(k, 0)], 0)
        first = g.h_first[nodes]
        h_ts[nodes[first]] -= up_to[first]
        prev_end = g.h_ts[nodes] - g.h_gap[nodes]
        k0 = np.searchsorted(r, prev_end, side="right") - 1
        before = np.where(k0 >= 0, lost[np.maximum(k0, 0)], 0)
        spans = ~first & (k >= 0) & (r[np.maximum(k, 0)] > prev_end)
        idle_before = r[np.maximum(k, 0)] - prev_end
        cut = np.minimum(up_to - before, idle_before)
        h_gap[nodes[spans]] -= cut[spans]
