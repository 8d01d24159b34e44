"""A rank dataset (``traceviz import DIR -o DATASET``, layout in ``folder.py``) read with
DuckDB: its metadata checked, each rank's partition read under a memory limit, the
cross-rank kernel table in SQL. DuckDB is imported only here (``.[dist]``)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traceviz.errors import TraceVizError, UsageError
from traceviz.files.folders import DATASET_META
from traceviz.files.runfolder import check_trace_meta
from traceviz.rankset.folder import DATASET_FORMAT, _gather, _pool_map
from traceviz.system.install_hint import pip_install


def dataset_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads((path / DATASET_META).read_text())
    except (OSError, ValueError) as e:
        raise TraceVizError(f"{path}: unreadable dataset metadata ({e})") from None
    except RecursionError:
        raise TraceVizError(f"{path}: unreadable dataset metadata (JSON nested too "
                            "deeply)") from None
    if not isinstance(meta, dict) or meta.get("format") != DATASET_FORMAT:
        raise TraceVizError(f"{path}: {DATASET_META} is not a traceviz rank dataset")
    ranks = meta.get("ranks")
    bad = ("no ranks" if not isinstance(ranks, dict) or not ranks else next(
        (f"rank {k!r}" for k, v in ranks.items() if not k.isdigit() or not isinstance(v, dict)
         or not isinstance(v.get("file"), str) or not isinstance(v.get("meta"), dict)), None))
    if bad:
        raise TraceVizError(f"{path / DATASET_META}: malformed ({bad}: each rank needs its "
                            "file and meta); import the rank folder again")
    for k, v in (ranks or {}).items():
        check_trace_meta(v["meta"], path / DATASET_META, f"ranks.{k}.meta.")
    return meta


def _partition(path: str | Path, rank: int) -> str:
    """A rank's partition files, as DuckDB globs them; a missing one is an incomplete
    dataset, not an internal error."""
    folder = Path(path) / f"rank={rank}"
    if not any(folder.glob("*.parquet")):
        raise TraceVizError(f"{folder}: rank {rank}'s partition is missing (the dataset is "
                            "incomplete); import the rank folder again")
    return _literal(str(folder)) + "/*.parquet"


def _literal(path: str) -> str:
    """``path`` as a DuckDB glob matching only itself: a dataset folder named ``ds?`` or
    ``run[1]`` must not read ``ds1`` and ``ds2`` (each special character in brackets)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in path)


def _duckdb_module() -> Any:
    try:
        import duckdb
    except ImportError:
        raise TraceVizError(f"analyzing a rank dataset needs DuckDB: {pip_install('dist')} "
                            "(or analyze the rank folder itself)") from None
    return duckdb


def _duckdb_errors():
    """What reading a damaged partition raises: DuckDB's errors, or Arrow's."""
    import pyarrow as pa

    return (_duckdb_module().Error, pa.ArrowException)


def _read_failure(e: BaseException, what: str, memory_limit: str) -> TraceVizError:
    """A DuckDB or Arrow error reading ``what`` (partitions), worded: running out of
    memory is the limit's fault, not the dataset's."""
    if isinstance(e, _duckdb_module().OutOfMemoryException):
        return TraceVizError(f"{what} could not be read: DuckDB ran out of memory under the "
                             f"{memory_limit} limit; give it more (--memory-limit, or "
                             "memory_limit= in Python)")
    return TraceVizError(f"{what} is unreadable ({_first_line(e)}); import the rank folder "
                         "again")


_SIZE = re.compile(r" *([0-9]+(?:\.[0-9]+)?) *([a-z]+) *", re.IGNORECASE | re.ASCII)
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_UNIT_OF = {u.lower(): u for u in _UNITS}
MAX_MEMORY_LIMIT = 2**50  # DuckDB's own ceiling is near here; more is a typo


def parse_memory_limit(text: str) -> str:
    """A memory limit (``2GB``, ``512MiB``, ``1.5GB``: a number and one of B to TiB), in
    DuckDB's spelling; checked here, as DuckDB words a bad one as an SQL parser error."""
    m = _SIZE.fullmatch(text)
    unit = _UNIT_OF.get(m.group(2).lower()) if m else None
    if m is None or unit is None or not 1 <= float(m.group(1)) * _UNITS[unit] <= MAX_MEMORY_LIMIT:
        raise UsageError(f"{text!r} is not a memory size from 1B to 1024TiB (e.g. 2GB, 512MB, "
                         "1.5GiB)", option="memory_limit")
    return f"{m.group(1)}{unit}"


def default_memory_limit() -> str:
    """A quarter of this machine's memory, DuckDB's spelling."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "1GB"
    return f"{max(64, total // 4 // (1 << 20))}MB"


def _duckdb(memory_limit: str):
    con = _duckdb_module().connect()
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute("SET preserve_insertion_order = false")
    return con


_WORKER_CON: dict[str, Any] = {}


def _worker_duckdb(memory_limit: str):
    """One connection per worker process and limit: opening one costs more than reading
    a small rank's partition."""
    if memory_limit not in _WORKER_CON:
        _WORKER_CON[memory_limit] = _duckdb(memory_limit)
    return _WORKER_CON[memory_limit]


