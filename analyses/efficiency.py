"""How far the work is from the hardware: FLOPs and bytes per op group and per kernel,
achieved TFLOP/s and GB/s against the device's peak, the roofline bound, and the model's
TFLOP/s and MFU.

Work per op comes from ``traceviz.opcost`` (recorded shapes and dtypes); an op reaches
its kernels through the one launch link (the innermost op around each kernel's launch
call). An op call with several kernels shares its FLOPs among its matrix kernels (gemm,
rnn, attention; all of its kernels where it has none) and its bytes among all of its
kernels, in proportion to their device time. Peaks come from ``traceviz.peaks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.analyses.efficiency_run import (
    apply_workload_flops,
    fma_note,
    model_figures,
    over_peak_notes,
    shapes_note,
    stated_peak,
)
from traceviz.analyses.stats import plain_row
from traceviz.analyses.work import work_rows
from traceviz.categorical import each, per_distinct
from traceviz.classify import TF32_KERNEL
from traceviz.opcost import has_model, op_cost
from traceviz.optree import op_parents, parents_and_enclosing
from traceviz.peaks import Peak, find
from traceviz.schema import is_in

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

MATRIX_CATEGORIES = ("gemm", "rnn", "attention")
OVER_PEAK = 1.05  # an achieved rate above its peak by more than timing noise
GROUP_COLUMNS = ["op", "dims", "types", "precision", "unit", "peak_key", "calls", "kernels",
                 "time_ns", "flops", "bytes", "tflops", "gbps", "intensity", "pct_peak",
                 "pct_bw", "bound"]


@dataclass
class Efficiency:
    """``analyze``'s Efficiency section (see docs/metrics.md, "Efficiency and memory")."""

    device: str | None
    peak: Peak | None
    groups: pd.DataFrame        # per op group (name + shapes): GROUP_COLUMNS
    kernels: pd.DataFrame       # per kernel name: the same figures
    uncovered: pd.DataFrame     # per op (or "(no op)"): time without figures and why
    time_ns: int                # kernel time (sum)
    covered_ns: int             # ... of kernels with a FLOP or byte figure
    flops: int
    bytes: int
    busy_ns: int
    span_ns: int
    steps: int
    run_key: str | None         # the peak the run's MFU is held against
    model: dict[str, Any] | None = None  # workload FLOPs per batch, model TFLOP/s, MFU
    notes: list[str] = field(default_factory=list)
    flops_from: str = "ops"     # "workload": no op gave FLOPs, the run's own are used

    @property
    def coverage(self) -> float | None:
        return self.covered_ns / self.time_ns if self.time_ns else None

    @property
    def tflops_busy(self) -> float | None:
        return self.flops / self.busy_ns / 1e3 if self.busy_ns else None

    @property
    def tflops_span(self) -> float | None:
        return self.flops / self.span_ns / 1e3 if self.span_ns else None

    @property
    def run_peak(self) -> float | None:
        return self.peak.figures.get(self.run_key) if self.peak and self.run_key else None

    @property
    def mfu_trace(self) -> float | None:
        """Achieved TFLOP/s over the analysed span against the run's peak."""
        peak, t = self.run_peak, self.tflops_span
        return t / peak if peak and t is not None else None

    def to_dict(self, top: int = 20) -> dict[str, Any]:
        p = self.peak
        return {
            "device": self.device,
            "peak": None if p is None else {"device": p.device, "figures": p.figures,
                                             "source": p.source, "note": p.note},
            "run": {"flops": self.flops, "bytes": self.bytes, "time_ns": self.time_ns,
                    "covered_ns": self.covered_ns, "coverage": self.coverage,
                    "busy_ns": self.busy_ns, "span_ns": self.span_ns, "steps": self.steps,
                    "tflops_busy": self.tflops_busy, "tflops_span": self.tflops_span,
                    "peak_key": self.run_key, "mfu_trace": self.mfu_trace,
                    "flops_from": self.flops_from,
                    **(self.model or {})},
            **{name: [plain_row(r) for r in frame.head(top).to_dict("records")]
               for name, frame in (("groups", self.groups), ("kernels", self.kernels),
                                   ("uncovered", self.uncovered))},
            "notes": self.notes,
        }


