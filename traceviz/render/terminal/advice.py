"""Terminal output of ``whatif`` (the replay and its scenarios) and ``advise``."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceviz.analyses.advice.bound import Bound
from traceviz.analyses.advice.finding import Finding
from traceviz.analyses.advice.job import JobAdvice
from traceviz.analyses.advice.runkind import RunKind
from traceviz.analyses.timed import TimedStep
from traceviz.analyses.whatif.all_ranks import RanksWhatIf
from traceviz.analyses.whatif.engine import WhatIf
from traceviz.render.escape import visible
from traceviz.render.terminal.fit import Col, fitted_table, left_note
from traceviz.units import fmt_ns, fmt_pct, plural


def _per_step(ns: int | None, steps: int) -> str:
    if ns is None:
        return "-"
    return fmt_ns(ns / steps) + "/step" if steps else fmt_ns(ns)


def whatif_render(w: WhatIf, brief: bool = False, width: int = 120) -> RenderableType:
    """The replay's figures and one row per scenario; ``brief``: without the assumptions
    (one screen), which a line then points to."""
    m = w.model
    head = Table.grid(padding=(0, 2))
    where = f"over {plural(w.steps, 'step')}" if w.steps else "over the trace's windows"
    if w.devices > 1:
        where += f", {w.devices} devices summed"
    head.add_row("measured", _per_step(w.measured_ns, w.steps), where)
    head.add_row("replayed as recorded", _per_step(w.replayed_ns, w.steps),
                 f"error {fmt_pct(w.replay_error)}" if w.replay_error is not None else "")
    ts = w.timed
    if ts is not None and ts.known:
        over = f"profiler overhead {ts.overhead_text}"
        f = m.get("timed_host_factor")
        what = (f"{over}; timed predictions replay the trace with every op's time x {f:.2f} "
                "(the profiler's cost taken out)") if w.is_cpu else (
            f"{over}; device busy {fmt_ns(ts.device_ns)}/step; timed predictions replay the "
            f"trace with its host time x {f:.2f} (the profiler's cost taken out), device "
            "work as recorded")
        head.add_row("timed (no profiler)", f"{fmt_ns(ts.timed_ns)}/step",
                     what if f is not None else over)
    else:
        head.add_row("timed", "-", "no timed step in this trace: predictions are profiled "
                                   "time")
    if not w.is_cpu:
        lat = ", ".join(f"device {d}: {fmt_ns(v)}" for d, v in m["launch_latency_ns"].items())
        if any(v < 0 for v in m["launch_latency_ns"].values()):
            lat += " (below 0: kernels start before their launch call returns, or the GPU's "\
                   "clock runs ahead of the host's)"
        head.add_row("learnt", f"launch latency {lat or '-'}",
                     f"{m['inferred_waits'] + m.get('event_waits', 0):,} cross-stream "
                     f"waits ({m.get('event_waits', 0):,} of "
                     f"{m.get('stream_wait_calls', 0):,} stream-wait calls linked), "
                     f"{m['synchronizing_calls']:,} synchronizing calls")
        lost = m["unexplained_waits"]
        if lost["rows"]:
            head.add_row("", f"{lost['rows']:,} rows waited on something the trace does not "
                             f"show ({fmt_ns(lost['ns'])}): kept as recorded", "")
    timed = ts is not None and ts.known and w.steps > 0
    cols = (Col("scenario", "left"),
            *((Col("timed\nstep"), Col("timed\nsaving")) if timed else ()),
            Col("profiled\npredicted", drop=3 if timed else 0),
            Col("profiled\nsaving", drop=4 if timed else 0), Col("%", drop=1),
            Col("why (does not apply, streams)" if brief else "notes", "left",
                wrap=brief, drop=2 if brief else 0))
    rows = []
    notes: dict[str, int] = {}  # each text once, numbered in order of first use
    for s in w.scenarios:
        texts = ([f"does not apply: {s.reason}"] if not s.applies else
                 [s.caveat] if brief else [*s.assumptions, *([s.caveat] if s.caveat else [])])
        if brief:
            cell = visible(texts[0] or "")
        else:
            cell = _marks([notes.setdefault(x, len(notes) + 1) for x in texts if x])
        if not s.applies:
            rows.append([s.name, *(["-", "-"] if timed else []), "-", "-", "", cell])
            continue
        rows.append([s.name, *([fmt_ns(s.timed_step_ns), fmt_ns(s.timed_saving_step_ns)]
                               if timed else []),
                     _per_step(s.predicted_ns, w.steps),
                     _per_step(s.saving_ns, w.steps), fmt_pct(s.saving_fraction), cell])
    t, left = fitted_table("scenarios (saving against the replay as recorded)", cols, rows,
                           width)
    parts: list[RenderableType] = [head, t]
    if note := left_note(width, left):
        parts.append(note)
    if notes:
        parts.append(_footnotes(notes))
    if brief:
        parts.append(Text("each scenario's assumptions: whatif without --brief, or --json",
                          style="dim"))
    return Group(*parts)


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _sup(text: str) -> str:
    """Footnote numbers as superscripts: they are no figure of the run."""
    return text.translate(_SUPERSCRIPT)


def _marks(numbers: list[int]) -> str:
    """A row's footnote markers: "¹⁻⁴" for a run of numbers, "¹⁻³, ⁷" for more."""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(_sup(f"{r[0]}" if len(r) == 1 else f"{r[0]}-{r[-1]}") for r in runs)


