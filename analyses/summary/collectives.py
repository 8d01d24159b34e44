"""Communication: the collectives a trace ran, by kind, their message sizes and bandwidth,
and how much of their time no computation hides.

Communication rows are the ``communication`` category (``table/classify.py``): on a GPU
trace its kernels; on a CPU trace the backend's own work where it records it (Gloo's
``gloo:all_reduce`` ranges on its threads), else the host's record of each collective
(``record_param_comms``, else the ``c10d::`` ops). Each
gets its collective kind (``classify.collective_kind``; where the name says none, the
collective name Kineto recorded beside it).

Message sizes are Kineto's ("In msg nelems", "Out msg nelems", "dtype", "Group size",
recorded on ``record_param_comms`` and, on newer PyTorch, on the kernel; the parser keeps
them in ``details``). The bandwidths follow nccl-tests: a collective's size is its larger
buffer (an all-gather's output, a reduce-scatter's input), algbw = size / time, and
busbw = algbw x 2(n-1)/n for an all-reduce, x (n-1)/n for an all-gather, a reduce-scatter
and an all-to-all, x 1 otherwise (n: the group's size), held against the device's NVLink
bandwidth in one direction where ``opcost.peaks.link_peak`` knows it.

Exposed communication is the communication kernels' time (their union) inside the
analysis windows that no computation kernel overlaps, per device, summed; the overlap
fraction is the rest over the communication time. This is HTA's
``get_comm_comp_overlap`` (computation: every kernel that is not communication; copies
and memsets are neither) restricted to the windows, per step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import as_list, categorical_of, each, groups, per_distinct
from traceviz.algos.intervals import covered_until, intersect_blocks, union_blocks
from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.opcost.peaks import link_peak
from traceviz.table.classify import collective_kind
from traceviz.table.schema import is_in

if TYPE_CHECKING:  # the Summary and Trace types only: figures.py imports the registry
    from traceviz.analyses.summary.figures import Summary
    from traceviz.trace import Trace

_MSG = re.compile(r"msg:(\d*),(\d*) dtype:(\S*) group:(\d*) pg:(\S*)(?: coll:(\S+))?")
# bytes per element of the dtypes Kineto names (c10's ScalarType names)
DTYPE_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Int": 4, "Long": 8,
               "Short": 2, "Char": 1, "Byte": 1, "Bool": 1, "Float8_e4m3fn": 1,
               "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1,
               "ComplexFloat": 8, "ComplexDouble": 16, "UInt16": 2, "UInt32": 4}
# the host records of a collective on a CPU trace, most specific first
HOST_RECORDS = ("record_param_comms",)
_INT64_MAX = 2 ** 63 - 1


def bus_factor(kind: str, n: int) -> float:
    """nccl-tests' bus bandwidth over algorithm bandwidth for a collective of ``n``
    ranks."""
    if n <= 1:
        return 1.0
    if kind == "all_reduce":
        return 2 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def message(details: str) -> tuple[int, str, int, str, str]:
    """(bytes or -1, dtype, group size or -1, process group, collective name) of one
    row's details text."""
    m = _MSG.search(details or "")
    if m is None:
        return -1, "", -1, "", ""
    i, o, dtype, group, pg, coll = m.groups()
    nelems = max(int(i or 0), int(o or 0))
    size = DTYPE_BYTES.get(dtype)
    nbytes = nelems * size if size is not None else -1
    n = int(group) if group else -1
    # the parsers drop a message past 64-bit figures (and say so); a details text from
    # elsewhere (a Parquet table) may still hold one: unknown, never wrapped
    return (nbytes if nbytes <= _INT64_MAX else -1, dtype, n if n <= _INT64_MAX else -1,
            pg, coll or "")