def op_of_kernels(trace: Trace, work: pd.DataFrame) -> np.ndarray:
    """Per work row: the events row of the op call it ran for (-1: none). GPU: the
    innermost op around its launch call; CPU: the work op itself, or where it has no
    formula (an autograd node around aten::convolution_backward), the longest op with
    one nested in it."""
    if trace.is_cpu:
        return _modelled_inside(trace, work)
    ev = trace.events
    calls = np.flatnonzero(is_in(ev["kind"], "runtime") & (ev["launch_id"].to_numpy() >= 0))
    ops = np.flatnonzero(is_in(ev["kind"], "op"))
    out = np.full(len(work), -1, dtype=np.int64)
    if not len(calls) or not len(ops):
        return out
    c = ev.iloc[calls]
    o = ev.iloc[ops]
    _, around = parents_and_enclosing(
        o["pid"].to_numpy(), o["tid"].to_numpy(), o["ts_ns"].to_numpy(), o["dur_ns"].to_numpy(),
        c["pid"].to_numpy(), c["tid"].to_numpy(), c["ts_ns"].to_numpy())
    call_op = np.where(around >= 0, ops[np.maximum(around, 0)], -1)
    # a launch id on several calls (a table written elsewhere): the first call's op
    ids, first = np.unique(c["launch_id"].to_numpy(), return_index=True)
    want = work["launch_id"].to_numpy()
    pos = np.minimum(np.searchsorted(ids, want), len(ids) - 1)
    hit = ids[pos] == want
    out[hit] = call_op[first[pos[hit]]]
    return out


def _modelled_inside(trace: Trace, work: pd.DataFrame) -> np.ndarray:
    ev = trace.events
    ops_at = np.flatnonzero(is_in(ev["kind"], "op"))
    ops = ev.iloc[ops_at]
    parents = op_parents(ops)
    is_work = np.isin(ops_at, work.index.to_numpy())
    # each op's nearest work op, itself included (-1: none), one nesting level at a time
    owner = np.where(is_work, np.arange(len(ops)), -1)
    up = parents.copy()
    while ((owner < 0) & (up >= 0)).any():
        open_ = (owner < 0) & (up >= 0)
        owner[open_] = np.where(is_work[up[open_]], up[open_], -1)
        up[open_] = parents[up[open_]]
    modelled = per_distinct(ops["name"], each(has_model), fill=False).astype(bool)
    cand = pd.DataFrame({"owner": owner, "dur": ops["dur_ns"].to_numpy(), "row": ops_at,
                         "self": is_work})[modelled & (owner >= 0)]
    # the work op itself where it has a formula, else its longest modelled op inside
    best = cand.sort_values(["self", "dur"], ascending=False, kind="stable") \
        .drop_duplicates("owner")
    chosen = pd.Series(best["row"].to_numpy(), index=ops_at[best["owner"].to_numpy()])
    return chosen.reindex(work.index).fillna(-1).to_numpy(np.int64) \
        if len(chosen) else np.full(len(work), -1, dtype=np.int64)


def _cost_columns(names: np.ndarray, details: np.ndarray) -> pd.DataFrame:
    """FLOPs, bytes, precision, unit and note per (name, details) pair, one formula call
    per distinct pair."""
    pairs = pd.DataFrame({"name": names, "details": details})
    distinct = pairs.drop_duplicates().reset_index(drop=True)
    costs = [op_cost(n, d) for n, d in zip(distinct["name"], distinct["details"],
                                           strict=True)]
    distinct["flops"] = [c.flops if c else None for c in costs]
    distinct["bytes"] = [c.bytes if c else None for c in costs]
    distinct["precision"] = [c.precision if c else None for c in costs]
    distinct["unit"] = [c.unit if c else None for c in costs]
    distinct["note"] = [(c.note if c else "no model for this op") for c in costs]
    return pairs.merge(distinct, on=["name", "details"], how="left")


