"""``advise`` on a job, the ranks of one distributed run: the verdict of the rank that sets
the pace (the slowest by median step, by span without steps: ``compare.ranks``), its
findings, and the job's own communication finding from the ranks' arrivals at their
collectives (``compare.arrival``): the rank that launches last, what the others wait for
it, the ranks that wait longest. Each finding says which rank it comes from.
``traceviz.rankset.rank_advice`` reads the ranks and calls this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceviz.analyses.advice.advising import Advice, Context
from traceviz.analyses.advice.finding import Finding
from traceviz.analyses.advice.runkind import RunKind
from traceviz.analyses.compare.ranks import RanksSummary, rank_time
from traceviz.units import fmt_ns, fmt_pct

if TYPE_CHECKING:  # the Trace type only: trace.py's notebook API imports analyses
    from traceviz.trace import Trace

JOB = "job"  # a finding's source when it comes from every rank's arrivals


@dataclass(frozen=True)
class RankVerdict:
    """One rank's verdict: what bounds its step, its step time, what its run is."""

    rank: int
    file: str
    bound: str                   # bound.Bound.by
    share: float | None
    why: str
    step_ns: float | None        # median step (None without steps)
    span_ns: int
    mode: str
    parallel: tuple[str, ...]
    title: str = ""              # bound.Bound.title: the verdict in words, with its cause
    cause: str | None = None     # bound.Bound.cause

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "file": self.file, "bound": self.bound,
                "cause": self.cause, "title": self.title,
                "share": self.share, "why": self.why,
                "step_ns": None if self.step_ns is None else int(round(self.step_ns)),
                "span_ns": self.span_ns, "mode": self.mode, "parallel": list(self.parallel)}


def rank_verdict(trace: Trace, rank: int, file: str, step_ns: float | None,
                 span_ns: int) -> RankVerdict:
    """What bounds ``trace``'s step (``advise``'s verdict, no rule run) and its run kind;
    ``step_ns``/``span_ns``: the rank table's figures, so the two agree."""
    ctx = Context(trace)
    b, run = ctx.bound, ctx.run
    return RankVerdict(rank, file, b.by, b.share, b.why, step_ns, span_ns, run.mode,
                       tuple(run.parallel), b.title, b.cause)


@dataclass
class JobAdvice:
    ranks: list[RankVerdict]
    slowest: int                 # the rank that sets the pace
    file: str
    advice: Advice               # the slowest rank's
    run: RunKind                 # the slowest rank's
    findings: list[tuple[str, Finding]]   # (source: "job" or "rank N", finding)
    summary: RanksSummary

    def to_dict(self) -> dict[str, Any]:
        a = self.summary.arrivals
        return {"ranks": [r.to_dict() for r in self.ranks], "slowest_rank": self.slowest,
                "file": self.file, "run": self.run.to_dict(),
                "steps": self.advice.steps,
                "timed_step": None if self.advice.timed is None
                else self.advice.timed.to_dict(),
                "bound": self.advice.bound.to_dict(),
                "findings": [{"from": src, "rank": None if src == JOB else self.slowest,
                              **f.to_dict(self.advice.steps)} for src, f in self.findings],
                "arrivals": None if a is None else {
                    "straggler": a.straggler, "waits_longest": a.waits_longest,
                    "collectives": len(a.collectives), "clock_corrected": a.clock_corrected,
                    "per_rank": a.to_dict()["per_rank"]},
                "notes": self.summary.notes}


def job_advice(summary: RanksSummary, verdicts: list[RankVerdict], slowest: int,
               file: str, advice: Advice, run: RunKind) -> JobAdvice:
    """The job's answer: the slowest rank's verdict and findings, the job's arrival
    finding after the one that names what bounds the step."""
    mine = [(f"rank {slowest}", f) for f in advice.findings]
    job = straggler(summary, run)
    found = mine[:1] + [(JOB, job)] + mine[1:] if job is not None else mine
    return JobAdvice(sorted(verdicts, key=lambda v: v.rank), slowest, file, advice, run,
                     found, summary)


