"""A job (a folder of rank traces) in ``traceviz report``: its ranks side by side with what
bounds each one's step, the arrivals at its collectives (the rank that launches last, the
ranks that wait), and the findings of the rank that sets the pace and of the job. The
slowest rank's own sections (timeline, kernels, advice) follow as a run of the report.
"""

from __future__ import annotations

import pandas as pd

from traceviz.analyses.advice.job import JOB, JobAdvice
from traceviz.render.report.report_section import Section
from traceviz.units import fmt_ns, fmt_pct


def job_sections(name: str, job: JobAdvice) -> list[Section]:
    """The job's sections, titled by ``name`` (the folder's)."""
    figs = {r.rank: r for r in job.summary.ranks}
    rows = []
    for v in job.ranks:
        r = figs.get(v.rank)
        rows.append({
            "rank": f"{v.rank}{' (slowest)' if v.rank == job.slowest else ''}",
            "file": v.file,
            "median step": "–" if v.step_ns is None else fmt_ns(v.step_ns),
            "span": fmt_ns(v.span_ns),
            "busy": "–" if r is None else fmt_ns(r.busy_ns),
            "communication": "–" if r is None else fmt_ns(r.comm_ns),
            "overlapped": "–" if r is None else fmt_pct(r.comm_overlap_fraction),
            "bound by": v.bound, "share": fmt_pct(v.share),
            "run": v.mode + (f", {' + '.join(v.parallel)} parallel" if v.parallel else "")})
    b = job.advice.bound
    text = (f"{len(job.ranks)} ranks. The slowest (by median step; by span without steps) "
            f"sets the job's pace: rank {job.slowest} ({job.file}). What bounds its step: "
            f"{b.by} ({b.why}). The run: {job.run.line()}."
            + "".join(f" {n}" for n in job.summary.notes))
    out = [Section(f"{name}: the ranks", text, pd.DataFrame(rows))]
    a = job.summary.arrivals
    if a is not None:
        per = pd.DataFrame([{
            "rank": int(r.rank), "arrived last": f"{int(r.last):,} of {len(a.collectives):,}",
            "others waited for it": fmt_ns(int(r.caused_ns)),
            "waited in collectives": fmt_ns(int(r.wait_ns)),
            "launches late (summed)": fmt_ns(int(r.launch_late_ns)),
            "clock offset": fmt_ns(int(r.offset_ns))} for r in a.per_rank.itertuples()])
        said = next((f for src, f in job.findings if src == JOB), None)
        text = ("Every collective matched across the ranks by kind and order; a rank's "
                "wait is the latest kernel start over the ranks less its own. "
                + (f"{said.title}: " + "; ".join(said.evidence) + "." if said else
                   "No rank arrives last."))
        out.append(Section(f"{name}: arrivals at the collectives", text, per))
    found = pd.DataFrame([{
        "#": i, "from": src, "finding": f.title, "evidence": "; ".join(f.evidence),
        "action": f.action} for i, (src, f) in enumerate(job.findings, 1)])
    out.append(Section(f"{name}: findings",
                       f"The findings of rank {job.slowest} (the slowest) and of the job "
                       "(its arrivals), in the order advise gives them.",
                       found if len(found) else None))
    return out
