"""The slowest rank's critical path in a rank folder or dataset: its trace read whole, every
other rank's collective kernels, and the rank each collective on the path waited for
(``analyses/critical_path/cross_rank.py``). Reading the ranks lives here, not in the analyses,
which take traces.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceviz.analyses.critical_path.cross_rank import RanksPath, collective_starts, waits_of
from traceviz.analyses.critical_path.path import critical_path

if TYPE_CHECKING:
    from traceviz.trace import Trace


def ranks_path(source: Path, ranks: list[tuple[int, str]], slowest: int,
               annotation: str | None = None, on_rank: Any = None) -> RanksPath:
    """The critical path of rank ``slowest`` of a rank folder or dataset ``source``
    (``ranks``: each rank and its file), with the rank each collective on it waited for.
    Every other rank is read once, for its collective kernels only."""
    files = dict(ranks)
    trace = rank_trace(source, slowest, files[slowest])
    cp = critical_path(trace, annotation)
    others = {}
    for i, (rank, file) in enumerate(ranks, 1):
        if rank != slowest:
            others[rank] = collective_starts(rank_trace(source, rank, file))
        if on_rank is not None:
            on_rank(i, len(ranks))
    return RanksPath(slowest, files[slowest], cp, waits_of(slowest, trace, cp, others))


def rank_trace(source: Path, rank: int, file: str) -> Trace:
    """One rank's trace: its file in a rank folder, its partition in a dataset."""
    from traceviz.files.folders import is_dataset
    from traceviz.parsers import load
    from traceviz.trace import Trace

    if is_dataset(source):
        return Trace.load(Path(source) / f"rank={rank}" / "part-0.parquet")
    return load(Path(source) / file)