def efficiency(trace: Trace, peak: Peak | None = None, busy_ns: int = 0, span_ns: int = 0,
               steps: int = 0) -> Efficiency:
    """The efficiency figures of ``trace``; ``peak`` overrides the table's row for its
    device; busy, span and steps are the summary's (for the run-level rates)."""
    work = work_rows(trace)
    if not trace.is_cpu:
        work = work[is_in(work["kind"], "kernel")]
    device = _device_name(trace, work)
    notes: list[str] = []
    if peak is None:
        peak = None if trace.is_cpu else find(device) or stated_peak(trace, device)
        if peak is None or not peak.figures.keys() - {"bw"}:
            what = "CPUs" if trace.is_cpu else f"device {device or '(unnamed)'!r}"
            notes.append(f"No {'compute ' * (peak is not None)}peak figures for {what}: rates "
                         "are shown without % of peak (give them with --peak).")
    ev = trace.events
    op_row = op_of_kernels(trace, work)
    # an XSpace op with XLA's cost analysis is its own op: its row carries the figures
    # once per distinct details text, not per kernel
    own = pd.Series(per_distinct(work["details"], _xla_part), index=work.index, dtype=object)
    xla = own.notna().to_numpy()
    op_row = np.where(xla, work.index.to_numpy(), op_row)
    has_op = op_row >= 0
    names = np.where(has_op, ev["name"].astype(object).to_numpy()[np.maximum(op_row, 0)], "")
    label = work["op"].astype(object).where(work["op"].notna(), work["name"].astype(object))
    names = np.where(xla, label.astype(str).to_numpy(), names)
    details = np.where(has_op, ev["details"].astype(object).to_numpy()[np.maximum(op_row, 0)],
                       "")
    details = np.where(xla, own.fillna("").to_numpy(), details)
    details = pd.Series(details, dtype=object).fillna("").astype(str).to_numpy(object)
    cost = _cost_columns(names.astype(object), details)
    dur = work["dur_ns"].to_numpy(np.float64)
    k = pd.DataFrame({
        "kernel": work["name"].astype(str).to_numpy(), "category": work["category"].astype(
            str).to_numpy(), "dur": dur, "inst": op_row, "op": names, "details": details,
        "op_flops": cost["flops"].to_numpy(dtype=object), "op_bytes": cost["bytes"].to_numpy(
            dtype=object), "precision": cost["precision"].to_numpy(dtype=object),
        "unit": cost["unit"].to_numpy(dtype=object), "note": cost["note"].to_numpy(dtype=object)})
    k["covered"] = has_op & (pd.notna(k["op_flops"]) | pd.notna(k["op_bytes"])).to_numpy()
    k["matrix"] = np.isin(k["category"].to_numpy(), MATRIX_CATEGORIES)
    tf32_name = per_distinct(work["name"], lambda n: np.array(
        [bool(TF32_KERNEL.search(str(x))) for x in n], dtype=bool), fill=False)
    k["tf32"] = (k["precision"] == "fp32").to_numpy(bool) & k["matrix"].to_numpy(bool) & \
        np.asarray(tf32_name, dtype=bool)
    _share(k)
    groups = _groups(k, peak)
    kernels = _kernel_groups(k, peak)
    uncovered = _uncovered(k, "XLA gave no cost for this op" if
                           trace.meta.get("source_format") == "xplane" else
                           "no formula for this op or any op inside it" if trace.is_cpu else
                           "no framework op around the launch", own_name=trace.is_cpu)
    run_key = _run_key(groups, peak)
    eff = Efficiency(
        device=device, peak=peak, groups=groups, kernels=kernels, uncovered=uncovered,
        time_ns=int(dur.sum()), covered_ns=int(dur[k["covered"].to_numpy()].sum()),
        flops=int(k["flops"].sum()), bytes=int(k["bytes"].sum()), busy_ns=busy_ns,
        span_ns=span_ns, steps=steps, run_key=run_key, notes=notes)
    eff.model = model_figures(trace.meta, eff.run_peak)
    eff.notes.extend(over_peak_notes(groups, peak, OVER_PEAK))
    if not xla.any() and (not (ev["kind"] == "op").any() or not per_distinct(
            ev["details"], lambda d: d.astype(str).str.startswith("dims:"), False).any()):
        eff.notes.append(shapes_note(trace))
    apply_workload_flops(eff, trace, work)
    fma_note(eff, work)
    return eff


def _xla_part(details: pd.Index) -> np.ndarray:
    """The ``xla_flops:F xla_bytes:B`` part of each details text (NaN: none)."""
    return details.astype(str).str.extract(r"(xla_flops:-?\d+ xla_bytes:-?\d+)",
                                           expand=False).to_numpy(object)


