"""Reading Parquet files written by an older traceviz: derive what they lack.

Schema 1 -> 2: ``launch_id`` (the one launch link) and categories from today's table.
A version-1 device row names its launch by (correlation, launch start); that pair finds
the launch call again. Calls nsys recorded twice are not merged (version 1 kept both).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz.algos.categorical import each, per_distinct
from traceviz.table import classify, schema
from traceviz.table.launch_apis import launch_kind
from traceviz.table.rowcodes import category_codes, kind_codes


def from_v1(events: pd.DataFrame) -> pd.DataFrame:
    ev = events.copy()
    kind = kind_codes(ev["kind"])
    names = ev["name"].astype("category")
    codes = names.cat.codes.to_numpy()
    known = per_distinct(names, each(lambda c: launch_kind(c) is not None), fill=False)
    calls = np.flatnonzero((ev["kind"] == "runtime").to_numpy() & known)
    launch_id = np.full(len(ev), -1, dtype=np.int64)
    launch_id[calls] = np.arange(len(calls))
    corr = ev["correlation"].to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    dev = np.flatnonzero(ev["launch_ts_ns"].notna().to_numpy())
    key = pd.MultiIndex.from_arrays([corr[calls], ts[calls]])
    hit = key.get_indexer(pd.MultiIndex.from_arrays(
        [corr[dev], ev["launch_ts_ns"].to_numpy()[dev].astype(np.int64)]))
    launch_id[dev[hit >= 0]] = launch_id[calls[hit[hit >= 0]]]
    ev["launch_id"] = launch_id
    is_cast = ev["is_cast"].to_numpy(bool) | (
        (ev["kind"] == "kernel").to_numpy()
        & per_distinct(names, classify.cast_kernel_flags, fill=False))
    ev["is_cast"] = is_cast
    cat = category_codes(kind, codes, names.cat.categories, is_cast)
    ev["category"] = pd.Categorical.from_codes(cat, categories=list(schema.CATEGORIES))
    return ev
