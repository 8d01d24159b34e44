"""How far the work is from the hardware: FLOPs and bytes per op group and per kernel,
achieved TFLOP/s and GB/s against the device's peak, the roofline bound, and the model's
TFLOP/s and MFU.

Work per op comes from ``traceviz.opcost`` (recorded shapes and dtypes); an op reaches
its kernels through the one launch link (the innermost op around each kernel's launch
call). An op call with several kernels shares its FLOPs among its matrix kernels (gemm,
rnn, attention; all of its kernels where it has none) and its bytes among all of its
kernels, in proportion to their device time. Peaks come from ``traceviz.opcost.peaks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import each, per_distinct
from traceviz.algos.intervals import innermost_enclosing
from traceviz.algos.optree import op_parents, thread_key
from traceviz.algos.unique import unique_first
from traceviz.analyses.efficiency.conv import with_related_shapes
from traceviz.analyses.efficiency.groups import (
    KernelColumns,
    kernel_groups,
    op_groups,
    uncovered_groups,
)
from traceviz.analyses.efficiency.workload import (
    apply_workload_flops,
    fma_note,
    model_figures,
    over_peak_notes,
    shapes_note,
    stated_peak,
)
from traceviz.analyses.stats import plain_row
from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.analyses.work import missing_activity, work_rows
from traceviz.opcost import has_model, op_cost
from traceviz.opcost.peaks import Peak, find
from traceviz.table.classify import TF32_KERNEL
from traceviz.table.schema import is_in

if TYPE_CHECKING:  # the Summary type only: figures.py imports the registry
    from traceviz.analyses.summary.figures import Summary
    from traceviz.trace import Trace

MATRIX_CATEGORIES = ("gemm", "rnn", "attention")
OVER_PEAK = 1.05  # an achieved rate above its peak by more than timing noise


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
    flops: int | None           # None: no op gave a FLOP figure (no shapes, no cost)
    bytes: int | None           # None: no op gave a byte figure
    busy_ns: int
    span_ns: int
    steps: int
    run_key: str | None         # the peak the run's MFU is held against
    model: dict[str, Any] | None = None  # workload FLOPs per batch, model TFLOP/s, MFU
    notes: list[str] = field(default_factory=list)
    flops_from: str = "ops"     # "workload": no op gave FLOPs, the run's own are used
    # why there are no figures at all (the kernels' time is not in the trace)
    reason: str | None = None
    cpu: bool = False           # a CPU trace: the "kernels" are the host threads' CPU ops

    @property
    def coverage(self) -> float | None:
        return self.covered_ns / self.time_ns if self.time_ns else None

    @property
    def tflops_busy(self) -> float | None:
        """FLOPs over busy time; None where the FLOPs are unknown, never 0."""
        return self.flops / self.busy_ns / 1e3 if self.busy_ns and self.flops is not None \
            else None

    @property
    def tflops_span(self) -> float | None:
        return self.flops / self.span_ns / 1e3 if self.span_ns and self.flops is not None \
            else None

    @property
    def run_peak(self) -> float | None:
        return self.peak.figures.get(self.run_key) if self.peak and self.run_key else None

    @property
    def mfu_trace(self) -> float | None:
        """Achieved TFLOP/s over the analysed span against the run's peak."""
        peak, t = self.run_peak, self.tflops_span
        return t / peak if peak and t is not None else None

    def to_dict(self, top: int = 20) -> dict[str, Any]:
        """The section as ``--json`` holds it; a CPU trace's rates also in GFLOP/s
        (``gflops``, ``gflops_busy``, ``gflops_span``, ``model_gflops``), as it prints
        them."""
        p = self.peak

        def giga(x: float | None) -> float | None:
            return None if x is None or x != x else x * 1e3

        model = (self.model or {}).get("model_tflops")
        cpu_run = {"gflops_busy": giga(self.tflops_busy), "gflops_span": giga(
            self.tflops_span), **({"model_gflops": giga(model)} if model is not None
                                  else {})} if self.cpu else {}
        frames = {name: frame.assign(gflops=frame["tflops"] * 1e3) if self.cpu
                  and "tflops" in frame else frame
                  for name, frame in (("groups", self.groups), ("kernels", self.kernels),
                                      ("uncovered", self.uncovered))}
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
                    **(self.model or {}), **cpu_run},
            **{name: [plain_row(r) for r in frame.head(top).to_dict("records")]
               for name, frame in frames.items()},
            "notes": self.notes,
            **({"reason": self.reason} if self.reason else {}),
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
    # the columns' rows, not frames of every column; the calls only ask (the ops' own
    # parents, which parents_and_enclosing adds, are not needed here)
    pid, tid = ev["pid"].to_numpy(), ev["tid"].to_numpy()
    ts = ev["ts_ns"].to_numpy(np.int64)
    start = ts[ops]
    around = innermost_enclosing(
        thread_key(pid[ops], tid[ops]), start, start + ev["dur_ns"].to_numpy(np.int64)[ops],
        thread_key(pid[calls], tid[calls]), ts[calls])
    call_op = np.where(around >= 0, ops[np.maximum(around, 0)], -1)
    # a launch id on several calls (a table written elsewhere): the first call's op
    ids, first = unique_first(ev["launch_id"].to_numpy()[calls])
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


