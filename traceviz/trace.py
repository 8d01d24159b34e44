"""``Trace``: the normalized events table plus metadata, stored as one Parquet file."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

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

if TYPE_CHECKING:
    from traceviz.render.notebook import BoundView, SummaryView
    from traceviz.render.notebook_results import (
        AdviceView,
        CriticalPathView,
        EfficiencyView,
        MemoryView,
        WhatifView,
    )

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


@dataclass
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
        """The kernel rows of ``events`` as they are (``kernels()`` is the query table)."""
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

    # -- the notebook API: query tables (docs/api.md) --------------------------
    def kernels(self) -> pd.DataFrame:
        """One row per kernel (on a CPU trace: per leaf op doing the work), with its
        category, launch call, delay, cast flag and ``phase``."""
        from traceviz.analyses.summary.tables import kernel_rows

        return kernel_rows(self)

    def launches(self) -> pd.DataFrame:
        """One row per launch call (kernel, graph, copy, set) with the work it launched."""
        from traceviz.analyses.summary.launch import launch_table

        return launch_table(self)

    def casts(self) -> pd.DataFrame:
        """The rows of ``kernels()`` that convert between floating-point formats."""
        from traceviz.analyses.summary.tables import cast_table

        return cast_table(self)

    def ops(self) -> pd.DataFrame:
        """Framework ops with ``depth``, ``is_leaf``, ``self_ns`` and ``parent``: sum
        ``self_ns`` (not ``dur_ns``) to count nested ops once."""
        from traceviz.analyses.summary.tables import op_table

        return op_table(self)

    def phases(self) -> pd.DataFrame:
        """Per marked phase (data, forward, backward, optimizer): wall time, device busy,
        kernels, casts."""
        from traceviz.analyses.summary.tables import phases_of

        return phases_of(self)

    def summary(self, top: int = 20) -> SummaryView:
        """The figures of ``traceviz analyze --json`` (``top``: kernels listed): a dict,
        shown as tables in a notebook, each table a DataFrame with unit-named columns
        (``kernels_df()``, ``categories_df()``, ``phases_df()``, ``totals_df()``,
        ``host_wait_df()``)."""
        from traceviz.analyses.summary.figures import summarize
        from traceviz.render.notebook import SummaryView

        return SummaryView(summarize(self, with_efficiency=True).to_dict(top=top))

    def efficiency(self, peak: str | None = None) -> EfficiencyView:
        """``analyze --json``'s ``efficiency``: FLOPs, bytes, TFLOP/s, GB/s, % of peak and
        bound per op group and kernel, the run's totals and MFU (``peak``: as --peak); a
        dict, its tables as DataFrames by ``kernels_df()`` and ``groups_df()``."""
        from traceviz.render.notebook_results import EfficiencyView

        return EfficiencyView(self._section("efficiency", peak))

    def memory(self) -> MemoryView:
        """``analyze --json``'s ``memory``: peak allocated, allocated and freed bytes per
        device and phase, and the timed batches' peak (bench.json); a dict, its tables in
        MiB by ``devices_df()`` and ``phases_df()``."""
        from traceviz.render.notebook_results import MemoryView

        return MemoryView(self._section("memory", None))

    def bound(self) -> BoundView:
        """What bounds the step (``analyze --json``'s ``bound``, ``advise``'s first line):
        a dict of ``by``, the host's ``cause``, ``why`` and the figures it was judged on
        (``figures_df()``: as a DataFrame in ms and % of the span)."""
        from traceviz.render.notebook import BoundView

        return BoundView(self._section("bound", None))

    def host_wait(self) -> pd.DataFrame:
        """The time the device waited for the host, by what the host was doing: one row
        per cause (``cause``, ``ns``, ``share`` of the host wait, ``names``: what took it
        most, ``ranges``: the user ranges it ran in; ``time_ms`` and ``share_pct``: the
        same in ms and %), largest first; empty on a CPU trace or where no launch is in
        the trace."""
        from traceviz.analyses.summary.figures import summarize

        w = summarize(self).host_wait_split
        columns = ["cause", "ns", "share", "names", "ranges", "time_ms", "share_pct"]
        if w is None:
            return pd.DataFrame(columns=columns)
        total = sum(w.causes.values()) or 1
        rows = [(c, ns, ns / total,
                 list(w.names.loc[w.names["cause"] == c, "name"].head(3)),
                 list(w.ranges.loc[w.ranges["cause"] == c, "range"].head(3)),
                 ns / 1e6, ns * 100 / total)
                for c, ns in w.causes.items() if ns]
        return pd.DataFrame(rows, columns=columns).sort_values(
            "ns", ascending=False, ignore_index=True)

    def _section(self, name: str, peak: str | None) -> dict[str, Any]:
        """One section of ``summary()``, every row, computed alone."""
        from traceviz.analyses.summary.figures import integer_ns, summarize
        from traceviz.opcost.peaks import parse_peak

        s = summarize(self, with_efficiency=True, peak=parse_peak(peak) if peak else None)
        # its part of --json with every row listed; {} where the section gives none
        return integer_ns(s.section_json(name, top=1 << 30))[name]

    def whatif(self, *scenarios: str) -> WhatifView:
        """``traceviz whatif --json``: the replay and each scenario (default: all, e.g.
        ``t.whatif("cuda_graphs", "gemm_speedup=4")``); a dict, the scenarios as a
        DataFrame by ``scenarios_df()``."""
        from traceviz.analyses.whatif.engine import whatif
        from traceviz.analyses.whatif.scenarios import DEFAULT_SCENARIOS
        from traceviz.render.notebook_results import WhatifView

        return WhatifView(whatif(self, tuple(scenarios) or DEFAULT_SCENARIOS).to_dict())

    def critical_path(self, annotation: str | None = None,
                      top: int = 20) -> CriticalPathView:
        """``analyze --critical-path --json``'s ``critical_path``: per step the path's length
        and parts, the kernels and host calls on it (``annotation``: per host range of
        that name instead of per step); a dict, its tables by ``steps_df()``,
        ``parts_df()``, ``kernels_df()``, ``host_calls_df()``."""
        from traceviz.analyses.critical_path.path import critical_path
        from traceviz.render.notebook_results import CriticalPathView

        return CriticalPathView(critical_path(self, annotation).to_dict(top=top))

    def advise(self) -> AdviceView:
        """``traceviz advise --json``'s findings: rule, title, evidence, action, saving; a
        list of dicts, one row each in ``findings_df()``."""
        from traceviz.analyses.advice.engine import advise
        from traceviz.render.notebook_results import AdviceView

        findings, steps = advise(self)
        return AdviceView(f.to_dict(steps) for f in findings)

    # -- the notebook display (traceviz/render/notebook.py) ----------------------------
    def __repr__(self) -> str:
        from traceviz.render.escape import visible

        m = self.meta
        kind = "CPU" if self.is_cpu else "GPU"
        what = visible(str(m.get("model") or m.get("source_file") or "?"))
        return (f"<Trace {what} · {visible(str(m.get('source_format', '?')))} · {kind} · "
                f"{len(self.events):,} events>")

    def overview(self) -> dict[str, Any]:
        """What the display shows: source file, profiler, devices, rows per kind (most
        first), the time the rows cover (first start to last end, ns), step marks."""
        ev = self.events
        kinds = ev["kind"].value_counts()
        start, end = (int(ev["ts_ns"].min()), int((ev["ts_ns"] + ev["dur_ns"]).max())) \
            if len(ev) else (0, None)
        return {"source_file": self.meta.get("source_file"),
                "profiler": self.meta.get("profiler"),
                "devices": dict(self.meta.get("devices") or {}),
                "kinds": {str(k): int(n) for k, n in kinds.items() if n},
                "recorded_ns": None if end is None else end - start,
                "step_marks": int(kinds.get("step", 0))}

    def __str__(self) -> str:
        from traceviz.render.notebook import trace_text

        return trace_text(repr(self), self.overview())

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))

    def _repr_html_(self) -> str:
        from traceviz.render.notebook import trace_html

        return trace_html(repr(self), self.overview())

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

        with atomic_output(path, force=force) as tmp:
            pq.write_table(table, tmp, compression="zstd")
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
