"""What an NVTX range of an nsys export carries beside its name and times: its domain
(registered per process), style (push/pop or start/end), category and payload, written
into the row's ``details`` (docs/formats.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd

PAYLOAD_COLUMNS = ("int64Value", "uint64Value", "int32Value", "uint32Value", "doubleValue",
                   "floatValue")


def payload(df: pd.DataFrame) -> np.ndarray:
    """A range's payload as text (the first typed value column holding one), else None."""
    out = np.full(len(df), None, dtype=object)
    for col in PAYLOAD_COLUMNS:
        v = df[col]
        fill = pd.isna(out) & v.notna().to_numpy()
        if fill.any():
            out[fill] = v[fill].astype(object).astype(str).to_numpy()
    return out


def domains(text: pd.Series, created: np.ndarray, domain_id: np.ndarray,
             process: np.ndarray, range_process: np.ndarray, range_domain: np.ndarray
             ) -> np.ndarray:
    """Each range's domain name (None: the default domain), from the domain-create events
    of its process (the first one, as nsys' reports read it)."""
    out = np.full(len(range_process), None, dtype=object)
    if not created.any():
        return out
    made = pd.DataFrame({"p": process[created], "d": domain_id[created],
                         "name": text[created].to_numpy(object)})
    made = made.drop_duplicates(["p", "d"]).set_index(["p", "d"])["name"]
    hit = made.index.get_indexer(pd.MultiIndex.from_arrays([range_process, range_domain]))
    out[hit >= 0] = made.to_numpy(object)[hit[hit >= 0]]
    return out


def range_details(style: np.ndarray, domain: np.ndarray, category: np.ndarray,
                  payload: np.ndarray) -> np.ndarray:
    """What an NVTX range carries beside its name, in its row's ``details``:
    ``style:PushPop`` (or StartEnd), then ``domain:D``, ``category:N``, ``payload:V``
    where set (docs/formats.md)."""
    out = pd.Series("style:" + style.astype(object), dtype=object)
    for label, values in (("domain", domain), ("category", category), ("payload", payload)):
        v = pd.Series(values, dtype=object)
        has = v.notna().to_numpy()
        if has.any():
            out[has] = out[has] + f" {label}:" + v[has].map(_plain).astype(str)
    return out.to_numpy(object)


def _plain(v: object) -> str:
    """A number read as float by pandas (a NULL beside it) written as the integer it is."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
