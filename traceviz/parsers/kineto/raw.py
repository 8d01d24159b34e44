"""The raw columns of one piece of Kineto events, as either reader gives them.

The Python reader (msgspec structs, ``events.py``) and the compiled one (``native.py``)
both hand ``columns.event_columns`` a ``Rows``: names as an Arrow string array, ``ts`` and
``dur`` as the binary array of their raw JSON text (empty: absent), the number fields
(``int | float | str | bool | None`` in the format) as ``Ints`` and the raw args as
``Args``. Everything after (kind codes, checked integers, times in ns, details, drops and
their notes) runs once, on these. The compiled reader may also give ``ts``/``dur`` as
exact ns already (``exact_ns``: the values and which were absent), where every value in
the piece has the plain spelling it converts. The Python reader's columns stay lists of its structs
until a value is asked for, so it pays for no field it would not have read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter, itemgetter

import numpy as np
import pyarrow as pa

from traceviz.parsers.kineto.times import raw_array
from traceviz.parsers.numbers import INT64, checked_ints


def _gather(seq: list, idx: np.ndarray) -> list:
    if len(idx) == 1:
        return [seq[int(idx[0])]]
    return list(itemgetter(*idx)(seq)) if len(idx) else []


class StructInts:
    """A number field of the Python reader: its structs and the field's attribute."""

    __slots__ = ("items", "attr")

    def __init__(self, items: list, attr: str) -> None:
        self.items, self.attr = items, attr

    def take(self, idx: np.ndarray) -> StructInts:
        return StructInts(_gather(self.items, idx), self.attr)

    def checked(self, default: int = -1, bounds: tuple[int, int] = INT64
                ) -> tuple[np.ndarray, np.ndarray]:
        return checked_ints(list(map(attrgetter(self.attr), self.items)), default, bounds)


class NativeInts:
    """A number field of the compiled reader: int64 values and a tag per row (0: absent
    or null, 1: an int64 in ``values``, 2: another value, in ``objs``: a float, text,
    true/false or a bigger integer, as msgspec decodes it)."""

    __slots__ = ("values", "tags", "objs")

    def __init__(self, values: np.ndarray, tags: np.ndarray, objs: np.ndarray | None) -> None:
        self.values, self.tags, self.objs = values, tags, objs

    def take(self, idx: np.ndarray) -> NativeInts:
        return NativeInts(self.values[idx], self.tags[idx],
                          None if self.objs is None else self.objs[idx])

    def checked(self, default: int = -1, bounds: tuple[int, int] = INT64
                ) -> tuple[np.ndarray, np.ndarray]:
        """``checked_ints`` of the values the Python reader would have listed."""
        missing = self.tags == 0
        if self.objs is not None and (odd := self.tags == 2).any():
            # an odd value: the very list the Python reader builds, checked as it is (its
            # result depends on the whole list: pyarrow reads 1.5 as 1 beside integers)
            values = self.values.astype(object)
            values[missing] = None
            values[odd] = self.objs[odd]
            return checked_ints(values.tolist(), default, bounds)
        lo, hi = bounds
        out = self.values
        bad = ~missing & ((out < lo) | (out > hi))
        return np.where(missing | bad, default, out), bad


Ints = StructInts | NativeInts


class StructArgs:
    """The Python reader's args: ``_Args`` structs (an empty one for ``"args": null``)."""

    __slots__ = ("items",)

    def __init__(self, items: list) -> None:
        self.items = items

    def take(self, idx: np.ndarray) -> StructArgs:
        return StructArgs(_gather(self.items, idx))

    def column(self, field: str, rows: np.ndarray) -> pa.Array:
        """The raw JSON text of one field (an ``_Args`` attribute) at these rows."""
        return raw_array(list(map(attrgetter(field), _gather(self.items, rows))))


class NativeArgs:
    """The compiled reader's raw args: a binary column per field, for all the piece's
    events, and the rows of them these are (taken only where a column is asked for)."""

    __slots__ = ("columns", "idx")

    def __init__(self, columns: dict[str, pa.Array], idx: np.ndarray | None = None) -> None:
        self.columns, self.idx = columns, idx

    def take(self, idx: np.ndarray) -> NativeArgs:
        return NativeArgs(self.columns, idx if self.idx is None else self.idx[idx])

    def column(self, field: str, rows: np.ndarray) -> pa.Array:
        return self.columns[field].take(rows if self.idx is None else self.idx[rows])


Args = StructArgs | NativeArgs

# the number fields, by ``_Event``/``_Args`` attribute
INT_FIELDS = ("pid", "tid", "correlation", "device", "stream", "bytes", "mem_bytes",
              "mem_total", "mem_device")


@dataclass
class Rows:
    """One piece's events (those kept so far) as raw columns; see the module."""

    name: pa.Array
    ts: pa.Array
    dur: pa.Array
    ints: Mapping[str, Ints]  # by INT_FIELDS
    args: Args
    # "ts"/"dur" -> (int64 ns, absent mask), where the reader converted them (see above)
    exact_ns: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None

    def __len__(self) -> int:
        return len(self.name)

    def take(self, idx: np.ndarray) -> Rows:
        exact = None if self.exact_ns is None else \
            {k: (ns[idx], absent[idx]) for k, (ns, absent) in self.exact_ns.items()}
        return Rows(self.name.take(idx), self.ts.take(idx), self.dur.take(idx),
                    {k: v.take(idx) for k, v in self.ints.items()}, self.args.take(idx),
                    exact)
