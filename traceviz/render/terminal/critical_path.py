"""The critical path on the terminal: per step its length and parts, the kernels on it,
and what lies off it."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from traceviz.analyses.critical_path.cross_rank import RanksPath
from traceviz.analyses.critical_path.path import PARTS, CriticalPath
from traceviz.render.terminal.fit import Col, fitted_table, left_note
from traceviz.table.names import distinct_names
from traceviz.units import fmt_ns, fmt_pct, plural

_PART_TEXT = {"host": "host (calls and the time between them)", "launch": "launch latency",
              "device": "device work",
              "queue": "queued (launched work waiting on the device's side)",
              "sync": "sync (waits on the device, another stream or another thread)"}


def critical_path_render(cp: CriticalPath, top: int = 10, width: int = 120) -> Group:
    s = cp.steps
    per = max(len(s), 1)
    unit = "whole trace" if cp.unit == "whole trace" else f"per {cp.unit}"
    totals = cp.totals()
    length = max(totals["length"], 1)
    parts: list[RenderableType] = []
    left: dict[str, list[str]] = {}
    shown = s.head(top)
    key = cp.unit if cp.unit != "whole trace" else "window"
    cols = [Col(key), Col("length"), *(Col(p, drop=len(PARTS) - i) for i, p in enumerate(PARTS))]
    rows = [[str(r["step"]) if r["step"] >= 0 else "all", fmt_ns(r["length_ns"]),
             *(fmt_ns(r[f"{p}_ns"]) for p in PARTS)] for r in shown.to_dict("records")]
    title = "Critical path: what each step's length is made of (the replay's chain of " \
        "binding constraints)"
    table, left["critical path"] = fitted_table(title, cols, rows, width)
    parts.append(table)
    if len(s) > len(shown):
        parts.append(Text(f"({plural(len(s) - len(shown), 'more step')}: --json has them)",
                          style="dim"))
    text = dict(_PART_TEXT)
    if cp.is_cpu:  # the work ops play the kernels
        text.update(host="framework (time between work ops)", device="work ops")
    biggest = max(PARTS, key=lambda p: totals[p])
    parts.append(Text.assemble(
        ("path", "bold"), f" {unit}: {fmt_ns(totals['length'] / per)} = ",
        " + ".join(f"{text[p]} {fmt_pct(totals[p] / length)}" for p in PARTS
                   if totals[p]), f"; mostly {text[biggest]}"))
    if cp.timed_step_ns is not None:
        parts.append(Text(f"the path is profiled time: the timed step (no profiler) is "
                          f"{fmt_ns(cp.timed_step_ns)}, profiler overhead "
                          f"{cp.overhead_text}; the "
                          "profiler's cost is host time, so the host's share is smaller "
                          "unprofiled", style="dim"))
    else:
        parts.append(Text("the path is profiled time (no timed step in this trace)",
                          style="dim"))
    on = cp.kernels[cp.kernels["on_path_ns"] > 0].head(top)
    what = "CPU ops" if cp.is_cpu else "kernels"
    if len(on):
        rows = [[str(r["name"]), fmt_ns(r["on_path_ns"] / per),
                 _count(r["on_path_calls"] / per), fmt_pct(r["share"]), str(r["category"])]
                for r in on.to_dict("records")]
        table, left[f"{what} on the path"] = fitted_table(
            f"{what.capitalize()} on the path ({unit}), by time on it",
            (Col("name", "left", name=True), Col("on path"), Col("calls", drop=2),
             Col("share of\nits time"), Col("category", "left", drop=1)), rows, width)
        parts.append(table)
    off = cp.kernels[cp.kernels["on_path_ns"] == 0]
    if len(off):
        # told apart from every kernel of the path's table, not only these three
        names = ", ".join(distinct_names(off["name"].head(3).astype(str), 40,
                                         among=cp.kernels["name"].astype(str)))
        parts.append(Text(
            f"off the path: {plural(len(off), what[:-1] if what.endswith('s') else what)}, "
            f"{fmt_ns(off['total_ns'].sum() / per)} {unit} ({names}"
            f"{', ...' if len(off) > 3 else ''}): making them faster does not shorten the "
            f"{'window' if cp.unit == 'whole trace' else cp.unit}", style="dim"))
    if len(cp.host_calls) and not cp.is_cpu:
        calls = ", ".join(f"{n} {fmt_ns(v / per)}" for n, v in
                          cp.host_calls.head(3)[["name", "on_path_ns"]].itertuples(index=False))
        parts.append(Text(f"host calls on the path ({unit}): {calls}", style="dim"))
    if note := left_note(width, left):
        parts.append(note)
    parts += [Text(f"note: {n}", style="yellow") for n in cp.notes]
    return Group(*parts)


def _count(x: float) -> str:
    return f"{x:,.0f}" if x == int(x) else f"{x:,.1f}"


def ranks_path_render(rp: RanksPath, top: int = 10, width: int = 120) -> Group:
    """The slowest rank's path, then each collective on it and the rank it waited for."""
    parts: list[RenderableType] = [Text.assemble(
        ("Critical path of the slowest rank", "bold"), f": rank {rp.rank} ({rp.file})")]
    parts.append(critical_path_render(rp.path, top=top, width=width))
    w = rp.waits
    if len(w):
        rows = [[str(r["name"]), str(r["occurrence"]), fmt_ns(r["on_path_ns"]),
                 "–" if r["waited_for"] is None else str(r["waited_for"]),
                 fmt_ns(r["lag_ns"])] for r in w.head(top).to_dict("records")]
        table, left = fitted_table(
            f"Collectives on rank {rp.rank}'s path: the rank each one waited for (the one "
            "that reached it last)",
            (Col("collective", "left", name=True), Col("call", drop=1), Col("on path"),
             Col("waited for\nrank"), Col("started\nlater by")), rows, width)
        parts.append(table)
        if note := left_note(width, left):
            parts.append(note)
    else:
        parts.append(Text(f"no collective on rank {rp.rank}'s path", style="dim"))
    return Group(*parts)
