"""The sections of ``traceviz analyze``: one row each in ``Sections``, in the order of
``--json``. ``Summary`` is a ``Sections``: ``summary.<key>`` reads a lazy section, typed.

A new section is its module (a ``Section``: its part of ``--json`` and its ``compute``,
beside its analysis) and one row below, ``key = module.SECTION.row(printed=N)``: the row's
name is its key (written nowhere else), its place its place in ``--json``, ``printed`` its
place on the terminal (the terminal's order is not the JSON's: the header first, the notes
last; rows without ``printed`` are ``--json`` only). Its terminal render is one function
registered by the ``Section`` beside it in ``traceviz/render/terminal/``.
"""

from __future__ import annotations

from traceviz.analyses.efficiency import ops as efficiency_
from traceviz.analyses.summary import activity as activity_
from traceviz.analyses.summary import casts as casts_
from traceviz.analyses.summary import collectives as comm_
from traceviz.analyses.summary import footprint as memory_
from traceviz.analyses.summary import host_split as host_
from traceviz.analyses.summary import launch as launch_
from traceviz.analyses.summary import modules as modules_
from traceviz.analyses.summary import phases as phases_
from traceviz.analyses.summary import pipeline as pipeline_
from traceviz.analyses.summary import ranges as ranges_
from traceviz.analyses.summary import stream_overlap as streams_
from traceviz.analyses.summary import verdict as verdict_
from traceviz.analyses.summary import waits as waits_
from traceviz.analyses.summary import windows as windows_
from traceviz.analyses.summary.protocol import Section
from traceviz.analyses.summary.totals import KERNEL_TABLES, NOTES, TIMED_STEP, TIMINGS, TOTALS


class Sections:
    """Every section of ``analyze``, in the order of ``--json`` (byte for byte what analyze
    printed before sections were registered: launches sit between the totals and the
    kernel tables). ``printed``: the place on the terminal, a lower number first."""

    # ``apart``: computed in a second process while the command works out and prints the
    # header (cli/apart.py): the sections printed after it that read no other section
    totals = TOTALS.row(printed=10)
    bound = verdict_.SECTION.row()
    step_windows = windows_.SECTION.row(printed=20, apart=True)
    launches = launch_.SECTION.row(printed=100)
    kernel_activity = activity_.SECTION.row()
    kernel_tables = KERNEL_TABLES.row(printed=30)
    casts = casts_.SECTION.row(printed=110, apart=True)
    phases = phases_.SECTION.row(printed=40, apart=True)
    input_pipeline = pipeline_.SECTION.row(printed=50, apart=True)
    modules = modules_.SECTION.row(printed=60, apart=True)
    ranges = ranges_.SECTION.row(printed=120, apart=True)
    timings = TIMINGS.row(printed=150)
    timed_step = TIMED_STEP.row()
    host = host_.SECTION.row()
    host_wait_split = waits_.SECTION.row(printed=90)
    stream_overlap = streams_.SECTION.row(printed=70)
    communication = comm_.SECTION.row(printed=80)
    efficiency = efficiency_.SECTION.row(printed=130, apart=True)
    memory = memory_.SECTION.row(printed=140, apart=True)
    notes = NOTES.row(printed=160)  # last: the columns left out, then the notes


# the rows in order (``vars``: a part of the totals is no class attribute to read)
SECTIONS: list[Section] = [s for s in vars(Sections).values() if isinstance(s, Section)]


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


def register(key: str, new: Section, before: str | None = "notes",
             printed: int | None = None) -> Section:
    """Add ``new`` as ``key`` at run time (a test's section), before the section named
    ``before`` (default: the notes, which close the JSON; None: at the end), printed at
    ``printed``. Its key and its JSON keys must be new: two sections writing one key would
    overwrite each other silently; a key ``Summary`` already answers would hide it."""
    taken = {s.key for s in SECTIONS} | set(json_keys())
    if clash := ({key} | set(new.keys or (key,))) & taken:
        raise ValueError(f"section {key!r}: {', '.join(sorted(clash))} already registered")
    # Summary (figures.py, which imports this module) is a Sections: its own fields and
    # properties would hide the section
    if any(key in vars(c) or key in getattr(c, "__dataclass_fields__", {})
           for c in Sections.__subclasses__()):
        raise ValueError(f"section {key!r}: a Summary attribute already")
    at = len(SECTIONS) if before is None else SECTIONS.index(section(before))
    new.__set_name__(Sections, key)  # what a row's name does
    setattr(Sections, key, new.row(printed))
    SECTIONS.insert(at, new)
    return new


def unregister(key: str) -> None:
    """Take the section named ``key`` out (a test's section, once the test is done)."""
    SECTIONS.remove(s := section(key))
    delattr(Sections, key)
    del s.key
