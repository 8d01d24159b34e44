"""Folders of rank traces and the Parquet datasets made from them (``traceviz import DIR
-o DATASET``): finding the ranks, importing them in parallel, and analysing a folder one
rank at a time so that memory does not grow with the number of ranks (a dataset:
``dataset.py``).

Dataset layout (hive-partitioned, readable by DuckDB, polars and pyarrow.dataset)::

    DATASET/_traceviz.json          {"format": "traceviz-ranks", "schema_version", "ranks":
                                     {"<rank>": {"file", "events", "meta"}}}
    DATASET/rank=<N>/part-0.parquet the rank's events table (the `Trace` columns; the rank
                                     is the partition key, not a column in the file)
"""

from __future__ import annotations

import contextlib
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

from traceviz.errors import InputError, RunFailed, TraceVizError
from traceviz.files.fileio import IMPORT_LOCK, READ_LOCK, atomic_output, folder_lock
from traceviz.files.folders import DATASET_META, describe_folder, rank_files

if TYPE_CHECKING:
    from traceviz.analyses.compare.ranks import KernelTotals, RankFigures

MARKER = ".traceviz-import"  # its content tells a worker whether it sees the dataset folder
DATASET_FORMAT = "traceviz-ranks"


@dataclass(frozen=True)
class RankFile:
    rank: int
    path: Path


def assign_ranks(files: list[Path], metas: list[dict[str, Any]]) -> tuple[list[RankFile], str]:
    """Each file's rank: ``distributedInfo.rank``, else the number in its name; when that
    leaves a file without a rank or two files with one, file order for all. Returns the
    ranks and how they were found."""
    from traceviz.analyses.compare.ranks import rank_from

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
    from traceviz.analyses.compare.ranks import rank_figures

    return rank_figures(_load(Path(path), details=False), rank, Path(path).name)


def analyze_folder(directory: Path, on_rank: Callable[[int, int], None] | None = None,
                   workers: int | None = None):
    """``RanksSummary`` of a rank folder: ranks in ``workers`` processes (default one per
    core), each holding one rank's events at a time."""
    from traceviz.analyses.compare.ranks import summarize_ranks

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

    from traceviz.analyses.compare.ranks import KernelTotals

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


def rank_traces(directory: Path, most: int = 64) -> dict[int, Any]:
    """Every rank's ``Trace`` of a rank folder, by rank (``whatif`` replays them
    together: all in memory, so at most ``most`` ranks)."""
    files = rank_files(directory)
    if not files:
        raise InputError(describe_folder(directory))
    if len(files) > most:
        raise InputError(f"{directory}: {len(files)} ranks; whatif replays at most {most} "
                         "together (give one rank's trace to replay it alone)")
    ranks, _ = assign_ranks(files, [_probe_meta(f) for f in files])
    return {rf.rank: _load(rf.path) for rf in ranks}


