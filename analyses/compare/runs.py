"""Side-by-side figures of several runs, kernel-level differences, mean percentage error."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.categorical import per_distinct
from traceviz.analyses.summary.figures import Summary, summarize
from traceviz.analyses.summary.kernel_time import category_busy_ns
from traceviz.analyses.timings import Timings
from traceviz.analyses.work import analysis_windows, step_count, wall_windows, work_rows
from traceviz.opcost.peaks import Peak
from traceviz.table.classify import tensor_core_flags
from traceviz.table.meta import TraceMeta
from traceviz.table.schema import CATEGORIES

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace


@dataclass
class RunFigures:
    """What `traceviz compare` puts in one column."""

    label: str
    meta: TraceMeta
    cpu_trace: bool
    time_per_batch_s: float | None
    sequences_per_s: float | None
    batch_times_s: list[float]
    steps: int
    busy_ns: int
    span_ns: int
    idle_fraction: float | None          # 1 - busy / span (framework overhead on a CPU)
    launch_bound_fraction: float | None  # host wait / span (GPU traces)
    host_wait_ns: int | None
    queued_idle_ns: int | None
    kernel_count: int
    category_ns: dict[str, int]          # summed kernel time (overlaps counted twice)
    category_busy_ns: dict[str, int]     # busy time shared among categories: sums to busy
    cast_ns: int
    tensor_core_share: float | None
    top_kernel: str                      # the kernel (CPU: leaf op) with the most time
    top_kernel_share: float              # its share of kernel time
    timings: Timings | None              # spread, noise, warm-up (None without a bench)
    summary: Summary = field(repr=False)  # the analysis the figures come from
    model_tflops: float | None = None    # workload FLOPs per batch / median timed batch
    mfu: float | None = None             # model TFLOP/s / the run's peak (mfu_key)
    mfu_key: str | None = None
    peak_memory_bytes: int | None = None  # the timed batches' peak (bench.json memory)
    peak_memory_what: str = ""           # "allocated" (a device allocator) or "RSS growth"
    batch: int | None = None             # samples per step (the workload's, or a script's
                                         # --batch-size); None where unknown

    @property
    def time_per_sample_s(self) -> float | None:
        """The median timed batch over its samples (None without both)."""
        if self.time_per_batch_s is None or not self.batch:
            return None
        return self.time_per_batch_s / self.batch

    @property
    def per_step(self) -> int:
        return max(self.steps, 1)

    @property
    def utilization(self) -> dict[str, Any] | None:
        """bench.json's utilization and energy over the timed batches (None before it)."""
        return (self.meta.get("bench") or {}).get("utilization")

    def to_dict(self) -> dict[str, Any]:
        """``compare --json``'s object of one run: device figures per profiled step (a run
        without steps: its whole window), as ``compare`` prints them."""
        per = self.per_step
        t = self.timings
        phases = self.summary.phases
        return {
            "label": self.label, "trace_type": "cpu" if self.cpu_trace else "gpu",
            "steps": self.steps,
            "time_per_batch_s": self.time_per_batch_s,
            "timings": None if t is None else t.to_dict(),
            "sequences_per_s": self.sequences_per_s,
            "batch": self.batch, "time_per_sample_s": self.time_per_sample_s,
            "model_tflops": self.model_tflops, "mfu": self.mfu, "mfu_key": self.mfu_key,
            # a CPU run prints its model rate in GFLOP/s
            **({"model_gflops": None if self.model_tflops is None else
                self.model_tflops * 1e3} if self.cpu_trace else {}),
            "peak_memory_bytes": self.peak_memory_bytes,
            "peak_memory_what": self.peak_memory_what or None,
            "utilization": self.utilization,
            "idle_fraction": self.idle_fraction,
            "launch_bound_fraction": self.launch_bound_fraction,
            "tensor_core_share": self.tensor_core_share,
            "top_kernel": self.top_kernel, "top_kernel_share": self.top_kernel_share,
            "timed_step": None if self.summary.timed is None else self.summary.timed.to_dict(),
            **self.summary.section_json("host"),
            **self.summary.section_json("stream_overlap"),
            "per_step": {
                "busy_ns": self.busy_ns / per, "span_ns": self.span_ns / per,
                "queued_idle_ns": None if self.queued_idle_ns is None
                else self.queued_idle_ns / per,
                "kernels": self.kernel_count / per, "cast_ns": self.cast_ns / per,
                "category_ns": {c: v / per for c, v in self.category_ns.items() if v},
                "phases": [{"phase": str(r.phase), "wall_ns": r.wall_ns / per,
                            "busy_ns": r.busy_ns / per, "kernels": r.kernels / per}
                           for r in phases.itertuples(index=False)],
            },
        }


