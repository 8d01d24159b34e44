"""What an NVTX range of an nsys export carries beside its name and times: its domain
(registered per process), style (push/pop or start/end), category and payload, written
into the row's ``details`` (docs/formats.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd

PAYLOAD_COLUMNS = ("int64Value", "uint64Value", "int32Value", "uint32Value", "doubleValue",
                   "floatValue")


def payload(df: pd.DataFrame) -> np.ndarray | None:
    """A range's payload as text (the first typed value column holding one), else None
    (None for all: no payload column holds a value)."""
    if not set(PAYLOAD_COLUMNS) & set(df.columns):
        return None
    out = np.full(len(df), None, dtype=object)
    for col in PAYLOAD_COLUMNS:
        if col not in df:  # NULL throughout: not read
            continue
        v = df[col]
        fill = pd.isna(out) & v.notna().to_numpy()
        if fill.any():
            out[fill] = v[fill].astype(object).astype(str).to_numpy()
    return out


def domains(made: pd.DataFrame, range_process: np.ndarray, range_domain: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """Each range's domain as a code into the domain names (-1: the default domain), and
    the names, from the domain-create events (``made``: process ``p``, domain id ``d``,
    ``name``) of its process (the first one, as nsys' reports read it)."""
    if made.empty:
        return np.full(len(range_process), -1, dtype=np.int64), np.array([], dtype=object)
    made = made.drop_duplicates(["p", "d"]).set_index(["p", "d"])["name"]
    hit = made.index.get_indexer(pd.MultiIndex.from_arrays([range_process, range_domain]))
    return hit.astype(np.int64), made.to_numpy(object)


def range_details(startend: np.ndarray, domain: np.ndarray, domain_names: np.ndarray,
                  category: np.ndarray, payload: np.ndarray) -> np.ndarray:
    """What an NVTX range carries beside its name, in its row's ``details``:
    ``style:PushPop`` (or StartEnd), then ``domain:D``, ``category:N``, ``payload:V``
    where set (docs/formats.md). Written once per distinct combination (a million ranges
    have a handful): ``startend`` per row, ``domain`` a code into ``domain_names``."""
    code = startend.astype(np.int64) * (len(domain_names) + 1) + (domain + 1)
    distinct = [np.array(["style:PushPop", "style:StartEnd"], dtype=object),
                np.append(np.array([None], dtype=object), domain_names)]
    for values in (category, payload):
        if values is None:  # NULL throughout: nothing to write
            distinct.append(np.array([None], dtype=object))
            code = code * 1
            continue
        c, u = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
        code = code * (len(u) + 1) + (c + 1)  # 0: no value
        distinct.append(np.append(np.array([None], dtype=object), np.asarray(u, dtype=object)))
    combos, at = np.unique(code, return_inverse=True)
    texts = np.empty(len(combos), dtype=object)
    for i, combo in enumerate(combos.tolist()):
        fields = []
        for label, u in zip(("payload", "category", "domain", "style"), distinct[::-1],
                            strict=True):
            combo, k = divmod(combo, len(u))
            if label == "style":
                fields.append(str(u[k]))
            elif k:
                fields.append(f"{label}:{_plain(u[k])}")
        texts[i] = " ".join(fields[::-1])
    return texts[at.reshape(-1)]


def _plain(v: object) -> str:
    """A number read as float by pandas (a NULL beside it) written as the integer it is."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