def _cost_columns(names: np.ndarray, details: np.ndarray) -> dict[str, Any]:
    """FLOPs and bytes (float, NaN: none), precision and unit (Series, typed as pandas
    infers them) and note per (name, details) pair, one formula call per distinct pair."""
    n_codes, _ = pd.factorize(names, use_na_sentinel=False)
    d_codes, d_uniques = pd.factorize(details, use_na_sentinel=False)
    _, at, pair = np.unique(n_codes.astype(np.int64) * len(d_uniques) + d_codes,
                            return_index=True, return_inverse=True)
    costs = [op_cost(names[i], details[i]) for i in at]

    def figure(x: int | float | None) -> float:
        return np.nan if x is None else float(x)

    def text(values: list) -> pd.Series:
        # a column of the distinct pairs, spread over the rows: the types pandas gives
        # (inferred from the distinct values, which are the rows' values: every pair is
        # some row's), taken per row without inferring them again per row
        typed = pd.Series(pd.Series(values).to_numpy(dtype=object))
        return pd.Series(typed.array.take(pair))

    return {"flops": np.array([figure(c.flops if c else None) for c in costs],
                              dtype=np.float64)[pair],
            "bytes": np.array([figure(c.bytes if c else None) for c in costs],
                              dtype=np.float64)[pair],
            "precision": text([c.precision if c else None for c in costs]),
            "unit": text([c.unit if c else None for c in costs]),
            "note": np.array([(c.note if c else "no model for this op") for c in costs],
                             dtype=object)[pair]}


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
        if peak is not None and peak.partial:
            notes.append(derived_note(device, peak))
    ev = trace.events
    op_row = op_of_kernels(trace, work)
    # an XSpace op with XLA's cost analysis is its own op: its row carries the figures
    # once per distinct details text, not per kernel
    own = pd.Series(per_distinct(work["details"], _xla_part), index=work.index, dtype=object)
    xla = own.notna().to_numpy()
    op_row = np.where(xla, work.index.to_numpy(), op_row)
    has_op = op_row >= 0
    at = np.maximum(op_row, 0)
    names = np.where(has_op, _values_at(ev["name"], at), "")
    details = np.where(has_op, _values_at(ev["details"], at), "")
    if xla.any():
        label = work["op"].astype(object).where(work["op"].notna(),
                                                work["name"].astype(object))
        names = np.where(xla, label.astype(str).to_numpy(), names)
        details = np.where(xla, own.fillna("").to_numpy(), details)
    details = with_related_shapes(ev, op_row, names.astype(object), _as_text(details))
    cost = _cost_columns(names.astype(object), details)
    dur = work["dur_ns"].to_numpy(np.float64)
    category = _text_of(work["category"])
    matrix = np.isin(category, MATRIX_CATEGORIES)
    tf32_name = per_distinct(work["name"], lambda n: np.array(
        [bool(TF32_KERNEL.search(str(x))) for x in n], dtype=bool), fill=False)
    k = KernelColumns(
        kernel=_text_of(work["name"]), category=category, dur=dur, inst=op_row,
        op=names.astype(object), details=details, precision=cost["precision"],
        unit=cost["unit"], note=cost["note"],
        covered=has_op & (~np.isnan(cost["flops"]) | ~np.isnan(cost["bytes"])),
        matrix=matrix, tf32=(cost["precision"] == "fp32").to_numpy(bool) & matrix
        & np.asarray(tf32_name, dtype=bool),
        flops=cost["flops"], bytes=cost["bytes"],
        has_flops=np.zeros(0, bool), has_bytes=np.zeros(0, bool))
    _share(k)
    groups = op_groups(k, peak)
    kernels = kernel_groups(k, peak)
    uncovered = uncovered_groups(k, "XLA gave no cost for this op" if
                                 trace.meta.get("source_format") == "xplane" else
                                 "no formula for this op or any op inside it" if trace.is_cpu
                                 else "no framework op around the launch",
                                 own_name=trace.is_cpu)
    run_key = _run_key(groups, peak)
    eff = Efficiency(
        cpu=trace.is_cpu, device=device, peak=peak, groups=groups, kernels=kernels,
        uncovered=uncovered,
        time_ns=int(dur.sum()), covered_ns=int(dur[k.covered].sum()),
        # pandas' sums, as before (its own summation where bottleneck is installed)
        # a sum over no known figure is unknown, not 0 (a trace without shapes)
        flops=int(pd.Series(k.flops).sum()) if k.has_flops.any() else None,
        bytes=int(pd.Series(k.bytes).sum()) if k.has_bytes.any() else None,
        busy_ns=busy_ns,
        span_ns=span_ns, steps=steps, run_key=run_key, notes=notes)
    if missing_activity(trace):
        # a rate needs the kernels' time: the host's time in its place would be no rate
        eff.reason = ("no kernel records: a FLOP rate needs the kernels' time, and the "
                      "host's time is not it")
    eff.model = model_figures(trace.meta, eff.run_peak)
    eff.notes.extend(over_peak_notes(groups, peak, OVER_PEAK))
    if not xla.any() and (not (ev["kind"] == "op").any() or not per_distinct(
            ev["details"], lambda d: d.astype(str).str.startswith("dims:"), False).any()):
        eff.notes.append(shapes_note(trace))
    apply_workload_flops(eff, trace, work)
    fma_note(eff, work)
    return eff


