"""What a host thread was doing while the device waited for it: its rows (runtime and OS
calls, framework ops, user ranges, CPU samples) as arrays, which thread the device waited
for, and the pieces of a wait cut where the thread's rows begin and end, each given the
cause of the first row kind holding it (``waits.py`` says the order and what each means).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.algos.categorical import categorical_of, groups
from traceviz.algos.intervals import (
    covering,
    elementary,
    innermost_enclosing,
    union_blocks,
)
from traceviz.table.host_calls import API_KINDS, OS_KINDS, api_kind, os_kind
from traceviz.table.launch_apis import base_api_name
from traceviz.table.schema import is_in

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

CAUSES = ("startup", "input", *API_KINDS, *OS_KINDS, "ops", "gaps", "untraced")
# an untraced stretch shorter than this, between recorded calls and ops, is the host
# issuing work (Python and the framework between ops); a longer one is host work of its own
LONG_UNTRACED_NS = 1_000_000
SAMPLE_PREFIX = "[sample] "  # a CPU sample row's name: the function it caught
THREAD_CAUSES = (*API_KINDS, *OS_KINDS, "ops")  # what a thread's rows can say
_EMPTY = np.zeros(0, np.int64)


@dataclass(frozen=True)
class ThreadRows:
    """One host thread's rows the split reads: start, end, cause code (-1: a user
    range), name code; and its CPU samples (time, name code), where recorded."""

    start: np.ndarray
    end: np.ndarray
    cause: np.ndarray
    name: np.ndarray
    sample_ts: np.ndarray = field(default_factory=lambda: _EMPTY)
    sample_name: np.ndarray = field(default_factory=lambda: _EMPTY)


def thread_rows(trace: Trace) -> tuple[dict[tuple[int, int], ThreadRows], pd.Index]:
    """Per (pid, tid): its runtime, OS, op and user-range rows, each with its cause code
    (an index into ``THREAD_CAUSES``; -1: a user range) and its name's code into the
    returned names (a call's name without nsys' version suffix)."""
    ev = trace.events
    host = ev["device"].to_numpy() < 0
    kinds = {k: is_in(ev["kind"], k) & host for k in ("runtime", "os", "op", "annotation")}
    idx = np.flatnonzero(kinds["runtime"] | kinds["os"] | kinds["op"] | kinds["annotation"])
    names = categorical_of(ev["name"])
    labels = [str(n) for n in names.categories]
    api = np.array([THREAD_CAUSES.index(api_kind(n)) for n in labels], dtype=np.int64)
    oss = np.array([THREAD_CAUSES.index(os_kind(n)) for n in labels], dtype=np.int64)
    ncode = names.codes[idx].astype(np.int64)
    safe = np.maximum(ncode, 0)
    cause = np.full(len(idx), -1, dtype=np.int64)
    for kind, by_name in (("runtime", api), ("os", oss)):
        mine = kinds[kind][idx]
        cause[mine] = by_name[safe[mine]]
    cause[kinds["op"][idx]] = THREAD_CAUSES.index("ops")
    shown_codes, shown = pd.factorize(pd.Index(
        [base_api_name(n) if n.startswith(("cu", "hip")) else
         n.removeprefix(SAMPLE_PREFIX) for n in labels]))
    ncode = np.where(ncode >= 0, np.asarray(shown_codes)[safe] if len(labels) else -1, -1)
    ts = ev["ts_ns"].to_numpy(np.int64)[idx]
    end = ts + ev["dur_ns"].to_numpy(np.int64)[idx]
    pid, tid = ev["pid"].to_numpy(np.int64)[idx], ev["tid"].to_numpy(np.int64)[idx]
    out = {}
    for _, g in groups(pid * (1 << 32) + (tid & 0xFFFFFFFF)):
        out[(int(pid[g[0]]), int(tid[g[0]]))] = ThreadRows(ts[g], end[g], cause[g], ncode[g])
    sampled = np.flatnonzero(is_in(ev["kind"], "sample") & host)
    if len(sampled):
        s_pid = ev["pid"].to_numpy(np.int64)[sampled]
        s_tid = ev["tid"].to_numpy(np.int64)[sampled]
        s_ts = ev["ts_ns"].to_numpy(np.int64)[sampled]
        s_name = np.asarray(shown_codes)[names.codes[sampled]]
        for _, g in groups(s_pid * (1 << 32) + (s_tid & 0xFFFFFFFF)):
            key = (int(s_pid[g[0]]), int(s_tid[g[0]]))
            th = out.get(key) or ThreadRows(_EMPTY, _EMPTY, _EMPTY, _EMPTY)
            order = g[np.argsort(s_ts[g], kind="stable")]
            out[key] = replace(th, sample_ts=s_ts[order], sample_name=s_name[order])
    return out, pd.Index(shown)


def launch_threads(trace: Trace, work: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per work row: pid and tid of its launch call (-1: not in the trace)."""
    ev = trace.events
    lid = ev["launch_id"].to_numpy(np.int64)
    rt = np.flatnonzero(is_in(ev["kind"], "runtime") & (lid >= 0))
    calls = pd.DataFrame({"pid": ev["pid"].to_numpy(np.int64)[rt],
                          "tid": ev["tid"].to_numpy(np.int64)[rt]},
                         index=lid[rt])
    calls = calls[~calls.index.duplicated(keep="first")]
    at = calls.index.get_indexer(work["launch_id"].to_numpy(np.int64))
    pid = np.append(calls["pid"].to_numpy(np.int64), -1)[at]
    tid = np.append(calls["tid"].to_numpy(np.int64), -1)[at]
    return pid, tid