# matrix work: what tensor cores run and mixed precision should speed up
MATRIX_CATEGORIES = ("gemm", "attention", "rnn")


def tensor_core_share(work: pd.DataFrame) -> float | None:
    """Share of matrix (gemm/attention/rnn) time in kernels on tensor cores: TF32,
    half, bf16 or fp8 paths (None on CPU or without matrix kernels)."""
    mat = work[work["category"].isin(MATRIX_CATEGORIES)]
    total = int(mat["dur_ns"].sum())
    if not total:
        return None
    flags = per_distinct(mat["name"], tensor_core_flags, fill=False)
    return float(mat["dur_ns"].to_numpy()[flags].sum()) / total


def peak_memory(bench: dict) -> tuple[int | None, str]:
    """The timed batches' peak memory a runner measured: a device allocator's peak
    allocated bytes, else (a CPU run) the growth of the process's peak resident set."""
    mem = bench.get("memory") or {}
    if mem.get("peak_allocated_bytes") is not None:
        return int(mem["peak_allocated_bytes"]), "allocated"
    if mem.get("peak_rss_growth_bytes") is not None:
        return int(mem["peak_rss_growth_bytes"]), "RSS growth"
    return None, ""


def run_figures(trace: Trace, label: str, summary: Summary | None = None,
                peak: Peak | None = None) -> RunFigures:
    """One run's figures; ``summary``: the trace's ``summarize`` result (with efficiency)
    if already made; ``peak``: the device's peaks its MFU is held against (``--peak``;
    None: the trace's device's)."""
    s = summary if summary is not None and summary.efficiency is not None \
        else summarize(trace, with_efficiency=True, peak=peak)
    eff = s.efficiency
    model = (eff.model if eff else None) or {}
    work = work_rows(trace)
    bench = trace.meta.get("bench") or {}
    mem_bytes, mem_what = peak_memory(bench)
    tpb = (bench.get("time_per_batch_s") or {}).get("median")
    batch = (trace.meta.get("workload") or {}).get("batch")
    batch = int(batch) if isinstance(batch, int) and batch > 0 else None
    rate = bench.get("sequences_per_s")
    if rate is None and batch and tpb:  # a script's run: its batch size over the median
        rate = batch / tpb
    cats = s.categories.set_index("category")["total_ns"]
    return RunFigures(
        label=label,
        meta=trace.meta,
        cpu_trace=s.cpu_trace,
        time_per_batch_s=tpb,
        sequences_per_s=rate,
        batch_times_s=list(bench.get("batch_times_s") or ([tpb] if tpb else [])),
        steps=s.steps,
        busy_ns=s.busy_ns,
        span_ns=s.span_ns,
        idle_fraction=s.idle_fraction,
        launch_bound_fraction=s.launch_bound_fraction,
        host_wait_ns=s.host_wait_ns,
        queued_idle_ns=s.queued_idle_ns,
        kernel_count=s.kernel_count,
        category_ns={c: int(cats.get(c, 0)) for c in CATEGORIES},
        category_busy_ns=category_busy_ns(work, analysis_windows(trace, work)),
        cast_ns=s.casts.total_ns,
        tensor_core_share=None if s.cpu_trace else tensor_core_share(work),
        top_kernel=str(s.kernels["name"].iloc[0]) if len(s.kernels) else "",
        top_kernel_share=float(s.kernels["share"].iloc[0]) if len(s.kernels) else 0.0,
        timings=s.timings,
        summary=s,
        model_tflops=model.get("model_tflops"),
        mfu=model.get("mfu"),
        mfu_key=eff.run_key if eff else None,
        peak_memory_bytes=mem_bytes,
        peak_memory_what=mem_what,
        batch=batch,
    )


LIKE_FOR_LIKE = ("mode", "device_kind", "preset")


def workload_differences(runs: list[RunFigures]) -> list[str]:
    """What differs between the runs besides the variant and precision (mode, device,
    preset, shapes): a reason their figures are not like for like. Empty when the
    runs carry no such metadata or agree."""
    out = []
    for key in LIKE_FOR_LIKE:
        values = [r.meta.get(key) for r in runs]
        if len({v for v in values if v is not None}) > 1:
            out.append(f"{key.replace('_kind', '')} ({', '.join(str(v) for v in values)})")
    for what, names in (("device", [_device_names(r.meta) for r in runs]),
                        ("framework", [_framework(r.meta) for r in runs])):
        if len({v for v in names if v}) > 1:
            out.append(f"{what} ({', '.join(v or '?' for v in names)})")
    shapes = [{k: (r.meta.get("workload") or {}).get(k) for k in ("batch", "seq", "hidden",
                                                                  "layers")} for r in runs]
    if all(any(v is not None for v in s.values()) for s in shapes) and len(
            {tuple(s.values()) for s in shapes}) > 1:
        out.append("shape (" + ", ".join(shape_text(s) for s in shapes) + ")")
    return out


