"""Start-up: what a program pays once, before its steps run at their steady pace.

A trace that begins with the process, or with the first iterations, records work no
later step repeats; judged as a step, it reads as a host that is slow to launch. Its
parts (``PARTS``), found from the host calls and ranges, never from a name of a step:

- ``context``: context creation, paid by whichever CUDA/HIP call of a process comes
  first (``cudaFree(0)``, the first ``cudaMalloc``), and the context calls themselves
  (``cuInit``, ``cuDevicePrimaryCtxRetain``, ``cudaSetDevice``), or a stream or event
  created far slower than the process creates the others;
- ``module_loading``: a kernel's module loaded on its first use (lazy loading: the first
  launch of each kernel, or the first attribute or occupancy query, takes milliseconds
  where the same call usually takes microseconds), and explicit module loads;
- ``allocation``: first-call allocation, an allocation or free far slower than the
  process's others (a caching allocator growing its pool);
- ``autotuning``: the search for the fastest algorithm (XLA's and TensorFlow's
  autotuners check their candidates' outputs with ``redzone_checker`` kernels; cuDNN's
  find; ranges that name autotuning): per window, from the first such mark to the last,
  the candidates' kernels and synchronizations included;
- ``compilation``: a compiler's ranges (XLA's ``backend_compile``, ``XlaCompile``).

A call counts when it takes at least ``CALL_NS`` and, for a call that is not a context
call, ``OUTLIER`` times the usual time of such calls in its process (the lower quartile
of its name's calls: the first calls stand out against the rest; for a name called fewer
than ``FEW`` times, whose calls may all be first calls, at most the median of all its
process's calls that do not wait for the device). Calls that wait for the device
(synchronizations, synchronous copies) never count: their time is the device's; nor does
a call that ran half of its time or more while a device ran work (a launch held by a full
queue). A graph launch, which enqueues a whole graph, is judged against its own name's
calls alone (its first calls upload the graph: slower than the steady ones).

``Startup`` holds the blocks of start-up time: the calls' (``calls_*``), which count only
while the device runs nothing (a launch held by a full queue is the device's time), and
autotuning's (``tune_*``), which counts whatever the device does (the candidates' kernels
are the autotuner's work). ``analyses/summary/waits.py`` splits the windows with them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import each, from_used_codes, per_distinct
from traceviz.algos.intervals import covered_until, union_blocks
from traceviz.table.host_calls import api_kind
from traceviz.table.launch_apis import is_graph_launch, launch_kind
from traceviz.table.schema import DEVICE_KINDS, is_in

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

PARTS = ("context", "module_loading", "allocation", "autotuning", "compilation")
CALL_NS = 1_000_000   # 1 ms: a steady CUDA call takes microseconds
OUTLIER = 20          # times the usual time of such a call in its process
FEW = 3               # calls of a name: fewer may all be first calls
CONTEXT_FREE_NS = 100_000_000  # a cudaFree this slow made a context (no free takes 100 ms)
# the calls that make or attach a context, whatever their time against the others
_CONTEXT = re.compile(r"^(cuInit|cuCtxCreate|cuDevicePrimaryCtxRetain|cudaSetDevice|"
                      r"cudaDeviceReset|hipInit|hipSetDevice|hipCtxCreate)")
_MODULE = re.compile(r"^(cu|hip)(Module|Library)Load|^cuLink")
# autotuning marks: XLA/TensorFlow's redzone checks around every candidate, autotuner
# and algorithm-picker ranges, cuDNN's find calls (nsys --trace=cudnn)
AUTOTUNE = re.compile(r"redzone_checker|[Aa]utotun|AlgorithmPicker|cudnnFind")
# a Python frame recorded with its source file (with_stack): "autotuner.py(400): f" is a
# call into a module of that name, not autotuning
_SOURCE_FRAME = re.compile(r"\.py\(\d+\)")
# a compiler's own ranges (XLA: backend_compile, XlaCompile, TfrtTpuCompiler::Compile)
COMPILE = re.compile(r"(^|::)(backend_compile|XlaCompile|Compile|compile_and_load)$")


@dataclass(frozen=True)
class Startup:
    """Start-up time: the calls' blocks and autotuning's, and the parts they hold."""

    calls_start: np.ndarray
    calls_end: np.ndarray
    tune_start: np.ndarray
    tune_end: np.ndarray
    parts: pd.DataFrame          # part, calls (or marks), ns (union), names (the largest)

    @property
    def found(self) -> bool:
        return bool(len(self.calls_start) or len(self.tune_start))

    def to_dict(self) -> dict[str, Any]:
        return {"parts": [{"part": r.part, "count": int(r.count), "ns": int(r.ns),
                           "names": list(r.names)}
                          for r in self.parts.itertuples(index=False)]}


def _usual(pid: np.ndarray, name_code: np.ndarray, dur: np.ndarray, own: np.ndarray
           ) -> np.ndarray:
    """Per call: the usual time of such a call in its process: the lower quartile of its
    name's calls (a few slow first calls do not move it); for a name called fewer than
    ``FEW`` times, each call may be a first one: the lower of that and the median of all
    the process's calls, except where ``own`` says the call's time is its own kind's alone
    (a graph launch enqueues a whole graph: only its name's calls say what is usual).

    In numpy over the calls sorted by group and time, with pandas' arithmetic (its
    groupby quantile and median cost ~10 ms on a small trace)."""
    pid, name_code, dur = (np.asarray(x, np.int64) for x in (pid, name_code, dur))
    if not len(dur):
        return np.zeros(0, dtype=np.float64)
    by_name, size = _quantile(dur, pid, name_code, 0.25)
    few = (size < FEW) & ~own
    by_pid, _ = _quantile(dur, pid, np.zeros_like(pid), 0.5)
    return np.where(few, np.minimum(by_pid, by_name), by_name)


def _quantile(x: np.ndarray, a: np.ndarray, b: np.ndarray, q: float
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the ``q`` quantile of ``x`` over the rows of its (a, b) group, linear
    between the two nearest (pandas' ``groupby(...).quantile(q)``: ``v + (w - v) * f``;
    the median, q = 0.5, is the same figure), and the group's size."""
    order = np.lexsort((x, b, a))
    s, ga, gb = x[order], a[order], b[order]
    start = np.flatnonzero(np.r_[True, (ga[1:] != ga[:-1]) | (gb[1:] != gb[:-1])])
    n = np.diff(np.r_[start, len(s)])
    at = q * (n - 1).astype(np.float64)
    lo = start + at.astype(np.int64)
    frac = np.mod(at, 1.0)
    v = s[lo]
    w = s[np.minimum(lo + 1, len(s) - 1)]
    per = np.where(frac == 0.0, v.astype(np.float64),
                   v.astype(np.float64) + (w - v).astype(np.float64) * frac)
    group = np.empty(len(x), dtype=np.int64)
    group[order] = np.cumsum(np.r_[True, (ga[1:] != ga[:-1]) | (gb[1:] != gb[:-1])]) - 1
    return per[group], n[group]


