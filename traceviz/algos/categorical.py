"""Work per distinct value, spread over the rows.

Traces hold millions of rows but a few thousand distinct names; anything that depends
on the name alone (regexes, API lookups, category rules) runs once per distinct name
and reaches the rows through the categorical codes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from traceviz.algos.unique import unique_first


def per_distinct(values: pd.Series | pd.Categorical | pd.Index | np.ndarray,
                 fn: Callable[[pd.Index], Any], fill: Any = None) -> np.ndarray:
    """``fn`` over the distinct values (an Index) -> one result per row.

    ``fn`` returns one value per distinct value, in order. Rows whose value is missing
    get ``fill`` (default: NaN for objects, else the dtype's zero/False).
    """
    cat = categorical_of(values)
    per_value = np.asarray(fn(cat.categories))
    if not len(per_value) and fill is not None:
        # no distinct values (no rows, or none named): fn's empty answer reads as floats,
        # which a text fill ("other") cannot join; the fill alone says the type
        per_value = np.asarray([fill])[:0]
    if per_value.dtype.kind in "US":  # numpy strings would turn the fill into text
        per_value = per_value.astype(object)
    if len(per_value) != len(cat.categories):
        raise ValueError(f"{fn!r} gave {len(per_value)} values for "
                         f"{len(cat.categories)} distinct ones")
    if fill is None:
        fill = np.nan if per_value.dtype == object else 0
    tail = np.array([fill], dtype=per_value.dtype)
    return np.append(per_value, tail)[cat.codes]


def categorical_of(values: pd.Series | pd.Categorical | pd.Index | np.ndarray
                   ) -> pd.Categorical:
    """The values as a Categorical: a categorical column's own (no copy), else encoded."""
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
        return values.array
    if isinstance(values, pd.Categorical):
        return values
    return pd.Categorical(values)


def from_used_codes(codes: np.ndarray, categories: np.ndarray) -> pd.Categorical:
    """``Categorical.from_codes(codes, categories).remove_unused_categories()`` (-1:
    missing), without first building the categorical of every category."""
    used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(categories)))
    position = np.full(len(categories) + 1, -1, dtype=np.int32)  # the last: code -1
    position[used] = np.arange(len(used))
    # the categories' dtype as pandas infers it from all of them, even when none is used
    kept = pd.Index(categories[used], dtype=pd.Index(categories[:1]).dtype)
    return pd.Categorical.from_codes(position[codes], categories=kept, validate=False)


def per_distinct_categorical(values: pd.Series | pd.Categorical | pd.Index | np.ndarray,
                             fn: Callable[[pd.Index], Any]) -> pd.Categorical:
    """``per_distinct`` for text results, as a Categorical: built from codes, so a
    million rows cost no string each (missing values and None results are missing)."""
    cat = categorical_of(values)
    codes, uniques = pd.factorize(pd.Series(list(fn(cat.categories)), dtype=object))
    codes = np.append(codes, -1)[cat.codes]
    return pd.Categorical.from_codes(codes, categories=pd.Index(uniques, dtype=object),
                                     validate=False)


def as_list(values: pd.Index | np.ndarray | list) -> list:
    """The values as a Python list: iterating an Arrow-backed string index one value at
    a time is slow (pandas 3)."""
    return values.tolist() if hasattr(values, "tolist") else list(values)


def each(fn: Callable[[str], Any]) -> Callable[[pd.Index], list]:
    """A function of one name, made a function of the distinct names (for per_distinct)."""
    return lambda distinct: [fn(str(v)) for v in as_list(distinct)]


def groups(values: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(value, positions) per distinct integer value, values ascending, positions in row
    order: a group's columns are then taken as arrays, not as a copy of a whole frame."""
    order = np.argsort(values, kind="stable")
    uniq, first = unique_first(values[order])
    bounds = np.append(first, len(order))
    return [(int(v), order[bounds[i]:bounds[i + 1]]) for i, v in enumerate(uniq.tolist())]


def text_categorical(values: np.ndarray | list, keep_objects: bool = False) -> pd.Categorical:
    """Texts as a Categorical, categories sorted: factorized as Python objects, so a text
    that many rows share is one string (pandas 3 makes ``pd.Categorical`` of an object
    array, and a frame's object column, an Arrow string per row: 100 rows sharing a 50 MB
    name were 5 GB). The categories take pandas' text dtype (a copy of each distinct text
    only), or stay the objects themselves with ``keep_objects`` (then ``np.asarray(...,
    object)`` of the result copies no text either)."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object))
    order = np.argsort(uniques, kind="stable")
    rank = np.empty(len(order) + 1, dtype=np.int64)
    rank[order] = np.arange(len(order))
    rank[-1] = -1  # code -1 (a missing value) stays missing
    categories = pd.Index(uniques[order], dtype=object if keep_objects else None)
    return pd.Categorical.from_codes(rank[codes], categories=categories, validate=False)
