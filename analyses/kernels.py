"""Where device time goes: per kernel name and per category."""

from __future__ import annotations

import pandas as pd

from traceviz.schema import CATEGORIES


def kernel_table(work: pd.DataFrame) -> pd.DataFrame:
    """One row per (name, category): count, total/mean/min/max ns, share; by total desc.

    A name can fall in two categories: a copy kernel is a cast when its op changes dtype.
    """
    if work.empty:
        return pd.DataFrame(columns=["name", "category", "count", "total_ns", "mean_ns",
                                     "min_ns", "max_ns", "share"])
    g = work.assign(category=work["category"].astype(str)).groupby(
        ["name", "category"], observed=True, sort=False)
    table = pd.DataFrame({
        "count": g.size(),
        "total_ns": g["dur_ns"].sum(),
        "mean_ns": g["dur_ns"].mean(),
        "min_ns": g["dur_ns"].min(),
        "max_ns": g["dur_ns"].max(),
    })
    total = table["total_ns"].sum()
    table["share"] = table["total_ns"] / total if total else 0.0
    table = table.reset_index()
    table["name"] = table["name"].astype(str)  # ties sort by name text, not category code
    table = table.sort_values(["total_ns", "name", "category"], ascending=[False, True, True],
                              kind="stable")
    return table.reset_index(drop=True)


def category_table(work: pd.DataFrame) -> pd.DataFrame:
    """One row per category (all of them, zeros included): count, total_ns, share."""
    cat = work["category"].astype(pd.CategoricalDtype(list(CATEGORIES)))
    g = work.assign(category=cat).groupby("category", observed=False)
    table = pd.DataFrame({"count": g.size(), "total_ns": g["dur_ns"].sum()})
    total = table["total_ns"].sum()
    table["share"] = table["total_ns"] / total if total else 0.0
    return table.reset_index().astype({"category": str})
