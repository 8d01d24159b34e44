"""Where device time goes: per kernel name and per category."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz.table.schema import CATEGORIES, CATEGORY_DTYPE

KERNEL_TABLE_COLUMNS = ["name", "details", "category", "count", "total_ns", "mean_ns",
                        "min_ns", "median_ns", "max_ns", "std_ns", "share"]


def kernel_table(work: pd.DataFrame, by_config: bool = False) -> pd.DataFrame:
    """One row per (name, category), or per (name, launch configuration, category) with
    ``by_config``: count, total/mean/min/median/max ns, the sample standard deviation
    (``std_ns``, ddof 1, 0 for one call: ``nsys stats``' StdDev) and share; by total desc.

    A name can fall in two categories: a copy kernel is a cast when its op changes dtype.
    ``details`` is the launch configuration ("" unless ``by_config``).
    """
    if work.empty:
        return pd.DataFrame(columns=KERNEL_TABLE_COLUMNS)
    keys = ["name", "details", "category"] if by_config else ["name", "category"]
    # grouped on the categorical columns (a million rows turned into text cost more than
    # the grouping); the few group keys become text below
    g = work.groupby(keys, observed=True, sort=False)
    dur = g["dur_ns"]
    table = pd.DataFrame({
        "count": g.size(),
        "total_ns": dur.sum(),
        "mean_ns": dur.mean(),
        "min_ns": dur.min(),
        "median_ns": dur.median(),
        "max_ns": dur.max(),
        "std_ns": dur.std(ddof=1).fillna(0.0),
    })
    total = table["total_ns"].sum()
    table["share"] = table["total_ns"] / total if total else 0.0
    table = table.reset_index()
    if not by_config:
        table["details"] = ""
    table["name"] = table["name"].astype(str)  # ties sort by name text, not category code
    table["details"] = table["details"].astype(str)
    table["category"] = table["category"].astype(str)
    table = table.sort_values(["total_ns", "name", "details", "category"],
                              ascending=[False, True, True, True], kind="stable")
    return table[KERNEL_TABLE_COLUMNS].reset_index(drop=True)


def category_table(work: pd.DataFrame) -> pd.DataFrame:
    """One row per category (all of them, zeros included): count, total_ns, share."""
    # counted and summed per category code in numpy (a groupby of a frame cost ~5 ms)
    codes = work["category"].astype(CATEGORY_DTYPE).array.codes
    known = codes >= 0
    dur = work["dur_ns"].to_numpy(np.int64)
    totals = np.zeros(len(CATEGORIES), dtype=np.int64)
    np.add.at(totals, codes[known], dur[known])
    table = pd.DataFrame({"category": pd.array(list(CATEGORIES), dtype="str"),
                          "count": np.bincount(codes[known], minlength=len(CATEGORIES)),
                          "total_ns": totals})
    total = table["total_ns"].sum()
    table["share"] = table["total_ns"] / total if total else 0.0
    return table


def category_busy_ns(work: pd.DataFrame, windows: dict[int, pd.DataFrame]) -> dict[str, int]:
    """Busy time inside the windows split among categories (``intervals.attribute_union``):
    where kernels of several categories overlap (streams, threads), the moment is shared,
    so the parts add up to the busy time, never more."""
    import numpy as np

    from traceviz.algos.intervals import attribute_union

    total = np.zeros(len(CATEGORIES))
    for device, rows in work.groupby("device", observed=True):
        win = windows.get(int(device))
        if win is None or rows.empty:
            continue
        start = rows["ts_ns"].to_numpy(np.int64)
        codes = pd.Categorical(rows["category"].astype(str), categories=CATEGORIES).codes
        total += attribute_union(start, start + rows["dur_ns"].to_numpy(np.int64), codes,
                                 len(CATEGORIES), win["start_ns"].to_numpy(np.int64),
                                 win["end_ns"].to_numpy(np.int64))
    return {c: int(round(v)) for c, v in zip(CATEGORIES, total, strict=True)}