def dataset_rank(path: str, rank: int, info: dict[str, Any], memory_limit: str):
    """One rank's figures from its partition, read by DuckDB (runs in a worker process)."""
    from traceviz.analyses.compare.ranks import rank_figures
    from traceviz.table import schema
    from traceviz.trace import Trace

    con = _worker_duckdb(memory_limit)
    files = _partition(path, rank)
    try:
        table = con.read_parquet(files).to_arrow_table()
    except _duckdb_errors() as e:
        raise _read_failure(e, f"{files}: rank {rank}'s partition", memory_limit) from None
    missing = [c for c in schema.COLUMNS if c not in table.column_names]
    if missing:
        raise TraceVizError(f"{files}: rank {rank}'s partition is not a traceviz events "
                            f"table (no {', '.join(missing[:3])}{'...' * (len(missing) > 3)})")
    return rank_figures(Trace(events=_events_frame(table), meta=info["meta"]), rank,
                        info["file"])


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _events_frame(table):
    """DuckDB's Arrow table of a partition as the events table, typed in Arrow (strings
    dictionary-encoded, nullable integers kept integer): converting there costs less than
    coercing the pandas frame."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    from traceviz.table import schema

    cols, nullable = {}, {}
    for name in table.column_names:
        col = table.column(name)
        if name in ("kind", "category"):
            vocab = pa.array(list(schema.KINDS if name == "kind" else schema.CATEGORIES))
            col = pa.chunked_array(
                [pa.DictionaryArray.from_arrays(pc.index_in(c, value_set=vocab), vocab)
                 for c in col.chunks], type=pa.dictionary(pa.int32(), pa.string()))
        elif pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            col = col.dictionary_encode()
        elif name in schema.NULLABLE_INT_COLUMNS:
            col = col.cast(pa.int64())
            nullable[name] = pd.arrays.IntegerArray(
                col.fill_null(0).to_numpy(), col.is_null().to_numpy(zero_copy_only=False))
        cols[name] = col
    df = pa.table(cols).to_pandas()
    for name, values in nullable.items():
        df[name] = values
    return df


def analyze_dataset(path: Path, memory_limit: str | None = None,
                    on_rank: Callable[[int, int], None] | None = None,
                    workers: int | None = None):
    """``RanksSummary`` of a dataset, computed with DuckDB under ``memory_limit``: each of
    ``workers`` processes (default one per core) reads one rank's partition at a time for
    the per-rank figures (interval algorithms), and DuckDB computes the cross-rank kernel
    table over all partitions in SQL (spilling to disk past the limit), so analysis memory
    does not grow with the number of ranks."""
    from traceviz.files.fileio import READ_LOCK, folder_lock

    # shared with other readers; an import swapping in its partitions waits for it, and it
    # for the swap: what is read is one dataset, never half of two
    with folder_lock(path, READ_LOCK, shared=True):
        return _analyze_dataset(path, memory_limit, on_rank, workers)


def _analyze_dataset(path: Path, memory_limit: str | None,
                     on_rank: Callable[[int, int], None] | None, workers: int | None):
    from traceviz.analyses.compare.ranks import summarize_ranks

    meta = dataset_meta(path)
    limit = default_memory_limit() if memory_limit is None else parse_memory_limit(memory_limit)
    ranks = sorted(int(r) for r in meta["ranks"])
    # one rank per worker at a time, each worker's DuckDB under the same limit
    jobs = [(str(path), r, meta["ranks"][str(r)], limit) for r in ranks]
    figures, totals = _gather(_pool_map(dataset_rank, workers)(jobs), len(jobs), on_rank)
    summary = summarize_ranks(figures, totals.table())
    if not totals.ranks_without:
        con = _duckdb(limit)
        summary.top_kernels = _sql_top_kernels(con, path, ranks, summary.top_kernels, limit)
    summary.notes.append(f"{len(ranks)} ranks from the dataset, numbered {meta.get('numbered')}")
    return summary


def _sql_top_kernels(con, path: Path, ranks: list[int], fallback, memory_limit: str):
    """The cross-rank kernel table in SQL over the partitions of the dataset's ranks (GPU
    traces: kernel rows; a CPU trace's leaf ops need the op tree, so the per-rank tables
    serve there). A stray ``rank=N`` folder the metadata does not list is not read."""
    try:
        return _sql_kernel_table(con, [_partition(path, r) for r in ranks], len(ranks),
                                 fallback)
    except _duckdb_errors() as e:
        raise _read_failure(e, f"{path}: a partition", memory_limit) from None


def _sql_kernel_table(con, files: list[str], n_ranks: int, fallback):
    has_kernels = con.execute("SELECT count(*) FROM read_parquet(?, hive_partitioning=true) "
                              "WHERE kind = 'kernel'", [files]).fetchone()[0]
    if not has_kernels:
        return fallback
    return con.execute(f"""
        WITH per_rank AS (
            SELECT CAST(name AS VARCHAR) AS name, CAST(category AS VARCHAR) AS category, rank,
                   count(*) AS count, sum(dur_ns) AS total_ns
            FROM read_parquet(?, hive_partitioning=true)
            WHERE kind = 'kernel' GROUP BY ALL)
        SELECT name, category, count(*) AS ranks, CAST(sum(count) AS BIGINT) AS count,
               CAST(sum(total_ns) AS BIGINT) AS total_ns,
               sum(total_ns) / {n_ranks} AS mean_per_rank_ns,
               CAST(CASE WHEN count(*) < {n_ranks} THEN 0 ELSE min(total_ns) END AS BIGINT)
                   AS min_rank_ns,
               CAST(max(total_ns) AS BIGINT) AS max_rank_ns,
               sum(total_ns) / sum(sum(total_ns)) OVER () AS share
        FROM per_rank GROUP BY name, category
        ORDER BY total_ns DESC, name, category""", [files]).df()