def derived_note(device: str | None, peak: Peak) -> str:
    """What a derived peak is made of, once."""
    unknown = "; no tensor-core peak (half, bf16 and TF32 work is shown without % of " \
        "peak; give it with --peak)" if "fp32" in peak.figures else ""
    return (f"The peak of {device!r} is not in traceviz's table: derived from the profile's "
            f"device properties ({peak.note}){unknown}.")


def _values_at(col: pd.Series, rows: np.ndarray) -> np.ndarray:
    """``col.astype(object).to_numpy()[rows]``: of a categorical, only those rows read."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        text = np.append(col.cat.categories.to_numpy(dtype=object), np.nan)
        return text[col.cat.codes.to_numpy()[rows]]
    return col.astype(object).to_numpy()[rows]


def _text_of(col: pd.Series) -> np.ndarray:
    """``col.astype(str).to_numpy()``, once per category of a categorical."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy()
        if not (codes < 0).any():  # a missing value: as astype(str) writes it, below
            return col.cat.categories.astype(str).to_numpy(dtype=object)[codes]
    return col.astype(str).to_numpy(dtype=object)


def _as_text(values: np.ndarray) -> np.ndarray:
    """``Series(values, dtype=object).fillna("").astype(str)`` as objects, once per
    distinct value."""
    codes, uniques = pd.factorize(values)
    text = pd.Series(uniques, dtype=object).astype(str).to_numpy(dtype=object)
    return np.append(text, "")[codes]


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


def _share(k: KernelColumns) -> None:
    """Each op call's FLOPs over its matrix kernels (all of them where it has none) and
    its bytes over all of its kernels, in proportion to device time."""
    valid = k.covered
    dur = k.dur
    # per op call (all uncovered kernels: one key): sums of whole ns, exact in float64
    key = pd.factorize(np.where(valid, k.inst, -1))[0]
    n_keys = int(key.max()) + 1 if len(key) else 0
    total = np.bincount(key, weights=dur, minlength=n_keys)[key]
    has_matrix = np.bincount(key, weights=k.matrix.astype(np.float64),
                             minlength=n_keys)[key] > 0
    flop_weight = np.where(has_matrix, np.where(k.matrix, dur, 0.0), dur)
    flop_total = np.bincount(key, weights=flop_weight, minlength=n_keys)[key]
    with np.errstate(invalid="ignore", divide="ignore"):
        # a call whose kernels all took 0 ns: shared equally
        n = np.bincount(key, minlength=n_keys)[key].astype(np.float64)
        f_part = np.where(flop_total > 0, flop_weight / flop_total, 1.0 / n)
        b_part = np.where(total > 0, dur / total, 1.0 / n)
    op_flops, op_bytes = k.flops, k.bytes
    k.flops = np.where(valid, np.nan_to_num(op_flops * f_part), 0.0)
    k.bytes = np.where(valid, np.nan_to_num(op_bytes * b_part), 0.0)
    k.has_flops = valid & ~np.isnan(op_flops)
    k.has_bytes = valid & ~np.isnan(op_bytes)


def _run_key(groups: pd.DataFrame, peak: Peak | None) -> str | None:
    """The peak of the precision doing most of the matrix FLOPs."""
    m = groups[(groups["unit"] == "matrix") & groups["peak_key"].notna()]
    if not len(m) or peak is None:
        return None
    return str(m.groupby("peak_key")["flops"].sum().idxmax())


def _compute(i: Inputs, s: Summary) -> Efficiency | None:
    """analyze's Efficiency section (None unless made ``with_efficiency``: ranks skip it)."""
    return efficiency(i.trace, i.peak, s.busy_ns, s.span_ns, s.steps) \
        if i.with_efficiency else None


def _json(s: Summary, top: int) -> dict[str, Any]:
    return {"efficiency": s.efficiency.to_dict(top=top)} if s.efficiency else {}


SECTION = Section(_json, _compute)