def _probe_meta(path: Path) -> dict[str, Any]:
    """The metadata that numbers a rank, read before parsing (so a folder and its dataset
    number ranks alike): a Kineto trace's ``distributedInfo``, which torch.profiler writes
    ahead of ``traceEvents``; the head is read up to there (at most ``PROBE_MAX``)."""
    from traceviz.files.fileio import open_input

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
                  job_map: JobMap | None = None, force: bool = False) -> dict:
    """Write the dataset of a rank folder: ranks in parallel (``workers`` processes, each
    holding one rank at a time, so memory is bounded by workers x the largest rank), the
    metadata file last (a dataset without it is incomplete and is not read). ``job_map``
    runs ``import_rank`` over the jobs elsewhere (Ray tasks: ``cluster.ray_map``), yielding
    (job index, result or the exception that lost it).

    ``out`` is traceviz's own only when its ``_traceviz.json`` says so; any other folder
    that is not empty is refused without ``force``, and ``force`` replaces only the
    ``rank=N`` folders traceviz wrote (``owned_ranks``). One import at a time holds the
    folder (a second is refused); the partitions are staged, then swapped in while no
    reader holds the folder, so a reader sees the old dataset or the new one."""
    files = rank_files(directory)
    if not files:
        raise InputError(describe_folder(directory))
    if out.resolve() == directory.resolve():
        raise InputError(f"{out}: is the rank folder itself; write the dataset elsewhere")
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder")
    ranks, how = assign_ranks(files, [_probe_meta(f) for f in files])
    busy = f"{out}: another import into {out} is running; wait for it to end"
    if (out / IMPORT_LOCK).is_file():  # one running now is the reason, not what it wrote
        with folder_lock(out, IMPORT_LOCK, wait=False, busy=busy):
            _drop_stages(out)  # a killed import's, whatever this one goes on to do
    if out.exists():  # refused before a lock file is made in someone else's folder
        _replaced(out, ranks, force, clean=False)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TraceVizError(f"{out}: cannot create the dataset folder ({e.strerror})") from None
    with folder_lock(out, IMPORT_LOCK, wait=False, busy=busy):
        try:  # again, holding the folder: another import may have written it meanwhile
            replaced = _replaced(out, ranks, force, clean=True)
            meta = _import_staged(out, ranks, how, replaced, workers, on_rank, job_map)
        except BaseException:
            if created:
                shutil.rmtree(out, ignore_errors=True)
            raise
    return meta


def _import_staged(out: Path, ranks: list[RankFile], how: str, replaced: list[Path],
                   workers: int | None, on_rank: Callable[[int, int], None] | None,
                   job_map: JobMap | None) -> dict:
    # partitions go to a staging folder inside the dataset, moved into place when every rank
    # is done: a failed import leaves an earlier dataset as it was
    token = uuid.uuid4().hex
    stage = out / f".import-{token}"
    try:
        try:
            stage.mkdir()
            (stage / MARKER).write_text(token)
        except OSError as e:
            raise TraceVizError(f"{out}: cannot write ({e.strerror})") from None
        jobs = [(r.rank, str(r.path), str(stage), token) for r in ranks]
        results = _import_jobs(stage, ranks, jobs, workers, on_rank, job_map)
        meta = {"format": DATASET_FORMAT, "schema_version": 2, "numbered": how,
                "ranks": {str(r): {k: v for k, v in results[r].items() if k != "rank"}
                          for r in sorted(results)}}
        with folder_lock(out, READ_LOCK):  # no reader between the first move and the last
            try:
                (out / DATASET_META).unlink(missing_ok=True)  # incomplete while they move
                for old in replaced:
                    shutil.rmtree(old)
                for r in ranks:
                    (stage / f"rank={r.rank}").rename(out / f"rank={r.rank}")
                with atomic_output(out / DATASET_META, force=True) as tmp:
                    tmp.write_text(json.dumps(meta, default=str))
            except OSError as e:
                raise TraceVizError(f"{out}: cannot write ({e.strerror})") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return meta


def _replaced(out: Path, ranks: list[RankFile], force: bool, clean: bool) -> list[Path]:
    """The folders of ``out`` the import replaces; refused where it would replace
    anything else (``owned_ranks``)."""
    replaced = owned_ranks(out, force, clean)
    for r in ranks:  # a new rank's folder that is there and not traceviz's: kept
        there = out / f"rank={r.rank}"
        if (there.exists() or there.is_symlink()) and there not in replaced:
            raise TraceVizError(f"{there}: holds files traceviz did not write; move them "
                                "away to import here")
    return replaced