def shape_text(workload: dict[str, Any]) -> str:
    """A workload's shape as ``b32 s35 2x200``, each part only where known (a script's
    run knows its batch size at most); "–" where none is."""
    w = workload
    parts = [f"b{w['batch']}" if w.get("batch") is not None else "",
             f"s{w['seq']}" if w.get("seq") is not None else "",
             f"{w.get('layers', '?')}x{w['hidden']}" if w.get("hidden") is not None else ""]
    return " ".join(p for p in parts if p) or "–"


def _device_names(meta: TraceMeta) -> str:
    """The devices the run used by name: the runner's record, else the trace's (the host's
    CPU: empty). An XSpace may name a GPU only "/device:GPU:0"."""
    runner = (meta.get("runner") or {}).get("device_name")
    if runner and meta.get("device_kind") != "cpu":
        return str(runner)
    names = sorted({str(v) for v in (meta.get("devices") or {}).values() if v})
    return ", ".join(names)


def _framework(meta: TraceMeta) -> str:
    """The framework that ran: the runner's record, else what the trace's format says."""
    runner = (meta.get("runner") or {}).get("framework")
    if runner:
        return str(runner)
    return {"kineto": "torch", "xplane": "tensorflow/jax", "mxnet": "mxnet"}.get(
        str(meta.get("source_format")), "")


def ordering_conflicts(runs: list[RunFigures]) -> list[str]:
    """Pairs of runs whose profiled steps and timed steps rank them the other way round:
    the profiler slowed one more than the other, and the trace's ranking is not the
    one a user pays."""
    out = []
    known = [r for r in runs if r.steps and r.time_per_batch_s]
    for i, a in enumerate(known):
        for b in known[i + 1:]:
            pa, pb = a.span_ns / a.per_step, b.span_ns / b.per_step
            ta, tb = a.time_per_batch_s, b.time_per_batch_s
            assert ta is not None and tb is not None
            if (pa - pb) * (ta - tb) < 0:
                fast_p, slow_p = (a, b) if pa < pb else (b, a)
                out.append(
                    f"{fast_p.label} is faster profiled ({_ms(fast_p)} vs {_ms(slow_p)} per "
                    f"profiled step) but slower timed ({_timed(fast_p)} vs {_timed(slow_p)} "
                    f"per batch, no profiler): profiler overhead "
                    f"{_over(fast_p)} vs {_over(slow_p)}; judge speed by the timed step")
    return out


def _ms(r: RunFigures) -> str:
    from traceviz.units import fmt_ns

    return fmt_ns(r.span_ns / r.per_step)


def _timed(r: RunFigures) -> str:
    from traceviz.units import fmt_ns

    return fmt_ns((r.time_per_batch_s or 0) * 1e9)


def _over(r: RunFigures) -> str:
    t = r.summary.timings
    return t.overhead_text if t is not None and t.profiler_overhead is not None else "?"


def mean_percentage_error(a: list[float], b: list[float]) -> float | None:
    """100 x mean((a_k - b_k) / b_k) over paired values: negative when b is slower.

    Runs pair their timed batches by index; sweeps pair their points.
    """
    n = min(len(a), len(b))
    if n == 0:
        return None
    x = np.asarray(a[:n], dtype=float)
    y = np.asarray(b[:n], dtype=float)
    ok = y > 0
    if not ok.any():
        return None
    return float(100 * np.mean((x[ok] - y[ok]) / y[ok]))


def mpe_table(runs: list[RunFigures]) -> pd.DataFrame:
    """Pairwise MPE of time per batch: row = first run, column = second run; only the
    runs with timed batches (a trace brought from elsewhere has none)."""
    runs = [r for r in runs if r.batch_times_s]
    labels = [r.label for r in runs]
    table = pd.DataFrame(index=labels, columns=labels, dtype=float)
    for a in runs:
        for b in runs:
            if a is not b:
                table.loc[a.label, b.label] = mean_percentage_error(a.batch_times_s,
                                                                    b.batch_times_s)
    return table


# windows this many times apart in length: their per-second rates are flagged
WINDOWS_APART = 2.0