def comm_rows(trace: Trace) -> pd.DataFrame:
    """One row per collective: its event row, name, kind, start, duration, device, step,
    bytes (-1: not recorded), dtype, group size, process group."""
    ev = trace.events
    if trace.is_cpu:
        # the backend's own work (Gloo's "gloo:all_reduce" ranges on its threads: the
        # collective as it ran, waiting included), else the record of each call
        ann = is_in(ev["kind"], "annotation")
        ann &= per_distinct(ev["name"], each(lambda n: collective_kind(n) is not None),
                            fill=False).astype(bool)
        ops = is_in(ev["kind"], "op") & is_in(ev["category"], "communication")
        records = ops & per_distinct(ev["name"], lambda u: np.isin(
            np.array([str(n) for n in as_list(u)], dtype=object), HOST_RECORDS), fill=False)
        rows = np.flatnonzero(ann if ann.any() else records if records.any() else ops)
    else:
        rows = np.flatnonzero(is_in(ev["kind"], "kernel") & is_in(ev["category"],
                                                                   "communication"))
    # the rows' cells read from the columns (no copy of the table's rows); each distinct
    # name and details text of these rows read once
    names = _used(ev["name"], rows)
    msg = _messages(_used(ev["details"], rows)) if len(rows) else []
    kind = per_distinct(names, each(lambda n: collective_kind(n) or "other"), fill="other")
    coll = np.array([m[4] for m in msg], dtype=object)
    by_coll = np.array([collective_kind(c) or "other" if c else "other" for c in coll],
                       dtype=object)
    kind = np.where((kind == "other") & (by_coll != "other"), by_coll, kind) if len(rows) \
        else np.zeros(0, dtype=object)
    out = pd.DataFrame({
        "row": ev.index.to_numpy()[rows], "name": _text(names),
        "kind": kind.astype(object), "ts_ns": ev["ts_ns"].to_numpy(np.int64)[rows],
        "dur_ns": ev["dur_ns"].to_numpy(np.int64)[rows],
        "device": ev["device"].to_numpy(np.int64)[rows],
        "step": ev["step"].to_numpy(np.int64)[rows],
        "bytes": np.array([m[0] for m in msg], dtype=np.int64),
        "dtype": np.array([m[1] for m in msg], dtype=object),
        "group": np.array([m[2] for m in msg], dtype=np.int64),
        "pg": np.array([m[3] for m in msg], dtype=object)})
    return out.sort_values("ts_ns", kind="stable").reset_index(drop=True)


def _used(col: pd.Series, rows: np.ndarray) -> pd.Categorical:
    """The column's values at ``rows``, as a Categorical of the values they hold (of a
    categorical column: from its codes, without sorting them)."""
    if not isinstance(col.dtype, pd.CategoricalDtype):
        return categorical_of(col.iloc[rows]).remove_unused_categories()
    cats = col.cat.categories
    codes = col.array.codes[rows]
    used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(cats)))
    position = np.full(len(cats) + 1, -1, dtype=np.int64)  # the last: code -1
    position[used] = np.arange(len(used))
    return pd.Categorical.from_codes(position[codes], categories=cats.take(used),
                                     validate=False)


def _text(values: pd.Categorical) -> np.ndarray:
    """``Series.astype(str).to_numpy()`` of the values, each distinct one made text once
    (a missing one stays NaN, as pandas' text dtype keeps it)."""
    text = np.array([str(v) for v in as_list(values.categories)] + [np.nan], dtype=object)
    return text[values.codes]


def _messages(details: pd.Categorical) -> list[tuple[int, str, int, str, str]]:
    """``message`` of each row, parsed once per distinct text."""
    per = [message(str(d)) for d in as_list(details.categories)] + [(-1, "", -1, "", "")]
    return [per[c] for c in details.codes.tolist()]


@dataclass
class Communication:
    """A trace's collectives (see the module's docstring for every definition)."""

    kinds: pd.DataFrame        # per kind: count, total_ns, sized, bytes, dtype, group,
    #                            algbw_gbs, busbw_gbs, link_fraction
    comm_ns: int               # union of communication time inside the windows
    exposed_ns: int            # the part no computation kernel overlaps
    per_step: pd.DataFrame     # step, comm_ns, exposed_ns
    link_gbs: float | None = None
    link_source: str = ""
    host: bool = False         # a CPU trace: the host's records, no overlap figures
    rows: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    @property
    def count(self) -> int:
        return int(self.kinds["count"].sum()) if len(self.kinds) else 0

    @property
    def overlap_fraction(self) -> float | None:
        """The part of communication time computation overlaps."""
        if self.host or not self.comm_ns:
            return None
        return (self.comm_ns - self.exposed_ns) / self.comm_ns

    def to_dict(self) -> dict[str, Any]:
        steps = self.per_step.assign(overlap_fraction=[
            (c - e) / c if c else None for c, e in zip(self.per_step["comm_ns"],
                                                       self.per_step["exposed_ns"],
                                                       strict=True)])
        return {"collectives": self.count, "host_records": self.host,
                "comm_ns": self.comm_ns, "exposed_ns": self.exposed_ns,
                "overlap_fraction": self.overlap_fraction,
                "link_gbs": self.link_gbs, "link_source": self.link_source,
                "kinds": _records(self.kinds), "per_step": _records(steps)}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: (None if isinstance(v, float) and np.isnan(v) else
                 v.item() if hasattr(v, "item") else v) for k, v in r.items()}
            for r in frame.to_dict("records")]


