"""Per-row codes of the trace table: the kind of each row and its category. One place
for both ``normalize`` (a new trace) and ``upgrade`` (a file of an older schema), so that
neither imports the other."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceviz.table import classify, schema

KIND_CODE = {k: np.int8(i) for i, k in enumerate(schema.KINDS)}
CATEGORY_CODE = {c: np.int8(i) for i, c in enumerate(schema.CATEGORIES)}
_K, _C = KIND_CODE, CATEGORY_CODE


def category_codes(kind: np.ndarray, name_codes: np.ndarray, categories: pd.Index,
                   is_cast: np.ndarray) -> np.ndarray:
    """Per row, the index into ``schema.CATEGORIES`` (-1 on rows that are not work)."""
    cat_codes = np.append(classify.category_codes(categories), _C["other"])[name_codes]
    cat_codes[kind == _K["memcpy"]] = _C["memcpy"]
    cat_codes[kind == _K["memset"]] = _C["memset"]
    cat_codes[is_cast & ((kind == _K["kernel"]) | (kind == _K["op"]))] = _C["cast"]
    is_device = np.isin(kind, [_K[k] for k in schema.DEVICE_KINDS])
    cat_codes[~(is_device | (kind == _K["op"]))] = -1
    return cat_codes


def kind_codes(kinds: pd.Series) -> np.ndarray:
    return kinds.astype(schema.KIND_DTYPE).cat.codes.to_numpy()