def _device_name(trace: Trace, work: pd.DataFrame) -> str | None:
    """The name of the device with the most kernel time (the CPU's on a CPU trace)."""
    if trace.is_cpu:
        return (trace.meta.get("runner") or {}).get("device_name") or "CPU"
    devices = trace.meta.get("devices") or {}
    if not isinstance(devices, dict) or not devices:
        return None
    busiest = work.groupby("device")["dur_ns"].sum()
    if len(busiest) and str(int(busiest.idxmax())) in devices:
        return str(devices[str(int(busiest.idxmax()))])
    return str(next(iter(devices.values())))


def _share(k: pd.DataFrame) -> None:
    """Each op call's FLOPs over its matrix kernels (all of them where it has none) and
    its bytes over all of its kernels, in proportion to device time."""
    inst = k["inst"].to_numpy()
    dur = k["dur"].to_numpy()
    valid = k["covered"].to_numpy()
    matrix = k["matrix"].to_numpy()
    key = pd.Series(np.where(valid, inst, -1))
    total = key.map(pd.Series(dur).groupby(key).sum()).to_numpy()
    has_matrix = key.map(pd.Series(matrix).groupby(key).any()).to_numpy(dtype=bool)
    flop_weight = np.where(has_matrix, np.where(matrix, dur, 0.0), dur)
    flop_total = key.map(pd.Series(flop_weight).groupby(key).sum()).to_numpy()
    op_flops = pd.to_numeric(k["op_flops"], errors="coerce").to_numpy(np.float64)
    op_bytes = pd.to_numeric(k["op_bytes"], errors="coerce").to_numpy(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        # a call whose kernels all took 0 ns: shared equally
        n = key.map(key.value_counts()).to_numpy(np.float64)
        f_part = np.where(flop_total > 0, flop_weight / flop_total, 1.0 / n)
        b_part = np.where(total > 0, dur / total, 1.0 / n)
    k["flops"] = np.where(valid, np.nan_to_num(op_flops * f_part), 0.0)
    k["bytes"] = np.where(valid, np.nan_to_num(op_bytes * b_part), 0.0)
    k["has_flops"] = valid & ~np.isnan(op_flops)
    k["has_bytes"] = valid & ~np.isnan(op_bytes)


def _rates(t: pd.DataFrame, peak: Peak | None) -> pd.DataFrame:
    """TFLOP/s, GB/s, intensity, % of the applicable peak and of bandwidth, bound."""
    time = t["time_ns"].to_numpy(np.float64)
    flops = t["flops"].to_numpy(np.float64)
    nbytes = t["bytes"].to_numpy(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        t["tflops"] = np.where(t["has_flops"] & (time > 0), flops / time / 1e3, np.nan)
        t["gbps"] = np.where(t["has_bytes"] & (time > 0), nbytes / time, np.nan)
        t["intensity"] = np.where(t["has_flops"] & t["has_bytes"] & (nbytes > 0),
                                  flops / nbytes, np.nan)
    keys, peaks = [], []
    for prec, unit, tf32 in zip(t["precision"], t["unit"], t["tf32"], strict=True):
        hit = peak.applicable(prec, unit or "vector", bool(tf32)) if peak else None
        keys.append(hit[0] if hit else None)
        peaks.append(hit[1] if hit else np.nan)
    t["peak_key"] = keys
    peak_arr = np.asarray(peaks, dtype=np.float64)
    bw = peak.bandwidth if peak and peak.bandwidth else np.nan
    t["pct_peak"] = t["tflops"].to_numpy(np.float64) / peak_arr
    t["pct_bw"] = t["gbps"].to_numpy(np.float64) / bw
    ridge = peak_arr * 1e3 / bw  # FLOP per byte where the roofs meet
    inten = t["intensity"].to_numpy(np.float64)
    bound = np.where(np.nan_to_num(inten, nan=0.0) >= ridge, "compute", "memory")
    unknown = np.isnan(ridge) | ~t["has_bytes"].to_numpy(bool)
    t["bound"] = pd.Series(bound, dtype=object).where(~unknown, None).to_numpy()
    return t


def _majority(c: pd.DataFrame, key: str, col: str) -> pd.Series:
    """Per ``key``, the most frequent non-null ``col`` (the smallest on a tie, as
    ``Series.mode`` orders them), counted per distinct pair, not per row."""
    n = c.groupby([key, col], sort=True).size().rename("_n").reset_index()
    return n.sort_values([key, "_n"], ascending=[True, False], kind="stable") \
        .drop_duplicates(key).set_index(key)[col]


def _groups(k: pd.DataFrame, peak: Peak | None) -> pd.DataFrame:
    c = k[k["covered"]].copy()
    if not len(c):
        return pd.DataFrame(columns=GROUP_COLUMNS)
    # the regexes run once per distinct details text, not per kernel
    codes, texts = pd.factorize(c["details"].to_numpy(object))
    texts = pd.Series(texts, dtype=object).astype(str).str
    c["dims"] = texts.extract(r"^dims:(.*?) types:", expand=False).fillna("").to_numpy(
        object)[codes]
    c["types"] = texts.extract(r" types:(.*?)(?: concrete:|$)", expand=False).fillna(
        "").to_numpy(object)[codes]
    c["tf32_ns"] = np.where(c["tf32"], c["dur"], 0.0)
    c["matrix_ns"] = np.where(c["matrix"], c["dur"], 0.0)
    g = c.groupby(["op", "dims", "types"], sort=False).agg(
        precision=("precision", "first"), unit=("unit", "first"), calls=("inst", "nunique"),
        kernels=("dur", "size"), time_ns=("dur", "sum"), flops=("flops", "sum"),
        bytes=("bytes", "sum"), has_flops=("has_flops", "all"),
        has_bytes=("has_bytes", "all"), tf32_ns=("tf32_ns", "sum"),
        matrix_ns=("matrix_ns", "sum")).reset_index()
    g["tf32"] = g["tf32_ns"] > 0.5 * g["matrix_ns"]
    g = _rates(g, peak).sort_values("time_ns", ascending=False, kind="stable")
    g["time_ns"] = g["time_ns"].astype(np.int64)
    g["flops"] = g["flops"].round().astype(np.int64)
    g["bytes"] = g["bytes"].round().astype(np.int64)
    return g[GROUP_COLUMNS].reset_index(drop=True)


def _kernel_groups(k: pd.DataFrame, peak: Peak | None) -> pd.DataFrame:
    c = k[k["covered"]]
    if not len(c):
        return pd.DataFrame(columns=["kernel", "category", *GROUP_COLUMNS[3:]])
    g = c.groupby("kernel", sort=False).agg(
        category=("category", "first"), calls=("inst", "nunique"), kernels=("dur", "size"),
        time_ns=("dur", "sum"), flops=("flops", "sum"), bytes=("bytes", "sum"),
        has_flops=("has_flops", "all"), has_bytes=("has_bytes", "all"),
        tf32=("tf32", "any")).reset_index()
    for col in ("precision", "unit"):
        g.insert(2 if col == "precision" else 3, col, g["kernel"].map(
            _majority(c, "kernel", col)).astype(object).where(lambda s: s.notna(), None))
    g = _rates(g, peak).sort_values("time_ns", ascending=False, kind="stable")
    g["time_ns"] = g["time_ns"].astype(np.int64)
    g["flops"] = g["flops"].round().astype(np.int64)
    g["bytes"] = g["bytes"].round().astype(np.int64)
    return g[["kernel", "category", *GROUP_COLUMNS[3:]]].reset_index(drop=True)


def _uncovered(k: pd.DataFrame, no_op: str, own_name: bool = False) -> pd.DataFrame:
    """Work without figures, grouped by op and reason. ``own_name``: a CPU trace's work
    rows are ops themselves, named as such where no modelled op was found for them."""
    u = k[~k["covered"]].copy()
    total = float(k["dur"].sum()) or 1.0
    unnamed = (u["op"] == "").to_numpy()
    u["op"] = np.where(unnamed, u["kernel"] if own_name else "(no op)", u["op"])
    u["note"] = np.where(unnamed, no_op, u["note"].fillna("no model for this op"))
    g = u.groupby(["op", "note"], sort=False).agg(kernels=("dur", "size"),
                                                  time_ns=("dur", "sum")).reset_index()
    g["share"] = g["time_ns"] / total
    g["time_ns"] = g["time_ns"].astype(np.int64)
    return g.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)


def _run_key(groups: pd.DataFrame, peak: Peak | None) -> str | None:
    """The peak of the precision doing most of the matrix FLOPs."""
    m = groups[(groups["unit"] == "matrix") & groups["peak_key"].notna()]
    if not len(m) or peak is None:
        return None
    return str(m.groupby("peak_key")["flops"].sum().idxmax())
