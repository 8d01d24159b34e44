"""The Efficiency section's tables from its per-kernel columns: per op group (name +
shapes), per kernel name, and the work without figures, with their rates.

The kernels are grouped through integer codes, in numpy: a pandas ``groupby(...).agg``
over text columns cost more than the rest of the section. The tables are the same as
``groupby(keys, sort=False)`` gives (groups in order of first appearance, rows with a
missing key left out); float sums stay pandas' (its compensated summation), so every
figure is the same to the last bit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceviz.algos.unique import unique, unique_first, unique_text_inverse
from traceviz.opcost.peaks import Peak

GROUP_COLUMNS = ["op", "dims", "types", "precision", "unit", "peak_key", "calls", "kernels",
                 "time_ns", "flops", "bytes", "tflops", "gbps", "intensity", "pct_peak",
                 "pct_bw", "bound"]
KERNEL_COLUMNS = ["kernel", "category", *GROUP_COLUMNS[3:]]


@dataclass
class KernelColumns:
    """Per kernel (work row): its name, category, op call and op figures, as arrays;
    ``precision`` and ``unit`` as Series, typed as pandas infers them for the column."""

    kernel: np.ndarray     # object: name text
    category: np.ndarray   # object: category text
    dur: np.ndarray        # float64 ns
    inst: np.ndarray       # int64: the op call's events row (-1: none)
    op: np.ndarray         # object: the op's name ("": none)
    details: np.ndarray    # object: the op's details text
    precision: pd.Series
    unit: pd.Series
    note: np.ndarray       # object
    covered: np.ndarray    # bool: a FLOP or byte figure
    matrix: np.ndarray     # bool
    tf32: np.ndarray       # bool
    flops: np.ndarray      # float64, after _share
    bytes: np.ndarray
    has_flops: np.ndarray  # bool
    has_bytes: np.ndarray


@dataclass
class _Groups:
    """Rows grouped by keys: ``gid`` per row (first-appearance order), ``first`` row."""

    gid: np.ndarray
    first: np.ndarray

    @property
    def n(self) -> int:
        return len(self.first)

    def size(self) -> np.ndarray:
        return np.bincount(self.gid, minlength=self.n).astype(np.int64)

    def sums(self, **columns: np.ndarray) -> pd.DataFrame:
        """Float sums per group, by pandas' groupby sum (compensated, as ``agg`` sums)."""
        return pd.DataFrame(columns).groupby(self.gid, sort=True).sum()

    def all(self, flags: np.ndarray) -> np.ndarray:
        return np.bincount(self.gid, weights=(~flags).astype(np.float64),
                           minlength=self.n) == 0

    def any(self, flags: np.ndarray) -> np.ndarray:
        return np.bincount(self.gid, weights=flags.astype(np.float64), minlength=self.n) > 0

    def nunique(self, values: np.ndarray) -> np.ndarray:
        """Distinct int values (-1 and up) per group."""
        if not len(values):
            return np.zeros(self.n, dtype=np.int64)
        base = int(values.max()) + 2
        pairs = unique(self.gid.astype(np.int64) * base + (values + 1))
        return np.bincount(pairs // base, minlength=self.n).astype(np.int64)

    def first_valid(self, valid: np.ndarray) -> np.ndarray:
        """Per group the first row with a value (``first``, skipping nulls), else its
        first row (all null: ``first`` gives that null)."""
        out = self.first.copy()
        rows = np.flatnonzero(valid)
        found, at = unique_first(self.gid[rows])
        out[found] = rows[at]
        return out


def _group(*keys: np.ndarray) -> tuple[np.ndarray, _Groups]:
    """The rows whose keys are all present (groupby drops a missing key) and their
    groups, numbered in order of first appearance (``groupby(sort=False)``)."""
    n = len(keys[0])
    combined = np.zeros(n, dtype=np.int64)
    valid = np.ones(n, dtype=bool)
    for key in keys:
        codes, uniques = pd.factorize(key)
        valid &= codes >= 0
        # renumbered after each key: the combined code stays below rows^2
        combined = pd.factorize(combined * (len(uniques) + 1) + codes + 1)[0]
    rows = np.flatnonzero(valid)
    gid = pd.factorize(combined[rows])[0]
    _, first = unique_first(gid)
    return rows, _Groups(gid, first)


def rates(t: pd.DataFrame, peak: Peak | None) -> pd.DataFrame:
    """TFLOP/s, GB/s, intensity, % of the applicable peak and of bandwidth, bound."""
    time = t["time_ns"].to_numpy(np.float64)
    flops = t["flops"].to_numpy(np.float64)
    nbytes = t["bytes"].to_numpy(np.float64)
    has_flops = t["has_flops"].to_numpy(bool)
    has_bytes = t["has_bytes"].to_numpy(bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        t["tflops"] = np.where(has_flops & (time > 0), flops / time / 1e3, np.nan)
        t["gbps"] = np.where(has_bytes & (time > 0), nbytes / time, np.nan)
        t["intensity"] = np.where(has_flops & has_bytes & (nbytes > 0), flops / nbytes, np.nan)
    keys, peaks = [], []
    seen: dict[tuple, tuple[str, float] | None] = {}  # one lookup per distinct triple
    for prec, unit, tf32 in zip(t["precision"].to_numpy(object), t["unit"].to_numpy(object),
                                t["tf32"].to_numpy(bool), strict=True):
        at = (prec, unit, bool(tf32))
        if at not in seen:
            seen[at] = peak.applicable(prec, unit or "vector", bool(tf32)) if peak else None
        hit = seen[at]
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
    unknown = np.isnan(ridge) | ~has_bytes
    t["bound"] = pd.Series(bound, dtype=object).where(~unknown, None).to_numpy()
    return t


def _finish(g: pd.DataFrame, peak: Peak | None, columns: list[str]) -> pd.DataFrame:
    g = rates(g, peak).sort_values("time_ns", ascending=False, kind="stable")
    g["time_ns"] = g["time_ns"].astype(np.int64)
    g["flops"] = g["flops"].round().astype(np.int64)
    g["bytes"] = g["bytes"].round().astype(np.int64)
    return g[columns].reset_index(drop=True)


def op_groups(k: KernelColumns, peak: Peak | None) -> pd.DataFrame:
    """Per op group (op name, input dims, input types) of the covered kernels."""
    cov = np.flatnonzero(k.covered)
    if not len(cov):
        return pd.DataFrame(columns=GROUP_COLUMNS)
    # the regexes run once per distinct details text, not per kernel
    codes, texts = pd.factorize(k.details[cov])
    texts = pd.Series(texts, dtype=object).astype(str).str
    # (?s): a trace written with indented JSON has line breaks inside the lists
    dims = _one_line(texts.extract(r"(?s)^dims:(.*?) types:", expand=False))[codes]
    types = _one_line(texts.extract(r"(?s) types:(.*?)(?: concrete:| conv:|$)",
                                    expand=False))[codes]
    at, grp = _group(k.op[cov], dims, types)
    rows = cov[at]
    dur = k.dur[rows]
    sums = grp.sums(time_ns=dur, flops=k.flops[rows], bytes=k.bytes[rows],
                    tf32_ns=np.where(k.tf32[rows], dur, 0.0),
                    matrix_ns=np.where(k.matrix[rows], dur, 0.0))
    first = rows[grp.first]
    g = pd.DataFrame({
        "op": k.op[first], "dims": dims[at[grp.first]], "types": types[at[grp.first]],
        "precision": _firsts(k.precision, rows, grp), "unit": _firsts(k.unit, rows, grp),
        "calls": grp.nunique(k.inst[rows]), "kernels": grp.size(),
        "time_ns": sums["time_ns"].to_numpy(), "flops": sums["flops"].to_numpy(),
        "bytes": sums["bytes"].to_numpy(), "has_flops": grp.all(k.has_flops[rows]),
        "has_bytes": grp.all(k.has_bytes[rows])})
    g["tf32"] = sums["tf32_ns"].to_numpy() > 0.5 * sums["matrix_ns"].to_numpy()
    return _finish(g, peak, GROUP_COLUMNS)


def _one_line(text: pd.Series) -> np.ndarray:
    """Recorded lists as one line, as a compact trace writes them ("[[32, 64], []]"):
    an indented one's line breaks and indents dropped, its lists read and written
    again (once per distinct text)."""
    text = text.fillna("")
    wrapped = text.str.contains("\n", regex=False)
    if wrapped.any():
        text = text.where(~wrapped, text[wrapped].map(_compact))
    return text.to_numpy(object)


def _compact(text: str) -> str:
    try:
        return json.dumps(json.loads(text))
    except (ValueError, RecursionError):
        return " ".join(text.split())


def _firsts(values: pd.Series, rows: np.ndarray, grp: _Groups) -> pd.Series:
    """``first`` per group of a text column: its first value that is not null."""
    picked = rows[grp.first_valid(values.notna().to_numpy()[rows])]
    return values.take(picked).reset_index(drop=True)


def kernel_groups(k: KernelColumns, peak: Peak | None) -> pd.DataFrame:
    """Per kernel name of the covered kernels; its precision and unit: the ones most of
    its op calls ran in."""
    cov = np.flatnonzero(k.covered)
    if not len(cov):
        return pd.DataFrame(columns=KERNEL_COLUMNS)
    at, grp = _group(k.kernel[cov])
    rows = cov[at]
    sums = grp.sums(time_ns=k.dur[rows], flops=k.flops[rows], bytes=k.bytes[rows])
    first = rows[grp.first]
    g = pd.DataFrame({
        "kernel": k.kernel[first], "category": k.category[first],
        "precision": pd.Series(_majority(k.precision, rows, grp), dtype=object),
        "unit": pd.Series(_majority(k.unit, rows, grp), dtype=object),
        "calls": grp.nunique(k.inst[rows]), "kernels": grp.size(),
        "time_ns": sums["time_ns"].to_numpy(), "flops": sums["flops"].to_numpy(),
        "bytes": sums["bytes"].to_numpy(), "has_flops": grp.all(k.has_flops[rows]),
        "has_bytes": grp.all(k.has_bytes[rows]), "tf32": grp.any(k.tf32[rows])})
    return _finish(g, peak, KERNEL_COLUMNS)


def _majority(values: pd.Series, rows: np.ndarray, grp: _Groups) -> np.ndarray:
    """Per group, the most frequent value that is not null (the smallest on a tie, as
    ``Series.mode`` orders them), counted per row; None where it has none."""
    out = np.full(grp.n, None, dtype=object)
    valid = values.notna().to_numpy()[rows]
    if not valid.any():
        return out
    text, code = unique_text_inverse(values.to_numpy(object)[rows][valid])
    gid = grp.gid[valid]
    pair, count = np.unique(gid.astype(np.int64) * len(text) + code, return_counts=True)
    g, c = pair // len(text), pair % len(text)
    # per group: most rows first, then the smallest value
    best = np.lexsort((c, -count, g))
    keep = best[np.r_[True, g[best][1:] != g[best][:-1]]]
    out[g[keep]] = text[c[keep]]
    return out


def uncovered_groups(k: KernelColumns, no_op: str, own_name: bool = False) -> pd.DataFrame:
    """Work without figures, grouped by op and reason. ``own_name``: a CPU trace's work
    rows are ops themselves, named as such where no modelled op was found for them."""
    u = np.flatnonzero(~k.covered)
    total = float(k.dur.sum()) or 1.0
    unnamed = k.op[u] == ""
    op = np.where(unnamed, k.kernel[u] if own_name else "(no op)", k.op[u])
    note = np.where(unnamed, no_op, pd.Series(k.note[u], dtype=object).fillna(
        "no model for this op").to_numpy(object))
    if not len(u):  # pandas' own empty table, its column types included
        g = pd.DataFrame({"op": op, "note": note, "dur": k.dur[u]}).groupby(
            ["op", "note"], sort=False).agg(kernels=("dur", "size"),
                                            time_ns=("dur", "sum")).reset_index()
        g["share"] = g["time_ns"] / total
        g["time_ns"] = g["time_ns"].astype(np.int64)
        return g
    at, grp = _group(op, note)
    time_ns = grp.sums(time_ns=k.dur[u[at]])["time_ns"].to_numpy()
    g = pd.DataFrame({"op": op[at[grp.first]], "note": note[at[grp.first]],
                      "kernels": grp.size(), "time_ns": time_ns})
    g["share"] = g["time_ns"] / total
    g["time_ns"] = g["time_ns"].astype(np.int64)
    return g.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)