def kind_table(rows: pd.DataFrame, link_gbs: float | None) -> pd.DataFrame:
    """Per collective kind: count, total_ns, sized (collectives with a recorded message),
    bytes, dtype (the most frequent), group (the largest), algbw/busbw in GB/s over the
    sized ones, busbw's fraction of the link."""
    out = []
    for kind, g in rows.groupby("kind", sort=False):
        sized = g[g["bytes"] >= 0]
        t = int(sized["dur_ns"].sum())
        n = int(sized["group"].max()) if len(sized) else -1
        # summed as Python integers: int64's sum of sizes near its range would wrap
        total = sum(sized["bytes"].tolist())
        algbw = total / t if t else None  # bytes/ns = GB/s
        busbw = algbw * bus_factor(str(kind), n) if algbw is not None else None
        dtypes = sized["dtype"][sized["dtype"] != ""]
        out.append({"kind": kind, "count": len(g), "total_ns": int(g["dur_ns"].sum()),
                    "sized": len(sized), "bytes": total,
                    "dtype": str(dtypes.mode().iloc[0]) if len(dtypes) else "",
                    "group": n, "algbw_gbs": algbw, "busbw_gbs": busbw,
                    "link_fraction": busbw / link_gbs if busbw is not None and link_gbs
                    else None})
    cols = ["kind", "count", "total_ns", "sized", "bytes", "dtype", "group", "algbw_gbs",
            "busbw_gbs", "link_fraction"]
    frame = pd.DataFrame(out, columns=cols)
    return frame.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True)


def exposed_per_step(work: pd.DataFrame, windows: dict[int, pd.DataFrame]
                     ) -> pd.DataFrame:
    """Per step (-1: a window without steps): communication-kernel time inside the
    windows and the part of it no computation kernel overlaps, summed over devices."""
    kernel = is_in(work["kind"], "kernel")
    comm = kernel & is_in(work["category"], "communication")
    ts = work["ts_ns"].to_numpy(np.int64)
    end = ts + work["dur_ns"].to_numpy(np.int64)
    dev = work["device"].to_numpy(np.int64)
    parts = []
    for device, idx in groups(dev):
        w = windows.get(device)
        c, k = comm[idx], kernel[idx] & ~comm[idx]
        if w is None or not c.any():
            continue
        ws, we = w["start_ns"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64)
        cs, ce = union_blocks(ts[idx][c], end[idx][c])
        os_, oe = intersect_blocks(cs, ce, *union_blocks(ts[idx][k], end[idx][k]))
        in_w = covered_until(cs, ce, we) - covered_until(cs, ce, ws)
        over = covered_until(os_, oe, we) - covered_until(os_, oe, ws)
        parts.append(pd.DataFrame({"step": w["step"].to_numpy(np.int64),
                                   "comm_ns": in_w, "exposed_ns": in_w - over}))
    if not parts:
        return pd.DataFrame({"step": pd.Series(dtype=np.int64),
                             "comm_ns": pd.Series(dtype=np.int64),
                             "exposed_ns": pd.Series(dtype=np.int64)})
    per = pd.concat(parts).groupby("step", sort=True, as_index=False).sum()
    return per[per["comm_ns"] > 0].reset_index(drop=True)


def communication(trace: Trace, work: pd.DataFrame, windows: dict[int, pd.DataFrame],
                  rows: pd.DataFrame | None = None) -> Communication:
    """The trace's collectives by kind and, on a GPU trace, their exposed time per step
    (``rows``: ``comm_rows(trace)``, where the caller has them)."""
    rows = comm_rows(trace) if rows is None else rows
    names = sorted({str(v) for v in (trace.meta.get("devices") or {}).values() if v})
    link = link_peak(names[0]) if names else None
    link_gbs, source = link if link is not None else (None, "")
    if trace.is_cpu or work.empty:
        per = exposed_per_step(work.iloc[:0], {})
    else:
        per = exposed_per_step(work, windows)
    return Communication(kind_table(rows, link_gbs), int(per["comm_ns"].sum()),
                         int(per["exposed_ns"].sum()), per, link_gbs, source,
                         host=trace.is_cpu, rows=rows)


def _compute(i: Inputs, s: Summary) -> Communication | None:
    rows = comm_rows(i.trace)
    if not len(rows):  # no collective: nothing to figure (most traces of one device)
        return None
    c = communication(i.trace, i.work, i.windows, rows)
    return c if c.count else None


def _json(s: Summary, top: int) -> dict[str, Any]:
    c = s.communication
    return {"communication": None if c is None else c.to_dict()}


SECTION = Section(_json, _compute)
