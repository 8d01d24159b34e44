"""``advise`` and ``report`` on a rank folder or dataset: every rank's figures and arrivals
(as ``analyze DIR`` reads them), every rank's verdict in worker processes (one rank's
events at a time), then the slowest rank read whole and advised
(``analyses/advice/job.py``). Reading the ranks lives here, not in the analyses.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from traceviz.rankset.slowest_path import rank_trace

if TYPE_CHECKING:
    from traceviz.analyses.advice.job import JobAdvice, RankVerdict
    from traceviz.analyses.compare.ranks import RanksSummary
    from traceviz.opcost.peaks import Peak
    from traceviz.trace import Trace

Tick = Callable[[int, int], None]


def ranks_summary(source: Path, memory_limit: str | None = None,
                  on_rank: Tick | None = None):
    """``analyze``'s ``RanksSummary`` of a rank folder or dataset."""
    from traceviz.files.folders import is_dataset
    from traceviz.rankset.dataset import analyze_dataset
    from traceviz.rankset.folder import analyze_folder

    if is_dataset(source):
        return analyze_dataset(source, memory_limit, on_rank)
    return analyze_folder(source, on_rank)


def verdict_of(source: str, rank: int, file: str, step_ns: float | None,
               span_ns: int) -> RankVerdict:
    """One rank's verdict from its file or partition (runs in a worker process)."""
    from traceviz.analyses.advice.job import rank_verdict

    return rank_verdict(rank_trace(Path(source), rank, file), rank, file, step_ns, span_ns)


def advise_ranks(source: Path, memory_limit: str | None = None,
                 on_rank: Tick | None = None, workers: int | None = None,
                 peak: Peak | None = None) -> tuple[JobAdvice, Trace]:
    """The job's advice and the slowest rank's trace (``report`` draws it); ``peak``: the
    device's peaks the slowest rank's findings are rated by (``--peak``)."""
    from traceviz.analyses.advice.advising import advise_full
    from traceviz.analyses.advice.job import job_advice
    from traceviz.analyses.advice.runkind import run_kind
    from traceviz.analyses.compare.ranks import slowest_ranks
    from traceviz.rankset.folder import _pool_map

    # two passes over the ranks, one progress bar: figures, then verdicts
    summary: RanksSummary = ranks_summary(source, memory_limit, _twice(on_rank))
    total = len(summary.ranks)
    jobs = [(str(source), r.rank, r.file, r.step_ns, r.span_ns) for r in summary.ranks]
    verdicts = []
    for i, (_, v) in enumerate(_pool_map(verdict_of, workers)(jobs), 1):
        verdicts.append(v)
        if on_rank:
            on_rank(total + i, 2 * total)
    pace = slowest_ranks(summary.ranks, 1)[0]
    trace = rank_trace(source, pace.rank, pace.file)
    return job_advice(summary, verdicts, pace.rank, pace.file, advise_full(trace, peak),
                      run_kind(trace)), trace


def job_traces(source: Path, most: int = 64) -> dict[int, Trace]:
    """Every rank's ``Trace`` of a rank folder or dataset, by rank (``whatif`` replays
    them together: all in memory, so at most ``most`` ranks)."""
    from traceviz.errors import InputError
    from traceviz.files.folders import is_dataset
    from traceviz.rankset.dataset import dataset_meta
    from traceviz.rankset.folder import rank_traces

    if not is_dataset(source):
        return rank_traces(source, most)
    ranks = dataset_meta(source)["ranks"]
    if len(ranks) > most:
        raise InputError(f"{source}: {len(ranks)} ranks; whatif replays at most {most} "
                         "together (give one rank's partition to replay it alone)")
    return {int(r): rank_trace(source, int(r), str(info.get("file", "")))
            for r, info in sorted(ranks.items(), key=lambda kv: int(kv[0]))}


def _twice(on_rank: Tick | None) -> Tick | None:
    """The progress of the first of two passes over the ranks."""
    if on_rank is None:
        return None
    return lambda i, n: on_rank(i, 2 * n)
