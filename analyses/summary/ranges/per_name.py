"""The Ranges section of ``analyze``: time per user range name (NVTX, record_function,
TraceMe), equal to Nsight Systems' ``nvtxsum`` on the same export, with the device work
launched inside each range (``nvtxgpuproj``, ``nvtxkernsum``) and a timeline of the
outermost ranges.

Per name (domain-qualified, ``MPI:MPI_Send``) and style: instances, total, share of all
ranges' total, mean, median, min, max and sample standard deviation of a range's
duration. PyTorch's ``emit_nvtx`` ranges (``aten::mm, seq = 12, op_id = 5``) are read as
the op they name, so they group by op. Every range counts, nested or not, as in
``nvtxsum``: shares add up to 100% over names, not over wall time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.algos.intervals import covered_until, union_blocks
from traceviz.analyses.stats import plain_row
from traceviz.analyses.summary.protocol import Inputs, Section
from traceviz.analyses.summary.ranges.instances import device_work, projection, range_rows
from traceviz.analyses.summary.ranges.per_kernel import kernels_per_range

if TYPE_CHECKING:  # types only
    from traceviz.analyses.summary.figures import Summary
    from traceviz.trace import Trace

COLUMNS = ("name", "style", "instances", "total_ns", "share", "avg_ns", "med_ns", "min_ns",
           "max_ns", "std_ns", "parent", "depth", "gpu_ops", "proj_ns", "kernels",
           "kernel_ns")
TOP = "\x1e"  # the parent of an outermost range (no name holds it; numpy drops a NUL)
STEP_PARENT = "(step)"  # a range's parent when that is a step mark
TIMELINE_CELLS = 60  # the width of the terminal's strip of the outermost ranges
TIMELINE_NAMES = 8  # names drawn by a letter each; the others share one mark


def range_table(ranges: pd.DataFrame, proj: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (name, style), by total time: ``instances``, ``total_ns``, ``share`` (of all
    ranges' total), ``avg_ns``, ``med_ns``, ``min_ns``, ``max_ns``, ``std_ns`` (sample,
    0 for one instance), ``parent`` (the name more than half of its instances sit in,
    ``(step)`` for a step mark; "" at the top or where no name holds half), ``depth``
    (its shallowest nesting level); with ``proj`` (``projection``) the device work
    launched inside: ``gpu_ops``, ``proj_ns`` (projected durations summed),
    ``kernels``, ``kernel_ns``."""
    if ranges.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("name", "style", "parent")
                                          else float) for c in COLUMNS})
    names = pd.Categorical(ranges["name"])
    codes = names.codes
    parent = ranges["parent"].to_numpy()
    # a parent that is a step mark is named "(step)": a range sits in a different step
    # each time, in the same place
    cats = [*names.categories.astype(str), TOP, STEP_PARENT]
    up = np.maximum(parent, 0)
    p_code = codes.astype(np.int32)[up]
    p_code[ranges["is_step"].to_numpy()[up]] = len(cats) - 1
    p_code[parent < 0] = len(cats) - 2
    del up
    style = pd.Categorical(ranges["style"])
    # int32 keys, arithmetic in place, each array let go once read: a million ranges'
    # transients stay three or four arrays
    wide = np.int64 if len(cats) ** 2 * len(style.categories) >= 2 ** 31 else np.int32
    group = codes.astype(wide) * len(style.categories) + style.codes
    # the parent more than half of the instances have ("" where none has: the instances
    # sit in different places)
    pairs, counts = np.unique(group * len(cats) + p_code, return_counts=True)
    del p_code
    dur = ranges["dur_ns"].to_numpy(np.int64)
    # numpy over groups sorted by (group, duration): the median is the middle row, min
    # and max the ends (pandas' groupby costs several times more on a few thousand rows)
    order = np.lexsort((dur, group))
    g = group[order]
    del group
    first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    n = np.diff(np.r_[first, len(g)])
    gc = g[first]
    del g
    x = dur[order]
    total = np.add.reduceat(x, first)
    mean = total / n
    lo, hi = first + (n - 1) // 2, first + n // 2
    figures = {"med_ns": (x[lo] + x[hi]) / 2, "min_ns": x[first], "max_ns": x[first + n - 1],
               "depth": np.minimum.reduceat(ranges["depth"].to_numpy()[order], first)}
    # no device work (the ranges of an export alone): zeros per name, not per range
    for col in ("gpu_ops", "proj_ns", "kernels", "kernel_ns"):
        figures[col] = np.zeros(len(first), dtype=np.int64) if proj is None or proj.empty \
            else np.add.reduceat(proj[col].reindex(np.arange(len(ranges)), fill_value=0)
                                 .to_numpy(np.int64)[order], first)
    del order
    dev = x.astype(np.float64)
    del x
    for a, b, m in zip(first.tolist(), (first + n).tolist(), mean.tolist(), strict=True):
        dev[a:b] -= m  # per name: no array of every range's mean
    dev *= dev
    var = np.add.reduceat(dev, first) / np.maximum(n - 1, 1)
    del dev
    out = pd.DataFrame({
        "name": names.categories.astype(str).to_numpy(object)[gc // len(style.categories)],
        "style": style.categories.astype(str).to_numpy(object)[gc % len(style.categories)],
        "instances": n, "total_ns": total, "avg_ns": mean,
        "std_ns": np.where(n > 1, np.sqrt(var), 0.0), **figures,
    })
    p_group, p_par = np.divmod(pairs, len(cats))
    best = np.lexsort((-counts, p_group))
    best = best[np.r_[True, p_group[best][1:] != p_group[best][:-1]]]  # one per group
    at = np.searchsorted(p_group[best], gc)
    held = counts[best][at] * 2 > n
    parent_name = np.asarray(cats, dtype=object)[p_par[best][at]]
    out["parent"] = np.where(held & (parent_name != TOP), parent_name, "")
    grand = out["total_ns"].sum()
    out["share"] = out["total_ns"] / grand if grand else 0.0
    out = out.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable")
    return out[list(COLUMNS)].reset_index(drop=True)


def timeline(ranges: pd.DataFrame, cells: int = TIMELINE_CELLS) -> list[dict[str, Any]]:
    """Per thread holding ranges: ``pid``, ``tid``, ``start_ns``, ``end_ns`` (its first
    range's start, its last range's end), ``covered_ns`` (time inside an outermost
    range), ``outermost`` (their count), ``names`` (the outermost names drawn, by time),
    ``cells``: per equal slice of the span, the index into ``names`` of the name
    covering most of it (``len(names)``: another name; -1: no range), and ``cycle``,
    ``repeats``: the names the outermost ranges repeat in order, and how many times."""
    out = []
    top = ranges[(ranges["depth"] == 0).to_numpy()]
    for (pid, tid), rows in top.groupby(["pid", "tid"], sort=True, observed=True):
        s, e = rows["start_ns"].to_numpy(np.int64), rows["end_ns"].to_numpy(np.int64)
        lo, hi = int(s.min()), int(e.max())
        edges = np.linspace(lo, hi, cells + 1).round().astype(np.int64)
        by_name = rows.assign(d=e - s).groupby("name", sort=False, observed=True)["d"].sum()
        drawn = list(by_name.sort_values(ascending=False, kind="stable")
                     .index[:TIMELINE_NAMES])
        cover = np.zeros((len(drawn) + 2, cells))
        for i, name in enumerate([*drawn, None]):
            mine = ~rows["name"].isin(drawn).to_numpy() if name is None else \
                (rows["name"] == name).to_numpy()
            bs, be = union_blocks(s[mine], e[mine])
            cover[i] = np.diff(covered_until(bs, be, edges))
        bs, be = union_blocks(s, e)
        cover[-1] = np.diff(edges) - np.diff(covered_until(bs, be, edges)) + 1e-9
        best = cover.argmax(axis=0)
        best[best == len(drawn) + 1] = -1
        cycle, repeats = _cycle(rows.sort_values("start_ns", kind="stable")["name"])
        out.append({"pid": int(pid), "tid": int(tid), "start_ns": lo, "end_ns": hi,
                    "covered_ns": int((be - bs).sum()), "outermost": len(rows),
                    "names": [str(n) for n in drawn], "cells": best.tolist(),
                    "cycle": cycle, "repeats": repeats})
    return out


CYCLE_MAX = 32  # the longest sequence of outermost names looked for as a repeating cycle


def _cycle(names: pd.Series) -> tuple[list[str], int]:
    """The shortest sequence of names the outermost ranges repeat, in order, and how many
    whole times (a loop's body: ``reader``, ``3D_backbone``, ... 304 times); ([], 0) where
    they do not repeat (a partial last round allowed)."""
    codes = pd.Categorical(names).codes
    for period in range(1, min(CYCLE_MAX, len(codes) // 2) + 1):
        if np.array_equal(codes[period:], codes[:-period]):
            cats = pd.Categorical(names).categories
            return [str(cats[c]) for c in codes[:period]], len(codes) // period
    return [], 0


class RangeFigures:
    """What the section computes once: the ranges one by one, the device work inside
    them, the per-name table, the kernels per range and the timeline."""

    def __init__(self, trace: Trace):
        self.rows = range_rows(trace)
        work = device_work(trace, self.rows)
        self.table = range_table(self.rows, projection(self.rows, work))
        self.kernels = kernels_per_range(self.rows, work)
        self.timeline = timeline(self.rows)
        self.has_device_work = not work.empty

    def __len__(self) -> int:
        return len(self.table)


def range_figures(trace: Trace) -> RangeFigures:
    """The Ranges section's figures of ``trace`` (also what ``compare`` and the report read)."""
    return RangeFigures(trace)


def _compute(inputs: Inputs, _summary: Summary) -> RangeFigures:
    return RangeFigures(inputs.trace)


def _json(s: Summary, top: int) -> dict[str, Any]:
    r: RangeFigures = s.ranges
    return {"ranges": [plain_row(x) for x in r.table.to_dict("records")],
            "range_kernels": [plain_row(x) for x in r.kernels.to_dict("records")],
            "range_timeline": r.timeline}


SECTION = Section(_json, _compute,
                  keys=("ranges", "range_kernels", "range_timeline"))