def waiting_threads(begin: np.ndarray, pid: np.ndarray, tid: np.ndarray,
                     wait_end: np.ndarray, fallback: tuple[int, int]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Per host-wait block (by its end): the thread that launched the first work that
    begins at or after its end (else the last work before it; else ``fallback``)."""
    known = np.flatnonzero(pid >= 0)
    if not len(known):
        n = len(wait_end)
        return np.full(n, fallback[0]), np.full(n, fallback[1])
    order = known[np.argsort(begin[known], kind="stable")]
    j = np.minimum(np.searchsorted(begin[order], wait_end, side="left"), len(order) - 1)
    return pid[order][j], tid[order][j]


def short_untraced(s: np.ndarray, e: np.ndarray, cause: np.ndarray) -> None:
    """Untraced pieces in stretches (touching pieces, in time order) shorter than
    ``LONG_UNTRACED_NS`` become ``gaps``, in place."""
    untraced = len(CAUSES) - 1
    idx = np.flatnonzero(cause == untraced)
    if not len(idx):
        return
    idx = idx[np.argsort(s[idx], kind="stable")]
    new = np.r_[True, s[idx][1:] != e[idx][:-1]]
    run = np.cumsum(new) - 1
    length = np.bincount(run, weights=e[idx] - s[idx])
    cause[idx[length[run] < LONG_UNTRACED_NS]] = CAUSES.index("gaps")


def caught_by_samples(th: ThreadRows | None, s: np.ndarray, e: np.ndarray, cause: np.ndarray
             ) -> pd.DataFrame | None:
    """What the thread's CPU samples caught inside its untraced pieces: per (cause, name),
    each piece's length shared among the samples inside it."""
    if th is None or not len(th.sample_ts):
        return None
    cand = np.flatnonzero(np.isin(cause, (CAUSES.index("gaps"), CAUSES.index("untraced"))))
    if not len(cand):
        return None
    cand = cand[np.argsort(s[cand], kind="stable")]
    ps, pe = s[cand], e[cand]
    j = np.searchsorted(ps, th.sample_ts, side="right") - 1
    inside = (j >= 0) & (th.sample_ts < pe[np.maximum(j, 0)])
    if not inside.any():
        return None
    j = j[inside]
    count = np.bincount(j, minlength=len(cand))
    return pd.DataFrame({"cause": cause[cand][j], "name": th.sample_name[inside],
                         "ns": (pe - ps)[j] / count[j]})


def refine(th: ThreadRows | None, lo: np.ndarray, hi: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The thread's pieces of the segments [lo, hi): (start, end, cause into CAUSES, name
    code, innermost user range's name code), cut where its rows begin or end."""
    untraced = len(CAUSES) - 1
    if th is None or not len(th.start):
        n = len(lo)
        cause = np.full(n, untraced)
        short_untraced(lo, hi, cause)
        return lo, hi, cause, np.full(n, -1), np.full(n, -1)
    s, e = elementary(lo, hi, th.start, th.end)
    seg_s, seg_e = union_blocks(lo, hi)
    keep = covering(seg_s, seg_e, s)
    s, e = s[keep], e[keep]
    cause = np.full(len(s), untraced, dtype=np.int64)
    name = np.full(len(s), -1, dtype=np.int64)
    open_ = np.ones(len(s), dtype=bool)
    for c in range(len(THREAD_CAUSES)):
        mine = th.cause == c
        if not mine.any() or not open_.any():
            continue
        bs, be = union_blocks(th.start[mine], th.end[mine])
        hit = open_ & covering(bs, be, s)
        if not hit.any():
            continue
        cause[hit] = 2 + c
        open_ &= ~hit
        rows = np.flatnonzero(mine)
        if THREAD_CAUSES[c] == "ops":  # the outermost op: the one opening its block
            order = rows[np.lexsort((-(th.end[rows] - th.start[rows]), th.start[rows]))]
            blk = np.searchsorted(bs, th.start[order], side="right") - 1
            first = order[np.r_[True, blk[1:] != blk[:-1]]]
            at = np.searchsorted(bs, s[hit], side="right") - 1
            name[hit] = th.name[first][at]
        else:  # the innermost call of the kind
            at = innermost_enclosing(np.zeros(len(rows), np.int64), th.start[rows],
                                     th.end[rows], np.zeros(int(hit.sum()), np.int64),
                                     s[hit])
            name[hit] = np.where(at >= 0, th.name[rows][np.maximum(at, 0)], -1)
    short_untraced(s, e, cause)
    ranges = np.flatnonzero(th.cause == -1)
    rng = np.full(len(s), -1, dtype=np.int64)
    if len(ranges):
        at = innermost_enclosing(np.zeros(len(ranges), np.int64), th.start[ranges],
                                 th.end[ranges], np.zeros(len(s), np.int64), s)
        rng = np.where(at >= 0, th.name[ranges][np.maximum(at, 0)], -1)
    return s, e, cause, name, rng
