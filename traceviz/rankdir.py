"""Folders of rank traces and the Parquet datasets made from them (``traceviz import DIR
-o DATASET``): finding the ranks, importing them in parallel, and analysing either one
rank at a time so that memory does not grow with the number of ranks.

Dataset layout (hive-partitioned, readable by DuckDB, polars and pyarrow.dataset)::

    DATASET/_traceviz.json          {"format": "traceviz-ranks", "schema_version", "ranks":
                                     {"<rank>": {"file", "events", "meta"}}}
    DATASET/rank=<N>/part-0.parquet the rank's events table (the `Trace` columns; the rank
                                     is the partition key, not a column in the file)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceviz.errors import InputError, RunFailed, TraceVizError, UsageError
from traceviz.fileio import atomic_output

if TYPE_CHECKING:
    from traceviz.analyses.ranks import KernelTotals, RankFigures

DATASET_META = "_traceviz.json"
MARKER = ".traceviz-import"  # its content tells a worker whether it sees the dataset folder
DATASET_FORMAT = "traceviz-ranks"
TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".parquet", ".nsys-rep", ".arrow",
                  ".xplane.pb", ".xplane.pb.gz", ".qdrep")


def describe_folder(path: Path) -> str:
    """Why a folder is not something traceviz reads as one trace, in one line."""
    if is_dataset(path):
        return (f"{path}: a rank dataset, not one trace (`traceviz analyze {path}` reads "
                "the dataset; give one rank's trace file here)")
    ranks = rank_files(path)
    if ranks:
        return (f"{path}: a folder of {len(ranks)} rank traces, not one trace (`traceviz "
                f"analyze {path}` reads them all; give one here, e.g. {path / ranks[0].name})")
    if any(path.glob("rank=*/*.parquet")):
        return (f"{path}: an incomplete rank dataset (no {DATASET_META}: its import did not "
                "finish); import the rank folder again")
    return (f"{path}: no trace files in this folder (expected a capture's run folder, a "
            f"folder of rank traces named *{', *'.join(TRACE_SUFFIXES[:4])}..., an nsys "
            "table folder or a TensorBoard log directory)")


def is_dataset(path: Path) -> bool:
    return path.is_dir() and (path / DATASET_META).is_file()


def rank_files(directory: Path) -> list[Path]:
    """The trace files directly in ``directory`` (by name), sorted."""
    return sorted(p for p in directory.iterdir()
                  if p.is_file() and p.name.endswith(TRACE_SUFFIXES)
                  and not p.name.startswith("."))


def _xspace_companion(name: str) -> bool:
    """Files TF/JAX write beside a host's ``.xplane.pb`` in a profile run (trace viewer and
    Perfetto exports, memory profiles): part of that run, not ranks. PyTorch's
    ``*.pt.trace.json`` are not among them."""
    return name.startswith("perfetto_trace.json") or name.endswith(
        (".memory_profile.json.gz", ".memory_profile.json")) or (
        name.endswith((".trace.json.gz", ".trace.json")) and ".pt.trace.json" not in name)


def is_rank_folder(path: Path) -> bool:
    """A folder of trace files that is not itself one trace (a run folder, an nsys table
    folder, a TensorBoard log directory, a profile run of ``.xplane.pb`` host files and
    their companions) nor a dataset. ``.xplane.pb`` files beside traces of other formats
    are ranks like the others."""
    if not path.is_dir() or is_dataset(path) or (path / "trace.parquet").is_file():
        return False
    from traceviz.parsers.detect import _is_nsys_folder
    from traceviz.parsers.xplane import is_xplane_dir

    if _is_nsys_folder(path):
        return False
    files = rank_files(path)
    # a log directory (its runs in folders below) or a run folder is one trace
    if is_xplane_dir(path) and (
            not any(".xplane.pb" in f.name for f in files)
            or all(".xplane.pb" in f.name or _xspace_companion(f.name) for f in files)):
        return False
    return bool(files)


@dataclass(frozen=True)
class RankFile:
    rank: int
    path: Path


def assign_ranks(files: list[Path], metas: list[dict[str, Any]]) -> tuple[list[RankFile], str]:
    """Each file's rank: ``distributedInfo.rank``, else the number in its name; when that
    leaves a file without a rank or two files with one, file order for all. Returns the
    ranks and how they were found."""
    from traceviz.analyses.ranks import rank_from

    found = [rank_from(p, m) for p, m in zip(files, metas, strict=True)]
    known = [r for r in found if r is not None]
    if len(known) == len(found) and len(set(known)) == len(known):
        return [RankFile(r, p) for r, p in zip(known, files, strict=True)], \
            "from the traces (distributedInfo.rank) or their file names"
    return [RankFile(i, p) for i, p in enumerate(files)], "by file order (file names sorted)"


def _load(path: Path, details: bool = True):
    from traceviz.parsers import load
    from traceviz.parsers.detect import detect_format

    if not details and detect_format(path) == "kineto":
        from traceviz.parsers import kineto

        return kineto.parse(path, details=False)
    return load(path)


def folder_rank(rank: int, path: str):
    """One rank's figures from its trace file (runs in a worker process): the events are
    dropped once the figures are made (they never read the kernels' launch details)."""
    from traceviz.analyses.ranks import rank_figures

    return rank_figures(_load(Path(path), details=False), rank, Path(path).name)


def analyze_folder(directory: Path, on_rank: Callable[[int, int], None] | None = None,
                   workers: int | None = None):
    """``RanksSummary`` of a rank folder: ranks in ``workers`` processes (default one per
    core), each holding one rank's events at a time."""
    from traceviz.analyses.ranks import summarize_ranks

    files = rank_files(directory)
    if not files:
        raise InputError(describe_folder(directory))
    ranks, how = assign_ranks(files, [_probe_meta(f) for f in files])
    jobs = [(rf.rank, str(rf.path)) for rf in ranks]
    figures, totals = _gather(_pool_map(folder_rank, workers)(jobs), len(jobs), on_rank)
    summary = summarize_ranks(figures, totals.table())
    summary.notes.append(f"{len(files)} ranks, numbered {how}")
    return summary


def _gather(results: Iterator[tuple[int, Any]], n: int,
            on_rank: Callable[[int, int], None] | None
            ) -> tuple[list[RankFigures], KernelTotals]:
    """The ranks' figures as they come, each rank's kernel table folded into the cross-rank
    one and dropped: what stays per rank is its row of figures (~1.5 KB)."""
    import pandas as pd

    from traceviz.analyses.ranks import KernelTotals

    figures: list[RankFigures] = []
    totals = KernelTotals()
    folded = pd.DataFrame({"name": [], "category": [], "count": [], "total_ns": []})
    for i, (_, fig) in enumerate(results, 1):
        totals.add(fig.kernels)
        fig.kernels = folded
        figures.append(fig)
        if on_rank:
            on_rank(i, n)
    return figures, totals


# -- datasets ----------------------------------------------------------------------------
def import_rank(rank: int, path: str, out: str, marker: str) -> dict[str, Any]:
    """Parse one rank's trace and write its partition (runs in a worker process, or a Ray
    task on another node: one that does not see ``out`` (its marker file) returns the
    partition's bytes as ``_partition`` for the driver to write)."""
    trace = _load(Path(path))
    try:
        shared = (Path(out) / MARKER).read_text() == marker
    except OSError:
        shared = False
    result: dict[str, Any] = {"rank": rank, "file": Path(path).name,
                              "events": len(trace.events), "meta": trace.meta}
    part = Path(out) / f"rank={rank}" / "part-0.parquet"
    if shared:
        part.parent.mkdir(parents=True, exist_ok=True)
        trace.save(part, force=True)
        return result
    with tempfile.TemporaryDirectory(prefix="traceviz-rank-") as tmp:
        local = Path(tmp) / "part-0.parquet"
        trace.save(local)
        result["_partition"] = local.read_bytes()
    return result


_DIST_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')
PROBE_MAX = 8 << 20


def _probe_meta(path: Path) -> dict[str, Any]:
    """The metadata that numbers a rank, read before parsing (so a folder and its dataset
    number ranks alike): a Kineto trace's ``distributedInfo``, which torch.profiler writes
    ahead of ``traceEvents``; the head is read up to there (at most ``PROBE_MAX``)."""
    from traceviz.fileio import open_input

    if not path.name.endswith((".json", ".json.gz")):
        return {}
    head = b""
    with open_input(path) as f:
        while len(head) < PROBE_MAX:
            block = f.read(1 << 16)
            if not block:
                break
            head += block
            m = _DIST_RANK.search(head)
            if m:
                return {"kineto_distributedInfo": {"rank": int(m.group(1))}}
            if b'"traceEvents"' in head:
                break
    return {}


JobMap = Callable[[list[tuple]], Iterator[tuple[int, Any]]]


def import_folder(directory: Path, out: Path, workers: int | None = None,
                  on_rank: Callable[[int, int], None] | None = None,
                  job_map: JobMap | None = None) -> dict:
    """Write the dataset of a rank folder: ranks in parallel (``workers`` processes, each
    holding one rank at a time, so memory is bounded by workers x the largest rank), the
    metadata file last (a dataset without it is incomplete and is not read). ``job_map``
    runs ``import_rank`` over the jobs elsewhere (Ray tasks: ``cluster.ray_map``), yielding
    (job index, result or the exception that lost it)."""
    files = rank_files(directory)
    if not files:
        raise InputError(describe_folder(directory))
    if out.resolve() == directory.resolve():
        raise InputError(f"{out}: is the rank folder itself; write the dataset elsewhere")
    ranks, how = assign_ranks(files, [_probe_meta(f) for f in files])
    created = not out.exists()
    # partitions go to a staging folder inside the dataset, moved into place when every rank
    # is done: a failed import leaves an earlier dataset as it was
    token = uuid.uuid4().hex
    stage = out / f".import-{token}"
    stage.mkdir(parents=True)
    (stage / MARKER).write_text(token)
    jobs = [(r.rank, str(r.path), str(stage), token) for r in ranks]
    try:
        results = _import_jobs(stage, ranks, jobs, workers, on_rank, job_map)
        (out / DATASET_META).unlink(missing_ok=True)  # incomplete while partitions move
        for old in out.glob("rank=*"):
            shutil.rmtree(old)
        for r in ranks:
            (stage / f"rank={r.rank}").rename(out / f"rank={r.rank}")
        meta = {"format": DATASET_FORMAT, "schema_version": 2, "numbered": how,
                "ranks": {str(r): {k: v for k, v in results[r].items() if k != "rank"}
                          for r in sorted(results)}}
        with atomic_output(out / DATASET_META, force=True) as tmp:
            tmp.write_text(json.dumps(meta, default=str))
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return meta


def _import_jobs(out: Path, ranks: list[RankFile], jobs: list[tuple], workers: int | None,
                 on_rank: Callable[[int, int], None] | None,
                 job_map: JobMap | None) -> dict[int, dict[str, Any]]:
    """Run the rank imports; each partition lands under ``out``. Returns the results."""
    results: dict[int, dict[str, Any]] = {}
    for i, (k, res) in enumerate((job_map or _pool_map(import_rank, workers))(jobs), 1):
        if isinstance(res, BaseException):
            raise RunFailed(f"rank {ranks[k].rank} ({ranks[k].path.name}): "
                            f"{type(res).__name__}: {str(res).splitlines()[0] if str(res) else ''}")
        data = res.pop("_partition", None)
        if data is not None:
            part = out / f"rank={res['rank']}" / "part-0.parquet"
            part.parent.mkdir(parents=True, exist_ok=True)
            with atomic_output(part, force=True) as tmp:
                tmp.write_bytes(data)
        results[res["rank"]] = res
        if on_rank:
            on_rank(i, len(jobs))
    return results


def _pool_map(fn: Callable[..., Any], workers: int | None) -> JobMap:
    """``fn`` over the jobs in ``workers`` local processes (default: one per core), yielding
    (job index, result) as they finish; in this process when one worker would do."""
    def run(jobs: list[tuple]) -> Iterator[tuple[int, Any]]:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        n = min(workers or os.cpu_count() or 1, len(jobs))
        if n <= 1:
            yield from ((i, fn(*j)) for i, j in enumerate(jobs))
            return
        from traceviz.parsers.jsonstream import kill_pool

        pool = ProcessPoolExecutor(max_workers=n)
        try:
            futures = {pool.submit(fn, *j): i for i, j in enumerate(jobs)}
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        except BaseException:
            # Ctrl-C, a failed rank or an abandoned generator: the queued ranks are not
            # worth finishing (a pool's own exit waits for every one: 10 s at 512 ranks)
            kill_pool(pool)
            raise
        pool.shutdown()
    return run


def dataset_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads((path / DATASET_META).read_text())
    except (OSError, ValueError) as e:
        raise TraceVizError(f"{path}: unreadable dataset metadata ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != DATASET_FORMAT:
        raise TraceVizError(f"{path}: {DATASET_META} is not a traceviz rank dataset")
    ranks = meta.get("ranks")
    bad = ("no ranks" if not isinstance(ranks, dict) or not ranks else next(
        (f"rank {k!r}" for k, v in ranks.items() if not k.isdigit() or not isinstance(v, dict)
         or not isinstance(v.get("file"), str) or not isinstance(v.get("meta"), dict)), None))
    if bad:
        raise TraceVizError(f"{path / DATASET_META}: malformed ({bad}: each rank needs its "
                            "file and meta); import the rank folder again")
    return meta


def _partition(path: str | Path, rank: int) -> str:
    """A rank's partition files, as DuckDB globs them; a missing one is an incomplete
    dataset, not an internal error."""
    folder = Path(path) / f"rank={rank}"
    if not any(folder.glob("*.parquet")):
        raise TraceVizError(f"{folder}: rank {rank}'s partition is missing (the dataset is "
                            "incomplete); import the rank folder again")
    return str(folder / "*.parquet")


def _duckdb_module() -> Any:
    try:
        import duckdb
    except ImportError:
        raise TraceVizError("analyzing a rank dataset needs DuckDB: pip install -e '.[dist]' "
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
    from traceviz import schema
    from traceviz.analyses.ranks import rank_figures
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

    from traceviz import schema

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
    from traceviz.analyses.ranks import summarize_ranks

    meta = dataset_meta(path)
    limit = default_memory_limit() if memory_limit is None else parse_memory_limit(memory_limit)
    con = _duckdb(limit)
    ranks = sorted(int(r) for r in meta["ranks"])
    # one rank per worker at a time, each worker's DuckDB under the same limit
    jobs = [(str(path), r, meta["ranks"][str(r)], limit) for r in ranks]
    figures, totals = _gather(_pool_map(dataset_rank, workers)(jobs), len(jobs), on_rank)
    summary = summarize_ranks(figures, totals.table())
    if not totals.ranks_without:
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