def straggler(summary: RanksSummary, run: RunKind) -> Finding | None:
    """The rank that launches last into the most collectives, what the others wait for
    it, the ranks that wait longest, and the longest collective's own length (a
    collective every rank starts together is slow by itself, not by a late rank)."""
    a = summary.arrivals
    if a is None or a.straggler is None or a.collectives.empty:
        return None
    per = a.per_rank.set_index("rank")
    s, n = a.straggler, len(a.collectives)
    last = int(per.loc[s, "last"])
    slowest = max(summary.ranks, key=lambda r: (rank_time(r), -r.rank))
    job_ns = rank_time(slowest) * max(slowest.steps, 1)
    evidence = [
        f"rank {s} launches last into {'all ' if last == n else ''}{last:,}"
        f"{'' if last == n else f' of {n:,}'} collectives matched on every rank: the others "
        f"wait {fmt_ns(int(per.loc[s, 'caused_ns']))} in all for its kernels to start; its "
        f"launches come {fmt_ns(int(per.loc[s, 'launch_late_ns']))} after the first "
        "rank's, summed over the collectives"]
    waits = [f"rank {r} {fmt_ns(int(per.loc[r, 'wait_ns']))}"
             + (f" ({fmt_pct(per.loc[r, 'wait_ns'] / job_ns)} of the slowest rank's "
                f"{'steps' if slowest.steps else 'span'})" if job_ns else "")
             for r in a.waits_longest if int(per.loc[r, "wait_ns"])]
    if waits:
        evidence.append("the ranks that wait longest in their collectives: " +
                        ", ".join(waits))
    c = a.collectives
    worst = c.iloc[int(c["max_wait_ns"].to_numpy().argmax())]
    evidence.append(f"the longest single wait: {_named(run, worst['kind'], int(worst['seq']))}"
                    f", {fmt_ns(int(worst['max_wait_ns']))}")
    if (own := _own_length(slowest.collectives, c, run)) is not None:
        evidence.append(own)
    if a.clock_corrected:
        evidence.append("the ranks' clocks differ by over 2 ms: each rank's times are "
                        "corrected by its offset (the collectives' common end)")
    inference = run.mode == "inference"
    action = (f"find what rank {s} does before its collectives: `traceviz analyze DIR "
              "--critical-path` follows the slowest rank's step and names the rank each "
              "collective waited for. Usual causes: uneven work per rank ("
              + ("uneven requests or sequence lengths, " if inference else
                 "uneven batches or sequence lengths, a larger shard, ")
              + "experts routed unevenly), its host launching later ("
              + ("a first call's lazy loading or compiling on that rank, Python or "
                 "garbage collection" if inference else
                 "its data loader, Python or garbage collection, a first call's compile")
              + "), or a slower or shared device")
    return Finding("straggler", f"Rank {s} launches last into "
                   f"{'all ' if last == n else ''}{last:,}"
                   f"{'' if last == n else f' of {n:,}'} collectives", evidence, action,
                   None, None, {"straggler": s, "last": last, "collectives": n,
                                "caused_ns": int(per.loc[s, "caused_ns"]),
                                "waits_longest": a.waits_longest})


def _named(run: RunKind, kernel_kind: str, seq: int) -> str:
    """The ``seq``-th collective of a kernel kind (as arrivals match them) by the kind the
    run's host records give it: NCCL's send/recv kernels of an all-to-all."""
    c = run.collectives
    of = c[c["kernel_kind"] == kernel_kind] if len(c) else c
    kind = str(of["kind"].iloc[seq]) if seq < len(of) else kernel_kind
    mine = int((of["kind"].iloc[:seq + 1] == kind).sum()) if seq < len(of) else seq + 1
    total = int((of["kind"] == kind).sum()) if seq < len(of) else 0
    return (f"{kind} {mine}" + (f" of {total:,}" if total else "")
            + (f" ({kernel_kind} kernels)" if kind != kernel_kind else ""))


def _own_length(mine: pd.DataFrame, c: pd.DataFrame, run: RunKind) -> str | None:
    """The slowest rank's longest collective (``mine``: its ``rank_collectives``), where
    every rank started it within a tenth of its length: its time is its own (the
    transfer, or a set-up), not a wait for a late rank."""
    if mine.empty:
        return None
    dur = (mine["end_ns"] - mine["start_ns"]).to_numpy(np.int64)
    i = int(dur.argmax())
    kind, pg, seq = str(mine["kind"].iloc[i]), str(mine["pg"].iloc[i]), int(mine["seq"].iloc[i])
    row = c[(c["kind"] == kind) & (c["pg"] == pg) & (c["seq"] == seq)]
    if row.empty or int(row["max_wait_ns"].iloc[0]) * 10 > int(dur[i]):
        return None
    return (f"the longest collective, {_named(run, kind, seq)} ({fmt_ns(int(dur[i]))}), "
            f"starts within {fmt_ns(int(row['max_wait_ns'].iloc[0]))} on every rank: its "
            "length is its own (the transfer, or a set-up), not a wait for a late rank")