def owned_ranks(out: Path, force: bool, clean: bool = False) -> list[Path]:
    """The ``rank=N`` folders of ``out`` that traceviz wrote (each holds its
    ``part-0.parquet`` and nothing else), which ``force`` replaces; what ``out`` holds of
    anyone else is never removed. A folder that holds anything and is no dataset (no
    ``_traceviz.json`` of traceviz's) is refused without ``force``; a symbolic link where
    a rank's folder goes is refused, ``force`` or not."""
    from traceviz.files.folders import is_dataset

    if clean:
        _drop_stages(out)
    held = sorted(p.name for p in out.iterdir()  # an import's staging, its marker not yet
                  if p.name not in (IMPORT_LOCK, READ_LOCK)  # written, is none of them
                  and not (p.name.startswith(".import-") and p.is_dir()))
    if held and not force and is_dataset(out):
        raise TraceVizError(f"{out}: a traceviz dataset already", option="force",
                            action="replace it")
    if held and not force:
        shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
        raise TraceVizError(f"{out}: not a traceviz dataset (no {DATASET_META}) and not "
                            f"empty ({shown})", option="force",
                            action="write the dataset beside what it holds")
    owned = []
    for p in sorted(out.glob("rank=*")):
        if p.is_symlink():
            raise TraceVizError(f"{p}: a symbolic link where a rank's folder goes; "
                                "traceviz neither follows nor removes it: remove it")
        if p.is_dir() and _partition_only(p):
            owned.append(p)
    return owned


STAGE = re.compile(r"\.import-[0-9a-f]{32}")  # ``_import_staged``'s, named by its token


def _drop_stages(out: Path) -> None:
    """Remove the staging folders of imports that are gone; called holding the import
    lock, so no import is writing one. Only a stage of traceviz's goes: its marker holds
    the token of its name, or, killed before the marker was written, it holds nothing
    but rank folders."""
    for p in out.glob(".import-*"):
        if not (STAGE.fullmatch(p.name) and p.is_dir() and not p.is_symlink()):
            continue
        token = p.name.removeprefix(".import-")
        with contextlib.suppress(OSError):
            if (p / MARKER).is_file() and (p / MARKER).read_text() != token:
                continue
            if all(c.name == MARKER or c.name.startswith("rank=") for c in p.iterdir()):
                shutil.rmtree(p, ignore_errors=True)


def _partition_only(folder: Path) -> bool:
    """Whether ``folder`` holds one traceviz partition (``part-0.parquet``) and nothing
    else, or nothing (a rank folder a killed import emptied)."""
    import pyarrow.parquet as pq

    names = [p.name for p in folder.iterdir()]
    if not names:
        return True
    if names != ["part-0.parquet"] or not (folder / names[0]).is_file():
        return False
    try:
        return b"traceviz" in (pq.read_schema(folder / names[0]).metadata or {})
    except (OSError, ValueError):
        return False


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
        from concurrent.futures import as_completed
        from concurrent.futures.process import BrokenProcessPool

        n = min(workers or os.cpu_count() or 1, len(jobs))
        if n <= 1:
            yield from ((i, fn(*j)) for i, j in enumerate(jobs))
            return
        from traceviz.system.pools import kill_pool, main_not_rerun, process_pool

        pool = process_pool(n, [fn.__module__], fork_if_safe=True)
        try:
            try:  # a worker can die before the last submit: that submit raises
                with main_not_rerun():  # the workers start at these submits
                    futures = {pool.submit(fn, *j): i for i, j in enumerate(jobs)}
            except BrokenProcessPool:
                raise _worker_died(n) from None
            for fut in as_completed(futures):
                try:
                    result = fut.result()
                except BrokenProcessPool:
                    raise _worker_died(n) from None
                yield futures[fut], result
        except BaseException:
            # Ctrl-C, a failed rank or an abandoned generator: the queued ranks are not
            # worth finishing (a pool's own exit waits for every one: 10 s at 512 ranks)
            kill_pool(pool)
            raise
        pool.shutdown()
    return run


def _worker_died(n: int) -> TraceVizError:
    return TraceVizError(f"a worker process died while reading the ranks ({n} ran at once): "
                         "killed by the system, out of memory?")
