"""What the host threads did outside CUDA, as ``os`` rows: OS runtime calls (``OSRT_API``:
``nsys profile --trace=osrt``, on by default) and the stretches a thread was scheduled out
(``SCHED_EVENTS``: context switches, ``--cpuctxsw``, on by default); and what they were
running, as ``sample`` rows: the CPU samples (``COMPOSITE_EVENTS`` with their call stacks
in ``SAMPLING_CALLCHAINS``: ``--sample=cpu``, on by default).

Only the threads that made CUDA calls are kept: the host-wait split asks what a launching
thread did while the device waited (``analyses/summary/waits.py``), and the other threads
of a process (a worker pool parked in ``pthread_cond_wait``) would only add rows.

A scheduled-out stretch runs from a thread's switch out to its next switch in; where the
export records why the thread blocked (``threadBlock``, ``ENUM_SCHEDULING_THREAD_BLOCK``)
the row says so (``[off-CPU] Nanosleep``), else it is ``[off-CPU]``. ``host_calls.os_kind``
sorts both kinds of row.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.parsers.nsys.table_access import lookup_strings
from traceviz.table.host_calls import OFF_CPU

if TYPE_CHECKING:  # the reader's row builder and the export's tables
    from traceviz.parsers.nsys.nsys_reader import _Rows
    from traceviz.parsers.nsys.table_access import ExportTables

OSRT = "OSRT_API"
SCHED = "SCHED_EVENTS"
# ENUM_SCHEDULING_THREAD_BLOCK's labels, as 2022-2024 exports write them
_BLOCK_REASONS = {4: "Nanosleep", 6: "Mutex", 7: "CondVar", 8: "Sem", 9: "Join",
                  17: "WaitPage", 21: "PageIn", 23: "DelayExecution"}


def _host_ids(gtid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF, gtid & np.int64(~0xFFFFFF)


def os_calls(tables: ExportTables, strings: pd.Series, b: _Rows,
             threads: np.ndarray) -> pd.DataFrame:
    """The launching threads' OS runtime calls (``threads``: their globalTids)."""
    df = tables.read(OSRT, ["start", "end", "globalTid", "nameId"])
    if df.empty:
        return df
    n = len(df)
    bad = np.zeros(n, dtype=bool)
    gtid = b.ints(df, "globalTid", bad=bad)
    mine = np.isin(gtid, threads) & ~bad
    if not mine.any():
        return pd.DataFrame()
    df, gtid, bad = df[mine], gtid[mine], bad[mine]
    pid, tid, key = _host_ids(gtid)
    k = len(df)
    return b.rows("os", lookup_strings(strings, df["nameId"], "<unknown call>"), df, pid=pid,
                  tid=tid, device=np.full(k, -1), stream=np.full(k, -1), link_pid=key,
                  bad=bad)


def off_cpu(tables: ExportTables, b: _Rows, threads: np.ndarray) -> pd.DataFrame:
    """The launching threads' scheduled-out stretches: switch out to the next switch in."""
    df = tables.read(SCHED, ["start", "isSchedIn", "globalTid", "threadBlock"])
    if df.empty:
        return df
    bad = np.zeros(len(df), dtype=bool)
    gtid = b.ints(df, "globalTid", bad=bad)
    mine = np.isin(gtid, threads) & ~bad
    if not mine.any():
        return pd.DataFrame()
    t = b.ints(df, "start", bad=bad)[mine]
    gtid = gtid[mine]
    sched_in = b.ints(df, "isSchedIn", 0)[mine] == 1
    block = b.ints(df, "threadBlock", 0)[mine]
    order = np.lexsort((t, gtid))
    t, gtid, sched_in, block = t[order], gtid[order], sched_in[order], block[order]
    # an out followed by this thread's next event, an in: the thread was off the CPU
    out = np.flatnonzero(~sched_in[:-1] & sched_in[1:] & (gtid[:-1] == gtid[1:]))
    if not len(out):
        return pd.DataFrame()
    reason = pd.Series(block[out]).map(_BLOCK_REASONS)
    names = np.where(reason.isna(), OFF_CPU, OFF_CPU + " " + reason.fillna("").astype(str))
    rows = pd.DataFrame({"start": t[out], "end": t[out + 1]})
    pid, tid, key = _host_ids(gtid[out])
    k = len(rows)
    return b.rows("os", names.astype(object), rows, pid=pid, tid=tid,
                  device=np.full(k, -1), stream=np.full(k, -1), link_pid=key,
                  bad=np.zeros(k, dtype=bool))