def _footnotes(notes: dict[str, int]) -> Table:
    """The scenarios' assumptions, each once, by the number the table's rows name."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column(overflow="fold")
    for text, n in notes.items():
        grid.add_row(_sup(str(n)), Text(visible(text)))
    return grid


def advice_render(findings: list[Finding], steps: int,
                  timed: TimedStep | None = None, bound: Bound | None = None,
                  run: RunKind | None = None) -> RenderableType:
    head: list[RenderableType] = []
    if bound is not None:
        head = [Text.assemble(("What bounds the step: ", "bold"),
                              (bound.title, "bold yellow"),
                              f" ({bound.why})")]
    if run is not None:
        head.append(Text.assemble(("The run: ", "bold"), visible(run.line())))
    head += [Text("")] if head else []
    if not findings:
        return Group(*head, Text("No finding: no rule fired on this trace "
                                 "(docs/advise.md lists what each rule looks for)."))
    return Group(*head, *_findings([(None, f) for f in findings], steps, timed,
                                    bound is not None and bound.cpu))


def _findings(found: Sequence[tuple[str | None, Finding]], steps: int,
              timed: TimedStep | None, cpu: bool = False) -> list[RenderableType]:
    """The findings, numbered, each with its source where one is given (``cpu``: a CPU
    trace's, whose timed replay scales every op, there being no device work)."""
    known = timed is not None and timed.known
    model = "every CPU op's time scaled" if cpu else \
        "device work as recorded and host work scaled"
    parts: list[RenderableType] = [Text(
        "Each saving is a whatif scenario against the replay as recorded; they overlap and "
        "do not add up." + (" Savings are per timed step (no profiler): the replay with "
                            f"{model} so that it lasts the timed step." if known else ""),
        style="dim"), Text(profiled_note(timed), style="dim"), Text("")]
    for i, (source, f) in enumerate(found, 1):
        title = Text(f"{i}. " + (f"[{source}] " if source else "") + f.title, style="bold")
        if f.saving_ns is not None and f.timed_saving_ns_per_step is not None:
            title.append(f"   est. saving {fmt_ns(f.timed_saving_ns_per_step)} per timed step "
                         f"({_per_step(f.saving_ns, steps)} profiled; {f.saving_scenario})",
                         style="green")
        elif f.saving_ns is not None:
            title.append(f"   est. saving {_per_step(f.saving_ns, steps)} profiled "
                         f"({f.saving_scenario})", style="green")
        parts.append(title)
        for e in f.evidence:
            parts.append(Text(f"   {e}"))
        action = f.action if i < len(found) else without_findings_below(f.action)
        parts.append(Text(f"   -> {action}", style="cyan"))
        parts.append(Text(""))
    return parts


def job_advice_render(job: JobAdvice, width: int = 120) -> RenderableType:
    """``advise`` on a rank folder: every rank's verdict, the job's (its slowest rank's),
    then the findings, each with the rank it comes from."""
    a = job.advice
    rows = [[str(v.rank) + (" *" if v.rank == job.slowest else ""),
             fmt_ns(v.step_ns) if v.step_ns is not None else "-", fmt_ns(v.span_ns),
             v.title or v.bound, fmt_pct(v.share), visible(v.file)]
            for v in job.ranks]
    t, left = fitted_table(
        f"Ranks ({len(job.ranks)}): what bounds each one's step", (
            Col("rank"), Col("median\nstep"), Col("span", drop=2),
            Col("bound by", "left"), Col("share", drop=3), Col("file", "left", drop=1)),
        rows, width, caption="* the slowest rank (by median step; by span without "
                             "steps): it sets the job's pace")
    head: list[RenderableType] = [t]
    if note := left_note(width, left):
        head.append(note)
    head += [Text.assemble((f"What bounds the job's step (rank {job.slowest}): ", "bold"),
                           (a.bound.title, "bold yellow"),
                           f" ({a.bound.why})"),
             Text.assemble((f"The run (rank {job.slowest}): ", "bold"),
                           visible(job.run.line())),
             *[Text(n, style="dim") for n in job.summary.notes], Text("")]
    if not job.findings:
        return Group(*head, Text("No finding: no rule fired on the slowest rank and the "
                                 "ranks hold no collectives in common."))
    return Group(*head, *_findings(job.findings, a.steps, a.timed))


# an action that points to "the findings below" (the device-bound verdict's) printed
# last: nothing follows it, so the pointer goes and what it leaned on stands alone
_FINDINGS_BELOW = re.compile(r"the findings below and (`[^`]+`(?: \([^()]*\))?) say\b")


def without_findings_below(action: str) -> str:
    """``action`` without its reference to findings below it (none follow it)."""
    return _FINDINGS_BELOW.sub(r"\1 says", action)


def ranks_whatif_render(w: RanksWhatIf, brief: bool = False, width: int = 120
                        ) -> RenderableType:
    """Every rank replayed together: the job's step (its slowest rank) as replayed and
    under each scenario, then per rank."""
    base = w.job()
    rows = [[s, fmt_ns(w.job(s)), fmt_ns(base - w.job(s)),
             fmt_pct((base - w.job(s)) / base if base else None)] for s in w.scenarios]
    t, _ = fitted_table(
        f"Every rank replayed ({w.collectives:,} collectives joined)",
        (Col("scenario", "left"), Col("predicted"), Col("saving"), Col("%")), rows, width)
    # a line of its own: a caption wraps at the narrow table's width, mid-figure
    job = Text(f"the job's window time is its slowest rank's: {fmt_ns(base)} as replayed",
               style="dim")
    per = [[str(r["rank"]), fmt_ns(r["replayed_ns"]), *(fmt_ns(r[s]) for s in w.scenarios)]
           for r in w.per_rank.to_dict("records")]
    p, _ = fitted_table("per rank", (Col("rank"), Col("replayed"),
                                     *(Col(s) for s in w.scenarios)), per, width)
    parts: list[RenderableType] = [t, job, p, Text(
        "collectives start on every rank once the last rank reaches them and last their "
        "transfer time (the shortest recorded duration over the ranks)", style="dim")]
    if not brief:
        for s in w.scenarios:
            parts += [Text(f"{s}: {n}", style="dim") for n in w.notes.get(s, [])]
    return Group(*parts)


def profiled_note(t: TimedStep | None) -> str:
    """One line saying which time the figures are in."""
    if t is None or not t.known:
        return ("figures are profiled: the trace carries no timed (unprofiled) step to "
                "hold them against")
    steady = (f" (steady, the profiler's start-up step left out: {_ms(t.steady_ns)})"
              if t.steady_ns is not None else "")
    return (f"profiled step {_ms(t.profiled_ns)}{steady} vs timed step {_ms(t.timed_ns)} "
            f"(no profiler): profiler overhead {t.overhead_text}; trace figures are "
            "profiled time")


def _ms(ns: float | None) -> str:
    return fmt_ns(ns) if ns is not None else "–"
