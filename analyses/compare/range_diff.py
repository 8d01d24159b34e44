"""Two runs compared by user range name: per name the calls, the mean and total time of
a call and its share of all ranges' time in each run, and the change of the mean. What
``compare`` says of exports that hold NVTX ranges alone, and beside the kernels of the
others."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceviz.analyses.summary.ranges import range_figures

if TYPE_CHECKING:  # types only
    from traceviz.trace import Trace

COLUMNS = ("name", "a_calls", "b_calls", "a_mean_ns", "b_mean_ns", "a_total_ns", "b_total_ns",
           "a_share", "b_share", "mean_change")


def range_diff(a: Trace, b: Trace) -> pd.DataFrame:
    """Per range name in either run (styles added up), by the larger total:
    ``a_calls``/``b_calls``, ``a_mean_ns``/``b_mean_ns`` (a call's mean duration, NaN
    where the run has none), totals, shares and ``mean_change`` (b's mean over a's,
    minus 1; NaN where one run lacks the name). Empty when neither run has ranges."""
    sides = []
    for side, t in zip("ab", (a, b), strict=True):
        table = range_figures(t).table
        g = table.groupby("name", sort=False)
        sides.append(pd.DataFrame({"calls": g["instances"].sum(),
                                   "total_ns": g["total_ns"].sum(),
                                   "share": g["share"].sum()}).add_suffix(f"_{side}"))
    both = sides[0].join(sides[1], how="outer")
    if both.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "name" else float)
                             for c in COLUMNS})
    out = pd.DataFrame({"name": both.index.to_numpy(object)})
    for side in "ab":
        calls = both[f"calls_{side}"].fillna(0).to_numpy(np.int64)
        total = both[f"total_ns_{side}"].fillna(0).to_numpy(np.int64)
        out[f"{side}_calls"] = calls
        out[f"{side}_total_ns"] = total
        out[f"{side}_mean_ns"] = np.where(calls > 0, total / np.maximum(calls, 1), np.nan)
        out[f"{side}_share"] = both[f"share_{side}"].fillna(0.0).to_numpy()
    out["mean_change"] = out["b_mean_ns"] / out["a_mean_ns"] - 1.0
    biggest = np.maximum(out["a_total_ns"], out["b_total_ns"])
    out = out.iloc[np.lexsort((out["name"].to_numpy(str), -biggest.to_numpy()))]
    return out[list(COLUMNS)].reset_index(drop=True)