def kernel_diff(a: Trace, b: Trace, tolerance: float = 0.05) -> pd.DataFrame:
    """Per kernel name (leaf op on a CPU trace): calls and time in each run, and what
    changed, with a change in call count kept apart from a change in time per call.

    With steps in both runs, ``count_*`` and ``ns_*`` are per step; otherwise per second
    of analysed window, since two windows of different length hold different numbers of
    calls (``attrs["unit"]`` says which; ``attrs["window_ns"]`` holds each run's window
    length, ``attrs["total_ns"]`` the time of all names per unit in each,
    ``attrs["total_change"]`` b's over a's minus 1, ``attrs["windows_apart"]`` the
    windows' length ratio where it is ``WINDOWS_APART`` or more without steps,
    ``attrs["cpu"]`` whether both are CPU traces: the names are CPU ops).
    ``calls_*``: raw counts; ``per_call_*``: mean ns per call (the name's total over its
    calls, so that the call count and the time per call multiply to the total and a
    "faster" name never took more time in the same number of calls);
    ``median_call_*``: the median call. ``change``: ``added``, ``removed``, or ``more
    calls``/``fewer calls`` and ``slower``/``faster`` (per call) where the figure moved by
    more than ``tolerance``, joined by ", "; ``same`` otherwise. Sorted by |delta_ns|.
    """
    per_step = step_count(a) > 0 and step_count(b) > 0
    windows: list[int] = []

    def per_name(t: Trace) -> pd.DataFrame:
        work = work_rows(t)
        ws, we = wall_windows(analysis_windows(t, work))
        windows.append(int((we - ws).sum()))
        per = float(step_count(t)) if per_step else max(windows[-1], 1) / 1e9
        g = work.groupby(work["name"].astype(str), observed=True)
        total = g["dur_ns"].sum()
        return pd.DataFrame({"category": g["category"].first().astype(str), "calls": g.size(),
                             "count": g.size() / per, "ns": total / per,
                             "per_call": total / g.size(), "median_call": g["dur_ns"].median()})

    pa, pb = per_name(a), per_name(b)
    both = pa.add_suffix("_a").join(pb.add_suffix("_b"), how="outer")
    both["category"] = both["category_a"].fillna(both["category_b"])
    both = both.drop(columns=["category_a", "category_b"])
    for col in ("calls_a", "calls_b", "count_a", "count_b", "ns_a", "ns_b"):
        both[col] = both[col].fillna(0.0)
    for col in ("calls_a", "calls_b"):
        both[col] = both[col].astype(np.int64)
    both["delta_ns"] = both["ns_b"] - both["ns_a"]
    both["change"] = _change(both, tolerance)
    both = both.reset_index().rename(columns={"index": "name"})
    order = both["delta_ns"].abs().sort_values(ascending=False, kind="stable").index
    out = both.loc[order].reset_index(drop=True)
    out.attrs["unit"] = "step" if per_step else "s"
    out.attrs["window_ns"] = windows
    out.attrs["cpu"] = a.is_cpu and b.is_cpu
    ta, tb = float(out["ns_a"].sum()), float(out["ns_b"].sum())
    out.attrs["total_ns"] = [ta, tb]  # per unit, every name: what the rows add up to
    out.attrs["total_change"] = (tb - ta) / ta if ta else None
    # per-second rates of windows far apart in length compare different stretches of
    # the runs (a warm-up window beside a steady one): said beside the table
    ratio = max(windows) / min(windows) if min(windows) > 0 else None
    out.attrs["windows_apart"] = ratio if not per_step and ratio is not None \
        and ratio >= WINDOWS_APART else None
    return out


def _change(d: pd.DataFrame, tolerance: float) -> np.ndarray:
    calls = d["count_b"] / d["count_a"].where(d["count_a"] > 0) - 1
    per_call = d["per_call_b"] / d["per_call_a"].where(d["per_call_a"] > 0) - 1
    calls_part = pd.Series(np.where(calls > tolerance, "more calls",
                                    np.where(calls < -tolerance, "fewer calls", "")))
    call_part = pd.Series(np.where(per_call > tolerance, "slower",
                                   np.where(per_call < -tolerance, "faster", "")))
    # counts within the tolerance and a mean per call just past it can still move the
    # total the other way: the verdict never contradicts the name's total
    against = ((call_part == "slower") & (d["delta_ns"] <= 0).to_numpy()) | (
        (call_part == "faster") & (d["delta_ns"] >= 0).to_numpy())
    call_part = call_part.where(~(against & (calls_part == "")), "")
    sep = np.where((calls_part != "") & (call_part != ""), ", ", "")
    joined = (calls_part + sep + call_part).replace("", "same").to_numpy(object)
    return np.where(d["count_a"] == 0, "added", np.where(d["count_b"] == 0, "removed", joined))


CHANGES = ("added", "removed", "more calls", "fewer calls", "faster", "slower", "same")
