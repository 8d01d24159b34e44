"""The sections of ``traceviz analyze``, in the order of ``--json``: the one list
``Summary.to_dict`` walks and ``summary.<key>`` looks a lazy section up in.

A new section is its module (a ``Section``: key, ``compute``, ``json``; beside its
analysis) and one line in ``SECTIONS`` below (or ``register`` at run time); its terminal
render registers by the same key in ``traceviz/render/terminal/sections.py``.
"""

from __future__ import annotations

from traceviz.analyses.efficiency import ops as efficiency
from traceviz.analyses.summary import (
    activity,
    casts,
    comm,
    host,
    launch,
    memory,
    modules,
    phases,
    pipeline,
    ranges,
    streams,
    verdict,
    waits,
    windows,
)
from traceviz.analyses.summary.protocol import Section
from traceviz.analyses.summary.totals import KERNEL_TABLES, NOTES, TIMED_STEP, TIMINGS, TOTALS

# the order of --json (byte for byte what analyze printed before sections were
# registered: launches sit between the totals and the kernel tables)
SECTIONS: list[Section] = [
    TOTALS, verdict.SECTION, windows.SECTION, launch.SECTION, activity.SECTION,
    KERNEL_TABLES, casts.SECTION, phases.SECTION, pipeline.SECTION, modules.SECTION,
    ranges.SECTION,
    TIMINGS, TIMED_STEP, host.SECTION, waits.SECTION, streams.SECTION, comm.SECTION,
    efficiency.SECTION,
    memory.SECTION,
    NOTES,
]


def sections() -> tuple[Section, ...]:
    """Every registered section, in ``--json`` order."""
    return tuple(SECTIONS)


def section(key: str) -> Section:
    """The section named ``key`` (KeyError: none)."""
    for s in SECTIONS:
        if s.key == key:
            return s
    raise KeyError(key)


def json_keys() -> list[str]:
    """Every top-level key ``--json`` can hold, in order."""
    return [k for s in SECTIONS for k in s.json_keys]


def register(new: Section, before: str | None = "notes") -> Section:
    """Add ``new`` before the section named ``before`` (default: the notes, which close
    the JSON; None: at the end). Its key and its JSON keys must be new: two sections
    writing one key would overwrite each other silently."""
    taken = {s.key for s in SECTIONS} | set(json_keys())
    if clash := ({new.key} | set(new.json_keys)) & taken:
        raise ValueError(f"section {new.key!r}: {', '.join(sorted(clash))} already registered")
    at = len(SECTIONS) if before is None else SECTIONS.index(section(before))
    SECTIONS.insert(at, new)
    return new


def unregister(key: str) -> None:
    """Take the section named ``key`` out (a test's section, once the test is done)."""
    SECTIONS.remove(section(key))
