"""``Trace``: the normalized events table plus metadata, stored as one Parquet file.

The table and its load/save only, imported by every layer above it (parsers, analyses,
renderers); it imports none of them. The notebook API over it (``t.kernels()``,
``t.summary()``, the display) is ``traceviz/notebook_api.py``'s ``TraceAnalysis``, what
``traceviz.load`` returns."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa

from traceviz.algos.categorical import per_distinct
from traceviz.errors import TraceVizError
from traceviz.files.fileio import atomic_output, check_readable
from traceviz.files.limits import check_parquet_size
from traceviz.files.runfolder import check_trace_meta
from traceviz.table import schema
from traceviz.table.launch_apis import launch_kind
from traceviz.table.meta import TraceMeta

META_KEY = b"traceviz"


SMALL_ROWS = 100_000


def _has_device_rows(path: Path) -> bool:
    """A current-schema traceviz table with device rows (a filter on its columns is then
    safe to apply; anything else is read whole and judged by the full read)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    if not set(schema.COLUMNS) <= set(f.schema_arrow.names) \
            or schema.column_type_problem(f.schema_arrow):
        return False
    kinds = f.read(columns=["kind"]).column("kind")
    return bool(pc.any(pc.is_in(kinds, pa.array(schema.DEVICE_KINDS))).as_py())


