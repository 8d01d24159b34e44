"""The what-if scenarios of the optimization ladder's rungs (``analyses/whatif/engine.py`` runs
them): merging the gates' GEMMs, batching the input projections of all steps into one
GEMM, and removing cross-stream bookkeeping. Each finds what it changes in the trace
alone (``calls.py``: launches, their framework ops, blocks that repeat)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz.algos.categorical import each, per_distinct
from traceviz.analyses.replay.graph import ReplayGraph
from traceviz.analyses.replay.stream_waits import event_roles
from traceviz.analyses.whatif.calls import (
    Launches,
    Merge,
    block_groups,
    launches,
    merged,
    recurrence_step,
    repeats,
    without_host_time,
)
from traceviz.table.launch_apis import STREAM_BOOKKEEPING_OPS, is_capture_query
from traceviz.units import fmt_ns

RECURS_IN = 0.5  # merge_gemms: the repeated block shows in this share of recurrence steps
DEVICE_TIME_RULE = (
    "a merged kernel lasts the sum of the device time of the kernels it replaces "
    "(conservative: merging saves launches and the gaps between kernels; a larger kernel "
    "filling the device better is not modelled)")


def _steps(s: Launches, pos: np.ndarray) -> int:
    return max(len(np.unique(s.step[pos])), 1)


def _concat(parts: list[Merge]) -> Merge:
    return Merge(*(np.concatenate([getattr(m, f) for m in parts])
                   for f in ("pos", "head", "copy")))


def merge_gemms(g: ReplayGraph, _: float) -> tuple[ReplayGraph, list[str]]:
    """Inside one recurrence step, a block of launches holding a GEMM repeated back to
    back (the same kernels, configurations, stream, ops and shapes): the same computation
    on k slices of the weights (an LSTM's gates). The GEMM calls at one place of the k
    copies become one GEMM call."""
    s = launches(g)
    if not s.gemm.any():
        return g, []
    period, iterations = recurrence_step(s)
    has_gemm = np.concatenate([[0], np.cumsum(s.gemm)])
    best: tuple[int, int, np.ndarray, np.ndarray] | None = None
    for q in range(1, period // 2 + 1):  # per block length, a few hundred at most
        first, copies = repeats(s, q)
        ok = (copies * q <= period) & (has_gemm[first + q] > has_gemm[first])
        covered = int((copies[ok] * q).sum())
        # the split shows in most steps of the recurrence, not once by chance
        if covered and ok.sum() >= iterations * RECURS_IN and (
                best is None or covered > best[1]):
            best = (q, covered, first[ok], copies[ok])
    if best is None:
        return g, []
    q, _, first, copies = best
    m = block_groups(s, first, copies, q, gemm_only=False)
    gemms, once = m.calls(s)
    if not once:
        return g, []
    calls, calls_once = m.calls(s, gemm=False)
    steps = _steps(s, m.pos)
    k = int(np.median(copies))
    return merged(g, s, m), [
        f"a recurrence step of {period} launches holds a block of {q} launches repeated "
        f"back to back in {len(first) / max(iterations, 1):.0%} of its {iterations:,} "
        f"steps ({k} copies: the same kernels, shapes and stream, taken to be the same "
        "computation on other weights and independent of each other, as an LSTM's gates "
        f"are); they become one block: {gemms / steps:,.0f} GEMM calls per step become "
        f"{once / steps:,.0f}, and {(calls - gemms) / steps:,.0f} other calls of the copies "
        f"(bias adds) become {(calls_once - once) / steps:,.0f}, each on the copies' data "
        "at once",
        "the launch calls of the calls merged away go, with their framework ops' host time; "
        "the host time between the calls stays (the Python around each op)",
        DEVICE_TIME_RULE,
    ]


def batch_input_gemms(g: ReplayGraph, _: float) -> tuple[ReplayGraph, list[str]]:
    """One GEMM call repeated back to back more times than one recurrence step holds
    (the input projections of every step, issued ahead of the recurrence): they become
    one GEMM call."""
    s = launches(g)
    if not s.gemm.any():
        return g, []
    period, _ = recurrence_step(s)
    size = pd.Series(s.call).map(pd.Series(s.call).value_counts()).to_numpy()
    starts = np.ones(len(s.call), bool)
    starts[1:] = s.call[1:] != s.call[:-1]
    parts = []
    for q in np.unique(size[s.gemm]):  # per launches per GEMM call, few
        first, copies = repeats(s, int(q))
        ok = (s.gemm[first] & starts[first] & (size[first] == q)
              & (copies * q > period))
        if ok.any():
            parts.append(block_groups(s, first[ok], copies[ok], int(q), gemm_only=True))
    m = _concat(parts) if parts else None
    if m is None or not m.calls(s)[1]:
        return g, []
    calls, once = m.calls(s)
    steps = _steps(s, m.pos)
    return merged(g, s, m), [
        f"{calls / steps:,.0f} GEMM calls per step issued back to back as "
        f"{once / steps:,.0f} runs of one call (the same kernel, shapes and stream "
        f"each time; more of them than one recurrence step of {period} launches holds: "
        "the projections of every step's input, which does not depend on the recurrence) "
        "become one GEMM call per run, issued where the run's first was",
        "the launch calls of the calls merged away go, with their framework ops' host "
        "time; work that waited for any of them waits for the merged one",
        DEVICE_TIME_RULE,
    ]


def drop_stream_sync(g: ReplayGraph, _: float) -> tuple[ReplayGraph, list[str]]:
    """Cross-stream bookkeeping gone: event records, stream waits and event queries (with
    a capture-status query right before one), ops that only mark tensors as used on
    another stream, and the host time that issued them; every device's work on one
    stream in launch order."""
    ev = g.trace.events
    names = ev["name"].take(g.h_rows)
    role = event_roles(names)
    book = role != ""
    before = np.zeros(len(book), bool)
    before[:-1] = book[1:] & (g.h_chain[1:] == g.h_chain[:-1])
    book |= per_distinct(names, each(is_capture_query)).astype(bool) & before
    kind = ev["kind"].to_numpy()
    host = np.flatnonzero(np.isin(kind, ("op", "runtime")) & (ev["device"].to_numpy() < 0))
    op_book = host[(kind[host] == "op") & per_distinct(
        ev["name"].take(host), lambda c: np.isin(np.asarray(c, dtype=object),
                                                 list(STREAM_BOOKKEEPING_OPS)))]
    live = ~g.d_removed
    streams = pd.Series(g.d_stream[live]).groupby(g.d_device[live]).nunique()
    several = bool((streams > 1).any())
    if not book.any() and not len(op_book) and not several:
        return g, []
    changed = g.with_changes(h_dur=np.where(book, 0, g.h_dur))
    cut = _issuing_time(g, ev, host, g.h_rows[book], op_book)
    changed = without_host_time(changed, *cut)
    steps = max(len(np.unique(ev["step"].to_numpy()[g.h_rows][book])), 1)
    notes = [
        f"{book.sum() / steps:,.0f} event calls per step "
        f"({', '.join(sorted(set(role[role != ''])))}, with the capture-status queries right "
        f"before them) and {len(op_book) / steps:,.0f} "
        f"{'/'.join(sorted(STREAM_BOOKKEEPING_OPS))} ops go, with the host time from the "
        "end of the thread's previous op or call to each (the code that issues them, "
        f"outside any framework op): {fmt_ns((cut[2] - cut[1]).sum() / steps)} of recorded "
        "host time per step",
    ]
    if several:
        changed = _one_stream(changed)
        notes.append("every device's work runs on one stream in launch order: waits on "
                     "other streams become program order, and streams no longer overlap")
    return changed, notes


def _issuing_time(g: ReplayGraph, ev: pd.DataFrame, host: np.ndarray, calls: np.ndarray,
                  ops: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(chain, start, end) of each bookkeeping call or op from the end of the last op or
    call of its thread before it (nothing where an op encloses it)."""
    pid, tid = ev["pid"].to_numpy(np.int64), ev["tid"].to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    order = host[np.lexsort((ts[host], tid[host], pid[host]))]
    thread = pd.DataFrame({"pid": pid[order], "tid": tid[order]})
    reach = pd.Series(end[order]).groupby([thread["pid"], thread["tid"]]).cummax()
    reach = reach.groupby([thread["pid"], thread["tid"]]).shift(1)  # before each row
    pick = np.concatenate([calls, ops])
    r = pd.Series(reach.to_numpy(), index=order).loc[pick].to_numpy(np.float64)
    start = np.where(np.isnan(r), ts[pick], np.minimum(r, ts[pick])).astype(np.int64)
    chains = pd.DataFrame({"pid": pid[g.h_rows], "tid": tid[g.h_rows], "chain": g.h_chain}
                          ).drop_duplicates(["pid", "tid"])
    chain = pd.DataFrame({"pid": pid[pick], "tid": tid[pick]}).merge(
        chains, how="left")["chain"].to_numpy(np.float64)
    ok = ~np.isnan(chain)
    return chain[ok].astype(np.int64), start[ok], end[pick][ok]


def _one_stream(g: ReplayGraph) -> ReplayGraph:
    """Device rows per device in launch order on one stream, without cross-stream waits."""
    launch_ts = np.where(g.d_launch >= 0, g.h_ts[np.maximum(g.d_launch, 0)], g.d_ts)
    order = np.lexsort((g.d_ts, launch_ts, g.d_device))
    inv = np.empty_like(order)
    inv[order] = np.arange(len(order))
    h_await = np.where(g.h_await >= 0, inv[np.maximum(g.h_await, 0)], -1)
    return g.with_changes(
        d_rows=g.d_rows[order], d_device=g.d_device[order], d_ts=g.d_ts[order],
        d_stream=pd.factorize(g.d_device[order])[0].astype(np.int64),
        d_dur=g.d_dur[order], d_launch=g.d_launch[order],
        d_from_start=g.d_from_start[order], d_offset=g.d_offset[order],
        d_dep=np.full(len(order), -1, np.int64), d_dep_lat=np.zeros(len(order), np.int64),
        d_removed=g.d_removed[order], d_gap=g.d_gap[order], h_await=h_await,
        d_unseen=None if g.d_unseen is None else g.d_unseen[order])
