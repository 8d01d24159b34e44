"""The Python Kineto reader: msgspec's typed event layout, and its structs as the raw
columns (``raw.Rows``) both readers hand ``columns.event_columns``.

msgspec decodes only the fields we use (unknown fields are skipped, in C) and keeps
``ts``/``dur`` and the args read once per distinct value as their raw JSON text. This
reader is the compiled one's fallback and its oracle: what the compiled reader does not
replicate exactly, this one decodes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec
import pandas as pd
import pyarrow as pa

from traceviz.parsers.kineto.columns import event_columns
from traceviz.parsers.kineto.raw import INT_FIELDS, Rows, StructArgs, StructInts, _gather
from traceviz.parsers.kineto.times import raw_array

_NO_RAW = msgspec.Raw(b"")  # one shared default: an absent field allocates nothing


# gc=False: millions of small structs, no cycles; the GC need not track them
class _Args(msgspec.Struct, gc=False):
    correlation: int | float | str | bool | None = None
    device: int | float | str | bool | None = None
    stream: int | float | str | bool | None = None
    bytes: int | float | str | bool | None = None
    # kept as raw JSON and decoded once per distinct value, for the few rows that use them
    grid: msgspec.Raw = _NO_RAW
    block: msgspec.Raw = _NO_RAW
    regs: msgspec.Raw = msgspec.field(default=_NO_RAW, name="registers per thread")
    shm: msgspec.Raw = msgspec.field(default=_NO_RAW, name="shared memory")
    input_type: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Concrete Inputs")
    input_dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")
    # a collective's message (record_param_comms and, on newer PyTorch, its kernel)
    in_nelems: msgspec.Raw = msgspec.field(default=_NO_RAW, name="In msg nelems")
    out_nelems: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Out msg nelems")
    msg_dtype: msgspec.Raw = msgspec.field(default=_NO_RAW, name="dtype")
    group_size: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Group size")
    pg_name: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Process Group Name")
    coll_name: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Collective name")
    # a [memory] instant event (profile_memory=True): the allocation's size (negative: a
    # free), the allocator's total after it, and where
    mem_bytes: int | float | str | bool | None = msgspec.field(default=None, name="Bytes")
    mem_total: int | float | str | bool | None = msgspec.field(default=None,
                                                               name="Total Allocated")
    mem_device: int | float | str | bool | None = msgspec.field(default=None, name="Device Id")


class _Event(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | float | str | bool | None = None
    tid: int | float | str | bool | None = None
    ts: msgspec.Raw = _NO_RAW
    dur: msgspec.Raw = _NO_RAW
    args: _Args | None = None


EVENTS = msgspec.json.Decoder(list[_Event])


class _Document(msgspec.Struct, gc=False):
    """A whole Kineto document, for a file small enough to decode at once: the event
    array and the metadata the parser keeps (UNSET: the key is absent); other keys are
    skipped."""

    traceEvents: list[_Event] | msgspec.UnsetType = msgspec.UNSET
    deviceProperties: Any = msgspec.UNSET
    schemaVersion: Any = msgspec.UNSET
    distributedInfo: Any = msgspec.UNSET
    baseTimeNanoseconds: Any = msgspec.UNSET
    traceName: Any = msgspec.UNSET


DOCUMENT = msgspec.json.Decoder(_Document)
# the raw args by their JSON key (the compiled reader's names) -> ``_Args`` attribute
RAW_ARGS = {f.encode_name: f.name for f in msgspec.structs.fields(_Args)
            if f.type is msgspec.Raw}
# the number fields' JSON keys (the compiled reader's names) -> attribute
INT_KEYS = {"pid": "pid", "tid": "tid", **{f.encode_name: f.name for f in
                                           msgspec.structs.fields(_Args)
                                           if f.type is not msgspec.Raw}}


def struct_rows(events: list[_Event]) -> Rows:
    """Decoded events -> raw columns (the number fields and args read when asked for)."""
    args = [e.args for e in events]
    if None in args:
        empty = _Args()
        args = [a if a is not None else empty for a in args]
    ints = {f: StructInts(events if f in ("pid", "tid") else args, f) for f in INT_FIELDS}
    # (list comprehensions: twice as fast as map(attrgetter) on structs)
    return Rows(pa.array([e.name for e in events], type=pa.string()),
                raw_array([e.ts for e in events]), raw_array([e.dur for e in events]),
                ints, StructArgs(args))


def python_columns(events: list[_Event], details: bool = True
                   ) -> tuple[pd.DataFrame, Counter]:
    """``columns.event_columns`` of events the Python reader decoded."""
    return event_columns(pa.array([e.ph for e in events], type=pa.string()),
                         pa.array([e.cat for e in events], type=pa.string()),
                         lambda idx: struct_rows(_gather(events, idx)), details)