@dataclass(repr=False)
class Trace:
    """One events table (see ``traceviz.table.schema``) and its metadata.

    ``meta``'s keys are named, each with what it holds, by ``traceviz.table.meta.TraceMeta``:
    the source's (``source_format``, ``source_file``, ``profiler``, ``devices``,
    ``origin_ns``...), the import's (``notes``, ``dtypes_recorded``, ``memory_base``) and
    a run's (``model``, ``workload``, ``bench``, ``runner``...).
    """

    events: pd.DataFrame
    meta: TraceMeta = field(default_factory=lambda: TraceMeta())
    # an nsys export's NVTX ranges read apart from ``events`` (``parsers/nsys/ranges_sql``:
    # one compact row per range, for the Ranges section); None: they are rows of ``events``
    nvtx_ranges: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.events = schema.coerce(self.events)
        self.meta.setdefault("schema_version", schema.SCHEMA_VERSION)

    # -- row selections every analysis needs ------------------------------------------
    @property
    def device_rows(self) -> pd.DataFrame:
        """Kernel, memcpy and memset rows."""
        return self.events.take(np.flatnonzero(schema.is_in(self.events["kind"],
                                                              *schema.DEVICE_KINDS)))

    @property
    def kernel_events(self) -> pd.DataFrame:
        """The kernel rows of ``events`` as they are (the notebook's ``kernels()`` is the
        query table)."""
        return self.events.take(np.flatnonzero(schema.is_in(self.events["kind"], "kernel")))

    @property
    def is_cpu(self) -> bool:
        """True when the trace has no device rows and no kernel launch call (leaf ops then
        play the kernels). Launches without device rows are a GPU trace recorded without
        its device activity (``kernel_activity_missing``), not a CPU one."""
        return self._kinds()[0]

    @property
    def kernel_launch_calls(self) -> int:
        """Host calls that launch kernels (``launch_apis``: kernel and graph launches),
        whether or not the trace holds the kernels they launched."""
        return self._kinds()[1]

    @property
    def kernel_activity_missing(self) -> bool:
        """Kernel launch calls but no device rows: the profiler recorded the host side
        only (CUDA/CUPTI activity off), so the device's time is unknown."""
        return self.kernel_launch_calls > 0 and not self._kinds()[2]

    def _kinds(self) -> tuple[bool, int, bool]:
        """(is_cpu, kernel launch calls, has device rows), asked by every analysis: kept
        for the events table it was computed on."""
        cached = self.__dict__.get("_kinds_of")
        if cached is not None and cached[0] is self.events:
            return cached[1]
        kind = self.events["kind"]
        has_device = bool(schema.is_in(kind, *schema.DEVICE_KINDS).any())
        runtime = np.flatnonzero(schema.is_in(kind, "runtime"))
        names = self.events["name"].take(runtime)
        launches = int(per_distinct(
            names, lambda c: [launch_kind(str(n)) == "kernel" for n in c], fill=False
        ).sum()) if len(runtime) else 0
        value = (not has_device and not launches, launches, has_device)
        self.__dict__["_kinds_of"] = (self.events, value)
        return value

    def __repr__(self) -> str:
        # one line: a dataclass's would print the whole table
        return (f"<Trace {self.meta.get('source_format', '?')} · {len(self.events):,} "
                "events>")

    # -- storage -----------------------------------------------------------------------
    def save(self, path: str | Path, force: bool = False) -> Path:
        """Write atomically; an existing file is replaced only with ``force``."""
        path = Path(path)
        # one thread for a small table: starting the conversion threads costs more than
        # they save (a rank of a job: ~2 ms of ~9)
        table = pa.Table.from_pandas(self.events, preserve_index=False,
                                     nthreads=1 if len(self.events) < SMALL_ROWS else None)
        md = dict(table.schema.metadata or {})
        md[META_KEY] = json.dumps(self.meta, default=str).encode()
        table = table.replace_schema_metadata(md)
        import pyarrow.parquet as pq  # here: an analyze of a raw trace writes no Parquet

        # dictionary pages and min/max statistics only where they pay: the categorical
        # columns are dictionaries already, and a string column's statistics cost more to
        # compute than the rest of the write (they prune nothing: every row group holds
        # every kind); integers keep theirs, for readers that filter on times or steps
        # (measured on 757k rows: 0.25 s against 0.48 s, the file 5% larger)
        cats = [f.name for f in table.schema if pa.types.is_dictionary(f.type)]
        plain = [f.name for f in table.schema if not pa.types.is_dictionary(f.type)]
        with atomic_output(path, force=force) as tmp:
            pq.write_table(table, tmp, compression="zstd", use_dictionary=cats,
                           write_statistics=plain)
        return path

    @classmethod
    def load(cls, path: str | Path, rows: Any = None) -> Trace:
        """Read a traceviz Parquet file. ``rows`` (a ``pyarrow.compute`` expression): on a
        trace with device rows, read only the rows it keeps, for an analysis that reads no
        others; a CPU trace is read whole."""
        import pyarrow.parquet as pq  # here: reading a raw trace needs none of it

        path = Path(path)
        check_readable(path)
        try:
            check_parquet_size(path)  # from the footer: 2.7 MB of rows can hold 4 GB
            if rows is not None and not _has_device_rows(path):
                rows = None
            table = pq.read_table(path, filters=rows)
        except (pa.ArrowInvalid, OSError) as e:
            raise TraceVizError(f"{path}: not a readable Parquet file ({e})") from None
        raw_meta = (table.schema.metadata or {}).get(META_KEY)
        if raw_meta is None:
            raise TraceVizError(f"{path}: Parquet file was not written by traceviz (no metadata)")
        try:
            meta = json.loads(raw_meta)
        except (ValueError, RecursionError):
            meta = None
        if not isinstance(meta, dict):
            raise TraceVizError(f"{path}: its traceviz metadata is not a JSON object "
                                "(damaged file?)")
        check_trace_meta(meta, path)
        src = meta.get("source_file")
        if isinstance(src, str) and not Path(src).exists() \
                and (path.parent / Path(src).name).is_file():
            # imported elsewhere (a run folder copied from another machine): the raw trace
            # beside the table is the one to name
            meta["source_file"] = str(path.parent / Path(src).name)
        version = meta.get("schema_version")
        if version not in (1, schema.SCHEMA_VERSION):
            raise TraceVizError(
                f"{path}: trace table schema version {version}, this traceviz reads "
                f"{schema.SCHEMA_VERSION}; re-import the raw trace"
            )
        if problem := schema.column_type_problem(table.schema):
            raise TraceVizError(f"{path}: {problem}")
        try:
            events = table.to_pandas()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
            raise TraceVizError(f"{path}: unreadable columns ({e})") from None
        if version == 1 and "launch_ts_ns" in events and "launch_id" not in events:
            from traceviz.table.upgrade import from_v1

            events = from_v1(events)
            meta["schema_version"] = schema.SCHEMA_VERSION
        if not len(events):
            raise TraceVizError(f"{path}: the trace table has no rows")
        missing = [c for c in schema.COLUMNS
                   if c not in events.columns and c not in schema.OPTIONAL_COLUMNS]
        if missing:
            raise TraceVizError(f"{path}: trace table lacks columns {', '.join(missing)}")
        for col in schema.INT_COLUMNS:  # say which column, not what pandas met first
            if col in events and (gaps := int(events[col].isna().sum())):
                raise TraceVizError(f"{path}: column {col} has {gaps:,} missing "
                                    f"value{'s' if gaps > 1 else ''}; every row needs a "
                                    "whole number there")
        _check_times(events, path)
        for col in ("kind", "name"):
            if col in events and (gaps := int(events[col].isna().sum())):
                raise TraceVizError(f"{path}: column {col} has {gaps:,} missing "
                                    f"value{'s' if gaps > 1 else ''}; every row needs one")
        device = events["kind"].isin(schema.DEVICE_KINDS).to_numpy()
        if gaps := int((events["category"].isna().to_numpy() & device).sum()):
            raise TraceVizError(f"{path}: column category has {gaps:,} missing value"
                                f"{'s' if gaps > 1 else ''} on kernel or copy rows; each "
                                "has a category")
        if "details" in events and events["details"].isna().any():  # "" where none
            details = events["details"].astype("category")
            if "" not in details.cat.categories:
                details = details.cat.add_categories([""])
            events["details"] = details.fillna("")
        try:
            return cls(events=events, meta=cast(TraceMeta, meta))
        except (ValueError, TypeError, OverflowError) as e:
            raise TraceVizError(f"{path}: a column has the wrong type or missing values "
                                f"({e})") from None


def _check_times(events: pd.DataFrame, path: Path) -> None:
    """A duration below 0, or an end past int64 nanoseconds, is no time: every figure
    summed from it would be wrong (a negative total), so the table is refused."""
    dur = events["dur_ns"].to_numpy()
    if n := int((dur < 0).sum()):
        raise TraceVizError(f"{path}: column dur_ns has {n:,} negative value"
                            f"{'s' if n > 1 else ''}; a duration is 0 or more (re-import "
                            "the raw trace)")
    ts = events["ts_ns"].to_numpy()
    if n := int((ts > np.iinfo(np.int64).max - dur).sum()):
        raise TraceVizError(f"{path}: column ts_ns has {n:,} time{'s' if n > 1 else ''} "
                            "whose end is past 64-bit nanoseconds (re-import the raw trace)")