def _held_by_device(trace: Trace, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per call: half of it or more ran while a device ran work (a launch held by a full
    queue, a call behind the device's own work): its time is the device's."""
    dev = trace.device_rows
    if dev.empty or not len(ts):
        return np.zeros(len(ts), dtype=bool)
    s = dev["ts_ns"].to_numpy(np.int64)
    bs, be = union_blocks(s, s + dev["dur_ns"].to_numpy(np.int64))
    busy = covered_until(bs, be, end) - covered_until(bs, be, ts)
    return 2 * busy >= np.maximum(end - ts, 1)


def startup_calls(trace: Trace) -> pd.DataFrame:
    """The runtime calls that are start-up: index into ``trace.events``, part."""
    ev = trace.events
    rt = np.flatnonzero(is_in(ev["kind"], "runtime"))
    if not len(rt):
        return pd.DataFrame({"row": np.zeros(0, np.int64), "part": np.zeros(0, object)})
    # the runtime calls' names as a Categorical of those names alone: the rules below run
    # once per distinct call name, not once per name of the whole trace
    names = _used_names(ev["name"], rt)
    kind = per_distinct(names, each(api_kind))
    waits = np.isin(kind, ("sync", "sync_copy"))
    rt, kind, names = rt[~waits], kind[~waits], names[~waits]
    pid = ev["pid"].to_numpy(np.int64)[rt]
    ts = ev["ts_ns"].to_numpy(np.int64)[rt]
    dur = ev["dur_ns"].to_numpy(np.int64)[rt]
    code = np.asarray(names.codes)
    context = per_distinct(names, each(lambda n: bool(_CONTEXT.match(n))), fill=False)
    module = per_distinct(names, each(lambda n: bool(_MODULE.match(n))), fill=False)
    graph = per_distinct(names, each(is_graph_launch), fill=False).astype(bool)
    # a call the device held (half its time or more with work running) is the device's
    long = (dur >= CALL_NS) & ~_held_by_device(trace, ts, ts + dur)
    slow = long & (dur >= OUTLIER * np.maximum(_usual(pid, code, dur, graph), 1.0))
    # the first call of each process pays for its context, whatever the call
    first = np.zeros(len(rt), dtype=bool)
    order = np.lexsort((ts, pid))
    starts = np.flatnonzero(np.r_[True, pid[order][1:] != pid[order][:-1]])
    first[order[starts]] = True
    part = np.full(len(rt), None, dtype=object)
    # a kernel launch or a kernel's attribute query (a copy's call lasts as long as its
    # data takes to stage, or its stream to drain: never start-up)
    kernel_launch = per_distinct(names, each(lambda n: launch_kind(n) == "kernel"),
                                 fill=False)
    part[slow & (kernel_launch.astype(bool) | (kind == "setup"))] = "module_loading"
    part[long & module.astype(bool)] = "module_loading"
    part[slow & (kind == "alloc")] = "allocation"
    # cudaFree(0) is how a program makes its context: a slow free is that, not a free
    freeing = per_distinct(names, each(lambda n: n.startswith("cudaFree")), fill=False)
    part[slow & freeing.astype(bool) & (dur >= CONTEXT_FREE_NS)] = "context"
    part[slow & (kind == "create")] = "context"
    part[slow & (kind == "other_api")] = "context"
    # (a first launch that is slow loads its kernel's module: a context made before the
    # recording began is not in it)
    part[long & (context.astype(bool) | (first & (kind != "launch")))] = "context"
    part[long & first & kernel_launch.astype(bool) & ~graph] = "module_loading"
    part[long & first & (kind == "launch") & ~kernel_launch.astype(bool)] = None
    keep = part != None  # noqa: E711 (an object array compared element by element)
    return pd.DataFrame({"row": rt[keep], "part": part[keep]})


def _used_names(col: pd.Series, rows: np.ndarray) -> pd.Categorical:
    """The column's values at ``rows`` as a Categorical of the values they hold."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return from_used_codes(col.array.codes[rows], col.cat.categories)
    return pd.Categorical(col.iloc[rows])


def _autotune_marks(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every autotuning mark: a redzone check from its launch, a range."""
    ev = trace.events
    marked = per_distinct(ev["name"], each(
        lambda n: bool(AUTOTUNE.search(n)) and not _SOURCE_FRAME.search(n)), fill=False)
    idx = np.flatnonzero(marked.astype(bool))
    if not len(idx):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)[idx]
    end = ts + ev["dur_ns"].to_numpy(np.int64)[idx]
    launch = ev["launch_ts_ns"].iloc[idx]
    start = np.minimum(launch.fillna(np.iinfo(np.int64).max).to_numpy(np.int64), ts)
    return start, end


def _per_window(start: np.ndarray, end: np.ndarray, ws: np.ndarray, we: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per window holding marks: the stretch from its first mark to its last, clipped to
    it; marks outside every window: from the first to the last of them."""
    k = np.searchsorted(ws, start, side="right") - 1
    inside = (k >= 0) & (start < we[np.maximum(k, 0)])
    out_s, out_e = [], []
    if inside.any():
        frame = pd.DataFrame({"k": k[inside], "s": start[inside], "e": end[inside]})
        g = frame.groupby("k").agg(s=("s", "min"), e=("e", "max"))
        kk = g.index.to_numpy(np.int64)
        out_s.append(np.maximum(g["s"].to_numpy(np.int64), ws[kk]))
        out_e.append(np.minimum(g["e"].to_numpy(np.int64), we[kk]))
    if (~inside).any():
        out_s.append(np.array([start[~inside].min()], np.int64))
        out_e.append(np.array([end[~inside].max()], np.int64))
    return union_blocks(np.concatenate(out_s), np.concatenate(out_e))


def find_startup(trace: Trace, ws: np.ndarray, we: np.ndarray) -> Startup:
    """The trace's start-up, with autotuning spans cut by the wall windows ``ws``/``we``."""
    ev = trace.events
    calls = startup_calls(trace)
    rows = calls["row"].to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + ev["dur_ns"].to_numpy(np.int64)
    cs, ce = union_blocks(ts[rows], end[rows])
    ms, me = _autotune_marks(trace)
    ts_, te_ = _per_window(ms, me, ws, we) if len(ms) else (np.zeros(0, np.int64),) * 2
    host = ~is_in(ev["kind"], *DEVICE_KINDS)
    compiling = np.flatnonzero(host & per_distinct(
        ev["name"], each(lambda n: bool(COMPILE.search(n))), fill=False).astype(bool))
    parts = []
    for part in PARTS:
        if part == "autotuning":
            n, ns = len(ms), int((te_ - ts_).sum())
            names = ev["name"].iloc[np.flatnonzero(per_distinct(
                ev["name"], each(lambda n: bool(AUTOTUNE.search(n))), fill=False)
                .astype(bool))] if n else pd.Series([], dtype=object)
        elif part == "compilation":
            n = len(compiling)
            s, e = union_blocks(ts[compiling], end[compiling])
            ns = int((e - s).sum())
            names = ev["name"].iloc[compiling]
        else:
            mine = rows[calls["part"].to_numpy() == part]
            n = len(mine)
            s, e = union_blocks(ts[mine], end[mine])
            ns = int((e - s).sum())
            names = ev["name"].iloc[mine]
        if n:
            top = names.astype(str).value_counts().head(3)
            parts.append((part, n, ns, [f"{k} x{v}" for k, v in top.items()]))
    if len(compiling):  # a compiler's ranges are host work of their own: start-up time
        s, e = union_blocks(ts[compiling], end[compiling])
        cs, ce = union_blocks(np.r_[cs, s], np.r_[ce, e])
    return Startup(cs, ce, ts_, te_, pd.DataFrame(
        parts, columns=["part", "count", "ns", "names"]))
