"""What an NVTX range of an nsys export carries beside its name and times: its domain
(registered per process), style (push/pop or start/end), category and payload, written
into the row's ``details`` (docs/formats.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz.parsers.nsys.table_access import text_values
from traceviz.parsers.numbers import checked_ints

PAYLOAD_COLUMNS = ("int64Value", "uint64Value", "int32Value", "uint32Value", "doubleValue",
                   "floatValue")


def numbers_only(values: pd.Series, column: str, wrong: dict[str, int]) -> pd.Series:
    """A numeric column's values with any that is no number (a BLOB or text, which SQLite
    stores in any column) made NULL, counted in ``wrong[column]`` for the notes; checked
    once per distinct value, and only where the column is not numeric already."""
    if pd.api.types.is_numeric_dtype(values.dtype):  # text reads as object or str dtype
        return values
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    number = np.array([isinstance(u, int | float | np.integer | np.floating)
                       and not isinstance(u, bool | np.bool_) for u in uniques], dtype=bool)
    ok = np.append(number, True)[codes]  # NULL (-1) is no wrong value
    if ok.all():
        return values
    wrong[column] = wrong.get(column, 0) + int((~ok).sum())
    return values.where(ok, None)


def payload(df: pd.DataFrame, wrong: dict[str, int]) -> np.ndarray | None:
    """A range's payload as text (the first typed value column holding a number), else
    None (None for all: no payload column holds a value); values that are no number are
    counted in ``wrong`` (see ``numbers_only``)."""
    if not set(PAYLOAD_COLUMNS) & set(df.columns):
        return None
    out = np.full(len(df), None, dtype=object)
    for col in PAYLOAD_COLUMNS:
        if col not in df:  # NULL throughout: not read
            continue
        v = numbers_only(df[col], col, wrong)
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
                  category: np.ndarray | None, payload: np.ndarray | None) -> np.ndarray:
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


def categorical(values: np.ndarray, codes: np.ndarray, other: np.ndarray | None = None,
                 where: np.ndarray | None = None) -> pd.Categorical:
    """``values[codes]`` (with ``other`` on the rows ``where`` holds) as a categorical,
    made from codes: no Python string per row."""
    u_codes, uniques = pd.factorize(pd.Series(values, dtype=object))
    row = u_codes[codes]
    if other is not None:
        o_codes, o_uniques = pd.factorize(pd.Series(other, dtype=object))
        row[where] = len(uniques) + o_codes
        uniques = np.concatenate([np.asarray(uniques, object), np.asarray(o_uniques, object)])
    cats, remap = np.unique(np.asarray(uniques, dtype=object).astype(str), return_inverse=True)
    return pd.Categorical.from_codes(remap.reshape(-1)[row], categories=cats)


def range_texts(df: pd.DataFrame, strings: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each row's text as a code into the distinct texts (nsys' reports name a range by
    its registered string first, then its own text; neither: ``<unnamed range>``), made
    without a Python string per row."""
    ids, _ = checked_ints(df["textId"])
    by_id = strings.index.get_indexer(ids)
    t_code, t_values = pd.factorize(df["text"], use_na_sentinel=True)
    n_ids = len(strings)
    key = np.where(by_id >= 0, by_id, np.where(t_code >= 0, n_ids + t_code, -1))
    keys, code = np.unique(key, return_inverse=True)
    pool = np.concatenate([strings.to_numpy(object), text_values(pd.Series(
        np.asarray(t_values, dtype=object), dtype=object))])
    texts = np.where(keys >= 0, pool[np.maximum(keys, 0)] if len(pool) else None, None)
    texts = pd.Series(texts, dtype=object).fillna("<unnamed range>").astype(object)
    return code.reshape(-1), texts.to_numpy(object)