SAMPLES = "COMPOSITE_EVENTS"
CALLCHAINS = "SAMPLING_CALLCHAINS"
# frames that say nothing of what the program was doing: the C library, the loader, the
# kernel, the CUDA driver and runtime, the profiler's own injection, unresolved addresses
_SYSTEM_MODULE = re.compile(r"\[kernel|\[Max depth|vmlinux|/libc[.-]|/libm[.-]|libpthread|"
                            r"/ld-|ld-linux|libstdc\+\+|libgcc|libdl[.-]|librt[.-]|libcuda\.|"
                            r"libcudart|libcupti|libToolsInjection|libnvToolsExt|vdso")
_PYTHON_MODULE = re.compile(r"libpython|/python\d")


def _frame_label(symbol: str, module: str) -> str | None:
    """A frame as a sample's label (None: a frame that says nothing, skipped)."""
    if not symbol or not module or symbol.startswith("0x") or _SYSTEM_MODULE.search(module):
        return None  # nothing resolved, or no module to say whose code it is
    if _PYTHON_MODULE.search(module or ""):
        return "Python interpreter"  # the frame evaluator: the Python, not which line
    return symbol


def cpu_samples(tables: ExportTables, strings: pd.Series, b: _Rows,
                threads: np.ndarray) -> pd.DataFrame:
    """The launching threads' CPU samples (``nsys profile --sample=cpu``, on by default)
    as ``sample`` rows: each named by the deepest frame of its call stack that is the
    program's own (not the C library, the loader, the kernel, the CUDA driver or the
    profiler), ``[sample] <function>``; a sample with no such frame is left out."""
    ev = tables.read(SAMPLES, ["id", "start", "globalTid"])
    if ev.empty:
        return pd.DataFrame()
    bad = np.zeros(len(ev), dtype=bool)
    gtid = b.ints(ev, "globalTid", bad=bad)
    mine = np.isin(gtid, threads) & ~bad
    if not mine.any():
        return pd.DataFrame()
    ev, gtid = ev[mine], gtid[mine]
    ids = b.ints(ev, "id")
    chain = tables.read(CALLCHAINS, ["id", "symbol", "module", "stackDepth"])
    if chain.empty:
        return pd.DataFrame()
    cid = b.ints(chain, "id")
    keep = np.isin(cid, ids)
    chain, cid = chain[keep], cid[keep]
    symbol = pd.Categorical(lookup_strings(strings, chain["symbol"], ""))
    module = pd.Categorical(lookup_strings(strings, chain["module"], ""))
    pairs = pd.DataFrame({"s": symbol.codes, "m": module.codes})
    distinct = pairs.drop_duplicates()
    labels = [_frame_label(str(symbol.categories[s]) if s >= 0 else "",
                           str(module.categories[m]) if m >= 0 else "")
              for s, m in zip(distinct["s"], distinct["m"], strict=True)]
    label_of = pd.Series(labels, index=pd.MultiIndex.from_frame(distinct), dtype=object)
    label = label_of.reindex(pd.MultiIndex.from_frame(pairs)).to_numpy(object)
    own = pd.notna(label)
    frames = pd.DataFrame({"id": cid[own], "depth": b.ints(chain, "stackDepth", 0)[own],
                           "label": label[own]})
    deepest = frames.sort_values(["id", "depth"]).drop_duplicates("id")
    named = pd.Series(deepest["label"].to_numpy(object), index=deepest["id"].to_numpy())
    names = named.reindex(ids).to_numpy(object)
    found = pd.notna(names)
    if not found.any():
        return pd.DataFrame()
    rows = pd.DataFrame({"start": b.ints(ev, "start")[found]})
    rows["end"] = rows["start"]
    pid, tid, key = _host_ids(gtid[found])
    k = len(rows)
    return b.rows("sample", ("[sample] " + pd.Series(names[found], dtype=object)).to_numpy(
        object), rows, pid=pid, tid=tid, device=np.full(k, -1), stream=np.full(k, -1),
        link_pid=key, bad=np.zeros(k, dtype=bool), ranges=True)
