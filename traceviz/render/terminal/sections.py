"""The terminal side of ``analyze``'s sections: one render per section key, in the order
``analyze`` prints them (not the order of ``--json``: the header first, the notes last).

A section's render lives beside its kind of output (``host.py``, ``efficiency.py``, ...)
and registers here by the key of its ``Section`` (``analyses/summary/registry.py``); a
section without a render prints nothing on the terminal (``--json`` still has it).
"""

from __future__ import annotations

from traceviz.analyses.summary.registry import section
from traceviz.render.terminal import casts, efficiency, host, launches, phases, ranges, totals
from traceviz.render.terminal.page import Render

RENDERS: dict[str, Render] = {
    "totals": totals.header,
    "step_windows": totals.step_windows,
    "kernel_tables": totals.kernel_tables,
    "phases": phases.phases_table,
    "input_pipeline": phases.input_pipeline,
    "modules": phases.modules_table,
    "stream_overlap": host.streams,
    "communication": host.communication,
    "host_wait_split": host.host_wait,
    "launches": launches.launch_overhead,
    "casts": casts.cast_section,
    "ranges": ranges.ranges_section,
    "efficiency": efficiency.efficiency_section,
    "memory": efficiency.memory_section,
    "timings": totals.timings,
    "notes": totals.notes,  # last: the columns left out, then the notes
}


def renders() -> list[tuple[str, Render]]:
    """Every registered render, in print order."""
    return list(RENDERS.items())


def register_render(key: str, render: Render, before: str | None = "notes") -> Render:
    """Print ``render`` for the section ``key`` before the render of ``before`` (default:
    the notes, which close the output; None: at the end)."""
    section(key)  # KeyError: a render of a section no one computes
    if key in RENDERS:
        raise ValueError(f"section {key!r} has a render already")
    items = list(RENDERS.items())
    at = len(items) if before is None else [k for k, _ in items].index(before)
    items.insert(at, (key, render))
    RENDERS.clear()
    RENDERS.update(items)
    return render


def unregister_render(key: str) -> None:
    """Take the render of ``key`` out (a test's section, once the test is done)."""
    del RENDERS[key]
